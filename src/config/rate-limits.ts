// The sidecar's rate limits as configuration: their shape, their defaults and the parser of
// WEBHOOKS_RATE_LIMITS. They live here, not beside the token buckets that enforce them
// (src/webhooks/ratelimit.ts), so that reading the configuration loads nothing of the sidecar.

export interface BucketSettings {
  /** Burst size: requests accepted at once from a full bucket. */
  capacity: number;
  /** Sustained rate: tokens added per second. */
  refillPerSecond: number;
}

/** The sidecar's limits. See docs/webhooks.md ("Rate limits") for why they are keyed this way. */
export interface RateLimitSettings {
  /** Authentic payment deliveries that need Kubernetes I/O, all together (one bucket for the route). */
  payment: BucketSettings;
  /** GPU callbacks with a valid token, all together (one bucket for the route). */
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
