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
import { isIPv6 } from "node:net";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { BucketSettings } from "../config/rate-limits.js";
import { expandIPv6 } from "../config/trusted-proxies.js";
import { refuse, send, type Answer } from "./replies.js";

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
