import { ProviderError } from "./errors.js";

// Bounded retries with exponential backoff and full jitter (AWS Architecture Blog, "Exponential
// Backoff And Jitter"): the delay before retry n is uniform in [0, min(maxDelay, base * 2^(n-1))].
// Full jitter spreads the operator's many reconcilers so they do not hit a recovering provider in
// lockstep. Kept free of I/O so it can be tested with a fake clock.

export interface RetryPolicy {
  baseDelayMs: number;
  maxDelayMs: number;
  /** No retry starts, and no retry attempt runs, past start + budgetMs. */
  budgetMs: number;
  maxAttempts: number;
  /** Per-attempt timeout; a retry's timeout is cut to what is left of the budget. */
  timeoutMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  baseDelayMs: 250,
  maxDelayMs: 5_000,
  budgetMs: 30_000,
  maxAttempts: 10,
  timeoutMs: 10_000,
};

// A retry with less time than this left is not worth starting.
const MIN_ATTEMPT_MS = 50;

export function backoffDelay(retry: number, policy: RetryPolicy, random: () => number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, retry - 1));
  return Math.floor(random() * ceiling);
}

/** The wait before the next attempt: Retry-After when the provider gave one, else the backoff. */
function retryDelay(err: ProviderError, retry: number, policy: RetryPolicy, random: () => number): number {
  if (err.code === "RATE_LIMITED" && err.retryAfterMs !== undefined) return err.retryAfterMs;
  return backoffDelay(retry, policy, random);
}

export interface RetryHooks {
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  onRetry?: (err: ProviderError, attempt: number, delayMs: number) => void;
  /** Narrows which retryable errors are retried (e.g. a submission: only those never accepted). */
  retryIf?: (err: ProviderError) => boolean;
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Runs `attempt` until it succeeds, throws something that is not a retryable ProviderError, or the
 * attempts or the time budget run out; then the last error is thrown as is. A call therefore
 * takes at most max(timeoutMs, budgetMs) plus scheduling noise.
 */
export async function withRetries<T>(
  policy: RetryPolicy,
  attempt: (timeoutMs: number, attemptNo: number) => Promise<T>,
  hooks: RetryHooks = {},
): Promise<T> {
  const now = hooks.now ?? Date.now;
  const sleep = hooks.sleep ?? realSleep;
  const random = hooks.random ?? Math.random;
  const deadline = now() + policy.budgetMs;
  let timeoutMs = policy.timeoutMs;
  for (let n = 1; ; n++) {
    try {
      return await attempt(timeoutMs, n);
    } catch (err) {
      if (!(err instanceof ProviderError) || !err.retryable || n >= policy.maxAttempts) throw err;
      if (hooks.retryIf !== undefined && !hooks.retryIf(err)) throw err;
      const delay = retryDelay(err, n, policy, random);
      const left = deadline - now() - delay;
      // Includes a Retry-After longer than the budget: give up now, the caller can requeue.
      if (left < MIN_ATTEMPT_MS) throw err;
      hooks.onRetry?.(err, n, delay);
      await sleep(delay);
      timeoutMs = Math.min(policy.timeoutMs, Math.max(MIN_ATTEMPT_MS, deadline - now()));
    }
  }
}
