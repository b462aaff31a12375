// Pure pieces of the sidecar's intake: token buckets, the WEBHOOKS_RATE_LIMITS syntax, the
// trusted-proxy setting's validation, and the bounded memory of finished events.
import { describe, expect, it } from "vitest";
import { ConfigError, parseEnv } from "../../src/config/env.js";
import { FinishedEvents } from "../../src/webhooks/finished.js";
import { DEFAULT_RATE_LIMITS, parseRateLimits } from "../../src/config/rate-limits.js";
import { trustedProxiesProblem } from "../../src/config/trusted-proxies.js";
import { TokenBuckets, sourceKey } from "../../src/webhooks/ratelimit.js";

describe("TokenBuckets", () => {
  it("peeks without taking, and refills with time", () => {
    let now = 0;
    const b = new TokenBuckets({ capacity: 2, refillPerSecond: 1 }, { nowMs: () => now });
    expect(b.peek("k").ok).toBe(true);
    expect(b.take("k").ok).toBe(true);
    expect(b.take("k").ok).toBe(true);
    expect(b.peek("k")).toEqual({ ok: false, retryAfterSeconds: 1 });
    expect(b.take("k").ok).toBe(false);
    expect(b.peek("other").ok).toBe(true);
    now = 1000;
    expect(b.peek("k").ok).toBe(true);
    expect(b.take("k").ok).toBe(true);
  });
});

describe("WEBHOOKS_RATE_LIMITS", () => {
  it("parses name=rate/burst entries and keeps the others at their defaults", () => {
    expect(parseRateLimits(undefined)).toEqual({});
    expect(parseRateLimits(" payment=2000/4000 , failuresPerSource=0.5/10")).toEqual({
      payment: { refillPerSecond: 2000, capacity: 4000 },
      failuresPerSource: { refillPerSecond: 0.5, capacity: 10 },
    });
    expect(Object.keys(DEFAULT_RATE_LIMITS).sort()).toEqual(
      ["callbackGlobal", "callbackPerJob", "failuresPerSource", "payment"].sort(),
    );
  });

  it("refuses anything else, naming the variable and not the value", () => {
    for (const bad of ["payment=10", "nope=1/1", "payment=0/10", "payment=1/0", "payment=a/b"]) {
      expect(() => parseRateLimits(bad), bad).toThrow();
      let err: unknown;
      try {
        parseEnv({ WEBHOOKS_RATE_LIMITS: bad });
      } catch (e) {
        err = e;
      }
      expect(err, bad).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems.join()).toContain("WEBHOOKS_RATE_LIMITS");
    }
  });
});

describe("WEBHOOKS_TRUSTED_PROXIES", () => {
  it("takes addresses and CIDRs, and nothing else", () => {
    expect(parseEnv({ WEBHOOKS_TRUSTED_PROXIES: "10.0.0.0/8, 127.0.0.1,::1" }).WEBHOOKS_TRUSTED_PROXIES).toBe(
      "10.0.0.0/8, 127.0.0.1,::1",
    );
    for (const ok of ["fd00::/8", "fc00::/7", "fe80::/10", "2001:db8::/48", "::ffff:10.0.0.0/104"])
      expect(trustedProxiesProblem(ok), ok).toBeUndefined();
    for (const bad of ["ingress", "10.0.0.0/8/1", "10.0.0.0/x", "1.2.3", "10.0.0.0/33", "::1/129"])
      expect(() => parseEnv({ WEBHOOKS_TRUSTED_PROXIES: bad }), bad).toThrow(ConfigError);
  });

  it("refuses to trust every address, naming the variable", () => {
    for (const bad of [
      "0.0.0.0/0",
      "::/0",
      "10.0.0.0/8, 0.0.0.0/0",
      "0.0.0.0/1,128.0.0.0/1",
      "::ffff:0:0/96",
      "::/64",
      "2000::/3",
      "::ffff:0.0.0.0/97",
    ]) {
      let err: unknown;
      try {
        parseEnv({ WEBHOOKS_TRUSTED_PROXIES: bad });
      } catch (e) {
        err = e;
      }
      expect(err, bad).toBeInstanceOf(ConfigError);
      const text = (err as ConfigError).problems.join();
      expect(text, bad).toContain("WEBHOOKS_TRUSTED_PROXIES: must not trust every address");
    }
  });
});

describe("sourceKey", () => {
  it("keys IPv4 by address (mapped ones too) and IPv6 by /64", () => {
    expect(sourceKey("203.0.113.9")).toBe("203.0.113.9");
    expect(sourceKey("::ffff:203.0.113.9")).toBe("203.0.113.9");
    expect(sourceKey("2001:db8:1:2::1")).toBe("2001:db8:1:2::/64");
    expect(sourceKey("2001:0db8:0001:0002:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(sourceKey("2001:db8:1:3::1")).toBe("2001:db8:1:3::/64");
    expect(sourceKey("::1")).toBe("0:0:0:0::/64");
    expect(sourceKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
  });
});

describe("FinishedEvents", () => {
  it("keeps the most recently used ids up to its capacity", () => {
    const f = new FinishedEvents(2);
    f.add("a");
    f.add("b");
    f.add("a"); // used again: "b" is now the oldest
    f.add("c");
    expect([f.has("a"), f.has("b"), f.has("c")]).toEqual([true, false, true]);
    expect(f.size).toBe(2);
    f.delete("a");
    expect(f.has("a")).toBe(false);
  });

  it("remembers nothing with capacity 0", () => {
    const f = new FinishedEvents(0);
    f.add("a");
    expect(f.has("a")).toBe(false);
  });
});
