// Small in-memory token buckets per key, per replica. No shared store: the limits are a guard
// against floods and runaway senders, not a quota, and a provider that gets 429 retries later.
//
// The order matters more than the numbers. A limit spent before a request is authenticated is a
// limit a forger can spend for everyone: a few hundred forged requests a second would turn every
// genuine delivery away. So a route authenticates first (a signature or token check is CPU only, no
// I/O) and then:
//   - an authentic request takes from the route's bucket, and only when it is about to cost
//     Kubernetes I/O (a replay answered from memory costs nothing and takes nothing);
//   - a failed check takes from its source address's failure bucket; a source whose failure bucket
//     is empty is refused (429) before its next body is even read.
// The source address is Fastify's req.ip: the peer, or, behind a trusted proxy
// (WEBHOOKS_TRUSTED_PROXIES), the client the proxy names in X-Forwarded-For.
import type { FastifyReply, FastifyRequest } from "fastify";
import type { BucketSettings } from "../config/rate-limits.js";
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
 * Verify first, then limit: the pieces a route needs, in the order they apply.
 *
 *   const guard = new VerifyThenLimit(limits.failuresPerSource, limits.payment);
 *   route: { onRequest: guard.refuseFailingSource }           // before the body is read
 *   handler: if (!verified) { guard.failed(req); return 4xx }  // charges req.ip
 *            const shed = guard.admit(); if (shed) return send(req, reply, shed)  // before I/O
 */
export class VerifyThenLimit {
  readonly failures: TokenBuckets;
  readonly genuine: TokenBuckets;

  constructor(failuresPerSource: BucketSettings, genuine: BucketSettings) {
    this.failures = new TokenBuckets(failuresPerSource);
    this.genuine = new TokenBuckets(genuine);
  }

  /** onRequest hook: a source that spent its failure budget is refused before its body is read. */
  readonly refuseFailingSource = async (
    req: FastifyRequest,
    reply: FastifyReply,
  ): Promise<FastifyReply | undefined> => {
    const t = this.failures.peek(req.ip);
    return t.ok ? undefined : send(req, reply, tooMany(t));
  };

  /** Records a failed signature or token check against the request's source address. */
  failed(req: FastifyRequest): void {
    this.failures.take(req.ip);
  }

  /** For an authenticated request about to cost I/O: undefined to go on, else the 429 to send. */
  admit(key = "route"): Answer | undefined {
    const t = this.genuine.take(key);
    return t.ok ? undefined : tooMany(t);
  }
}
