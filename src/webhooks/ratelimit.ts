// A small in-memory token bucket per key, per replica. No shared store: the limits are a guard
// against floods and runaway senders, not a quota, and a provider that gets 429 retries later.

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

  /** Takes one token for `key`; when none is left, says how long until one is. */
  take(key: string): TakeResult {
    const now = this.#nowMs();
    const { capacity, refillPerSecond } = this.settings;
    const prev = this.#buckets.get(key);
    let tokens = capacity;
    if (prev) {
      tokens = Math.min(capacity, prev.tokens + ((now - prev.at) / 1000) * refillPerSecond);
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
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - tokens) / refillPerSecond)) };
  }
}

/** The sidecar's limits. See docs/webhooks.md ("Rate limits") for why they are keyed this way. */
export interface RateLimitSettings {
  /** All payment deliveries together (one bucket for the route: the provider's IPs are shared). */
  payment: BucketSettings;
  /** All GPU callbacks together, checked before the token (bounds what forgeries can cost us). */
  callbackGlobal: BucketSettings;
  /** Per job (authenticated ns/name/job): a runaway or duplicating sender cannot starve the others. */
  callbackPerJob: BucketSettings;
}

export const DEFAULT_RATE_LIMITS: RateLimitSettings = {
  payment: { capacity: 500, refillPerSecond: 200 },
  callbackGlobal: { capacity: 1000, refillPerSecond: 500 },
  callbackPerJob: { capacity: 20, refillPerSecond: 2 },
};
