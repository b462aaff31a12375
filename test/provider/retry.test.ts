import { describe, expect, it } from "vitest";
import { ProviderError } from "../../src/provider/errors.js";
import { backoffDelay, withRetries, type RetryPolicy } from "../../src/provider/retry.js";

const policy: RetryPolicy = {
  baseDelayMs: 100,
  maxDelayMs: 1000,
  budgetMs: 10_000,
  maxAttempts: 10,
  timeoutMs: 2000,
};

/** A fake clock: sleep advances time instantly and records the waits. */
function fakeTime() {
  let t = 0;
  const sleeps: number[] = [];
  return {
    sleeps,
    hooks: {
      now: () => t,
      sleep: async (ms: number) => {
        sleeps.push(ms);
        t += ms;
      },
      random: () => 0.999,
    },
    advance: (ms: number) => (t += ms),
  };
}

const unavailable = () => new ProviderError("PROVIDER_UNAVAILABLE", "down", { status: 503 });

describe("backoffDelay", () => {
  it("is full jitter under an exponential ceiling", () => {
    expect(backoffDelay(1, policy, () => 0.999)).toBe(99);
    expect(backoffDelay(2, policy, () => 0.999)).toBe(199);
    expect(backoffDelay(3, policy, () => 0.999)).toBe(399);
    expect(backoffDelay(10, policy, () => 0.999)).toBe(999);
    expect(backoffDelay(3, policy, () => 0)).toBe(0);
  });
});

describe("withRetries", () => {
  it("retries PROVIDER_UNAVAILABLE until success", async () => {
    const time = fakeTime();
    let calls = 0;
    const result = await withRetries(
      policy,
      async () => {
        if (++calls < 3) throw unavailable();
        return "ok";
      },
      time.hooks,
    );
    expect(result).toBe("ok");
    expect(calls).toBe(3);
    expect(time.sleeps).toEqual([99, 199]);
  });

  it("never retries a 4xx-class error", async () => {
    for (const code of [
      "INVALID_API_KEY",
      "ENDPOINT_NOT_FOUND",
      "JOB_NOT_FOUND",
      "BAD_REQUEST",
      "BAD_RESPONSE",
    ] as const) {
      let calls = 0;
      await expect(
        withRetries(
          policy,
          async () => {
            calls++;
            throw new ProviderError(code, code);
          },
          fakeTime().hooks,
        ),
      ).rejects.toMatchObject({ code });
      expect(calls).toBe(1);
    }
  });

  it("does not retry errors that are not ProviderErrors", async () => {
    let calls = 0;
    await expect(
      withRetries(policy, async () => {
        calls++;
        throw new TypeError("bug");
      }),
    ).rejects.toThrow(TypeError);
    expect(calls).toBe(1);
  });

  it("waits exactly Retry-After when rate limited", async () => {
    const time = fakeTime();
    let calls = 0;
    await withRetries(
      policy,
      async () => {
        if (++calls === 1) throw new ProviderError("RATE_LIMITED", "slow down", { retryAfterMs: 3000 });
        return 1;
      },
      time.hooks,
    );
    expect(time.sleeps).toEqual([3000]);
  });

  it("gives up at once when Retry-After exceeds the budget", async () => {
    const time = fakeTime();
    await expect(
      withRetries(
        { ...policy, budgetMs: 2000 },
        async () => {
          throw new ProviderError("RATE_LIMITED", "slow down", { retryAfterMs: 5000 });
        },
        time.hooks,
      ),
    ).rejects.toMatchObject({ code: "RATE_LIMITED", retryAfterMs: 5000 });
    expect(time.sleeps).toEqual([]);
  });

  it("stops when the time budget is spent and cuts the last attempt's timeout to it", async () => {
    const time = fakeTime();
    const timeouts: number[] = [];
    await expect(
      withRetries(
        { ...policy, budgetMs: 2500, maxDelayMs: 1000 },
        async (timeoutMs) => {
          timeouts.push(timeoutMs);
          time.advance(500); // each attempt takes 500 ms
          throw unavailable();
        },
        time.hooks,
      ),
    ).rejects.toMatchObject({ code: "PROVIDER_UNAVAILABLE" });
    const spent = time.hooks.now();
    expect(spent).toBeLessThanOrEqual(2500 + 500);
    expect(timeouts[0]).toBe(2000);
    expect(timeouts.slice(1).every((t) => t <= 2000)).toBe(true);
    expect(Math.min(...timeouts)).toBeLessThan(2000);
  });

  it("stops after maxAttempts", async () => {
    let calls = 0;
    await expect(
      withRetries(
        { ...policy, maxAttempts: 4 },
        async () => {
          calls++;
          throw unavailable();
        },
        fakeTime().hooks,
      ),
    ).rejects.toMatchObject({ code: "PROVIDER_UNAVAILABLE" });
    expect(calls).toBe(4);
  });

  it("reports each retry", async () => {
    const seen: Array<[string, number, number]> = [];
    let calls = 0;
    await withRetries(
      policy,
      async () => {
        if (++calls < 3) throw unavailable();
      },
      { ...fakeTime().hooks, onRetry: (err, n, d) => seen.push([err.code, n, d]) },
    );
    expect(seen).toEqual([
      ["PROVIDER_UNAVAILABLE", 1, 99],
      ["PROVIDER_UNAVAILABLE", 2, 199],
    ]);
  });
});
