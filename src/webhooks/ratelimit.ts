// Small in-memory token buckets per key, per replica. No shared store: the limits are a guard
// against floods and runaway senders, not a quota, and a provider that gets 429 retries later.
//
// The order matters more than the numbers. A limit spent before a request is authenticated is a
// limit a forger can spend for everyone: behind an ingress every sender has the ingress pod's
// address, so a few dozen forged requests would turn every genuine delivery away. So a route
// verifies first (a signature or token check is CPU only, no I/O; an HMAC is cheaper than that
// risk), and only then:
//   - an authentic request takes from the route's bucket, and only when it is about to cost
//     Kubernetes I/O (a replay answered from memory costs nothing and takes nothing);
//   - a failed check takes from its source's failure bucket; once that is empty the source's
//     further FAILED requests are answered 429 and their connection closed. Nothing is refused
//     before it is verified: a request that verifies passes, whatever its source did before.
// What bounds unverified work instead is its size and its time: the checks that need no body
// run before the body is read, bodies are small, and requests whose sender is not verified yet
// are capped in flight per source and in total (InFlight, below).
// The source is Fastify's req.ip (the peer, or, behind a trusted proxy (WEBHOOKS_TRUSTED_PROXIES),
// the client the proxy names in X-Forwarded-For), with IPv6 sources taken per /64 (sourceKey):
// one host is usually given a whole /64, so per address it could take 2^64 budgets.
import { isIP, isIPv6 } from "node:net";
import type { FastifyReply, FastifyRequest } from "fastify";
import { refuse, send, type Answer } from "./replies.js";

export interface BucketSettings {
  /** Burst size: requests accepted at once from a full bucket. */
  capacity: number;
  /** Sustained rate: tokens added per second. */
  refillPerSecond: number;
}

export type TakeResult = { ok: true } | { ok: false; retryAfterSeconds: number };

export class TokenBuckets {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #maxKeys: number;
  readonly #nowMs: () => number;

  constructor(
    readonly settings: BucketSettings,
    opts: { maxKeys?: number; nowMs?: () => number } = {},
  ) {
    if (!(settings.capacity >= 1) || !(settings.refillPerSecond > 0)) {
      throw new Error("a token bucket needs capacity >= 1 and refillPerSecond > 0");
    }
    this.#maxKeys = opts.maxKeys ?? 10_000;
    this.#nowMs = opts.nowMs ?? (() => performance.now());
  }

  #tokens(key: string, now: number): number {
    const prev = this.#buckets.get(key);
    if (!prev) return this.settings.capacity;
    return Math.min(
      this.settings.capacity,
      prev.tokens + ((now - prev.at) / 1000) * this.settings.refillPerSecond,
    );
  }

  #refusal(tokens: number): TakeResult {
    return {
      ok: false,
      retryAfterSeconds: Math.max(1, Math.ceil((1 - tokens) / this.settings.refillPerSecond)),
    };
  }

  /** Takes one token for `key`; when none is left, says how long until one is. */
  take(key: string): TakeResult {
    const now = this.#nowMs();
    const tokens = this.#tokens(key, now);
    if (this.#buckets.has(key)) {
      this.#buckets.delete(key); // re-inserted below: the Map's order is least recently used first
    } else if (this.#buckets.size >= this.#maxKeys) {
      const oldest = this.#buckets.keys().next().value;
      if (oldest !== undefined) this.#buckets.delete(oldest);
    }
    if (tokens >= 1) {
      this.#buckets.set(key, { tokens: tokens - 1, at: now });
      return { ok: true };
    }
    this.#buckets.set(key, { tokens, at: now });
    return this.#refusal(tokens);
  }

  /** Whether `key` has a token left, without taking it. */
  peek(key: string): TakeResult {
    const tokens = this.#tokens(key, this.#nowMs());
    return tokens >= 1 ? { ok: true } : this.#refusal(tokens);
  }
}

/** The sidecar's limits. See docs/webhooks.md ("Rate limits") for why they are keyed this way. */
export interface RateLimitSettings {
  /** Authentic payment deliveries that need Kubernetes I/O, all together (one bucket for the route). */
  payment: BucketSettings;
  /** All GPU callbacks together, checked before the token (bounds what forgeries can cost us). */
  callbackGlobal: BucketSettings;
  /** Per job (authenticated ns/name/job): a runaway or duplicating sender cannot starve the others. */
  callbackPerJob: BucketSettings;
  /** Failed signature or token checks, per source address. */
  failuresPerSource: BucketSettings;
}

export const DEFAULT_RATE_LIMITS: RateLimitSettings = {
  payment: { capacity: 500, refillPerSecond: 200 },
  callbackGlobal: { capacity: 1000, refillPerSecond: 500 },
  callbackPerJob: { capacity: 20, refillPerSecond: 2 },
  failuresPerSource: { capacity: 50, refillPerSecond: 10 },
};

/**
 * Parses WEBHOOKS_RATE_LIMITS: `name=rate/burst` entries separated by commas, e.g.
 * `payment=2000/4000,failuresPerSource=20/100`. Names are the keys of RateLimitSettings; entries
 * not given keep their defaults. Throws on anything else (the configuration parser reports it).
 */
export function parseRateLimits(text: string | undefined): Partial<RateLimitSettings> {
  const out: Partial<RateLimitSettings> = {};
  if (text === undefined || text.trim() === "") return out;
  for (const entry of text.split(",")) {
    const m = /^\s*([A-Za-z]+)\s*=\s*(\d+(?:\.\d+)?)\s*\/\s*(\d+)\s*$/.exec(entry);
    const name = m?.[1] as keyof RateLimitSettings | undefined;
    if (!m || !name || !(name in DEFAULT_RATE_LIMITS))
      throw new Error(
        `expected name=rate/burst with a name among ${Object.keys(DEFAULT_RATE_LIMITS).join(", ")}`,
      );
    const refillPerSecond = Number(m[2]);
    const capacity = Number(m[3]);
    if (!(refillPerSecond > 0) || !(capacity >= 1)) throw new Error(`${name}: rate > 0 and burst >= 1`);
    out[name] = { capacity, refillPerSecond };
  }
  return out;
}

const tooMany = (t: { retryAfterSeconds: number }): Answer =>
  refuse(429, "rate_limited", { "retry-after": String(t.retryAfterSeconds) });

/**
 * The key a source is budgeted under: an IPv4 address as it is (an IPv4-mapped IPv6 address as
 * its IPv4 address), an IPv6 address by its /64 prefix.
 */
export function sourceKey(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1]!;
  if (!isIPv6(ip)) return ip;
  return `${expandIPv6(ip).slice(0, 4).join(":")}::/64`;
}

/** The eight 16-bit groups of an IPv6 address, as lowercase hex without leading zeros. */
function expandIPv6(ip: string): string[] {
  let text = ip.split("%")[0]!.toLowerCase(); // a zone id is not part of the address
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split("::") as [string, string | undefined];
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const zeros = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill("0");
  return [...left, ...zeros, ...right].map((g) => parseInt(g, 16).toString(16));
}

/**
 * What is wrong with a WEBHOOKS_TRUSTED_PROXIES value, or undefined: addresses or CIDRs separated
 * by commas, none of them wider than a private network. Trusting every address (0.0.0.0/0, ::/0,
 * ::ffff:0:0/96, or any IPv4 range wider than /8) would let any sender name its own source in
 * X-Forwarded-For, and so spend, or escape, any budget it likes.
 */
export function trustedProxiesProblem(text: string): string | undefined {
  for (const entry of text.split(",")) {
    const [addr = "", bits, extra] = entry.trim().split("/");
    const family = isIP(addr);
    if (extra !== undefined || family === 0 || (bits !== undefined && !/^\d{1,3}$/.test(bits)))
      return "must be IP addresses or CIDRs separated by commas";
    const prefix = bits === undefined ? (family === 4 ? 32 : 128) : Number(bits);
    if (prefix > (family === 4 ? 32 : 128)) return "must be IP addresses or CIDRs separated by commas";
    if (tooBroad(addr, family, prefix))
      return "must not trust every address (0.0.0.0/0, ::/0 or any range wider than a private network): list the ingress controller's pod addresses or CIDR";
  }
  return undefined;
}

function tooBroad(addr: string, family: number, prefix: number): boolean {
  if (family === 4) return prefix < 8;
  const groups = expandIPv6(addr).map((g) => parseInt(g, 16));
  const bitsOf = (n: number) =>
    groups
      .flatMap((g) => [...g.toString(2).padStart(16, "0")])
      .slice(0, n)
      .join("");
  // IPv4-mapped (::ffff:a.b.c.d): judged as the IPv4 range it is; a prefix under 96 that
  // contains ::ffff:0:0/96 covers all of IPv4.
  const mapped = "0".repeat(80) + "1".repeat(16);
  if (prefix >= 96 && bitsOf(96) === mapped) return prefix - 96 < 8;
  if (prefix < 96 && mapped.startsWith(bitsOf(prefix))) return true;
  // Wider than /16 only inside the private (fc00::/7) and link-local (fe80::/10) ranges.
  if (prefix >= 16) return false;
  const first = groups[0]!;
  return !((prefix >= 7 && (first & 0xfe00) === 0xfc00) || (prefix >= 10 && (first & 0xffc0) === 0xfe80));
}

/**
 * Verify first, then limit: the pieces a route needs, in the order they apply.
 *
 *   const guard = new VerifyThenLimit(limits.failuresPerSource, limits.payment);
 *   handler: if (!verified) return send(req, reply, guard.failed(req) ?? refuse(400, ...))
 *            const shed = guard.admit(); if (shed) return send(req, reply, shed)  // before I/O
 */
export class VerifyThenLimit {
  readonly failures: TokenBuckets;
  readonly genuine: TokenBuckets;

  constructor(failuresPerSource: BucketSettings, genuine: BucketSettings) {
    this.failures = new TokenBuckets(failuresPerSource);
    this.genuine = new TokenBuckets(genuine);
  }

  /**
   * Refuses nothing. Routes once refused a source that had spent its failure budget here, before
   * verifying its request; behind a proxy that let forgers lock genuine senders out. Kept as a
   * hook so routes registered with it keep working; `failed` now answers failing sources.
   */
  readonly refuseFailingSource = async (): Promise<undefined> => undefined;

  /**
   * Records a failed signature or token check against the request's source. Returns the 429 to
   * send instead of the route's own refusal when the source had already spent its failure budget
   * (with `connection: close`, so a flood pays for a new connection each time); else undefined.
   */
  failed(req: FastifyRequest): Answer | undefined {
    const t = this.failures.take(sourceKey(req.ip));
    return t.ok
      ? undefined
      : refuse(429, "rate_limited", { "retry-after": String(t.retryAfterSeconds), connection: "close" });
  }

  /** For an authenticated request about to cost I/O: undefined to go on, else the 429 to send. */
  admit(key = "route"): Answer | undefined {
    const t = this.genuine.take(key);
    return t.ok ? undefined : tooMany(t);
  }
}

export interface InFlightSettings {
  /** Requests of one source (sourceKey) in flight at once. */
  perSource: number;
  /** Requests of all sources together in flight at once. */
  total: number;
}

/**
 * Requests in flight whose sender is not verified yet (a payment event's signature can only be
 * checked once its body is read): at most `perSource` per source and `total` in all, counted from
 * onRequest until the response is finished or the connection closed. What they can hold is then
 * bounded: total x the route's body limit. A refused request is answered 429, which the payment
 * provider retries; a sender that is verified before its body (a callback's token) never counts.
 */
export class InFlight {
  readonly #bySource = new Map<string, number>();
  readonly #release = new WeakMap<FastifyRequest, () => void>();
  #total = 0;

  constructor(readonly settings: InFlightSettings) {
    if (!(settings.perSource >= 1) || !(settings.total >= 1))
      throw new Error("in-flight caps must be at least 1");
  }

  get total(): number {
    return this.#total;
  }

  /** onRequest hook: counts the request until its response closes or it is verified, or refuses it (429). */
  readonly enter = async (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    const key = sourceKey(req.ip);
    const mine = this.#bySource.get(key) ?? 0;
    if (mine >= this.settings.perSource || this.#total >= this.settings.total)
      return send(req, reply, refuse(429, "too_many_in_flight", { "retry-after": "1", connection: "close" }));
    this.#bySource.set(key, mine + 1);
    this.#total++;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.#total--;
      const left = (this.#bySource.get(key) ?? 1) - 1;
      if (left > 0) this.#bySource.set(key, left);
      else this.#bySource.delete(key);
    };
    this.#release.set(req, release);
    reply.raw.once("close", release);
    return undefined;
  };

  /** The request proved its sender (its signature matched): it no longer counts. */
  verified(req: FastifyRequest): void {
    this.#release.get(req)?.();
  }
}
