// Each BillingAccount's share of the GPU provider's bill for its billing period (status.cost), kept
// as the provider reports it (cost-allocation.ts). A bucket is settled once it ended
// `settleAfterMs` ago: its allocation is added to the account's settled figures once and never
// computed again, so the share of jobs deleted since (their TTL) stays counted. The buckets after
// that are allocated afresh at each pass (the provider may still add to them). A new period starts
// over at 0. Pure.
import {
  allocateBucket,
  type BucketAllocation,
  type ExecutionSpan,
  type ProviderBucket,
} from "./cost-allocation.js";

/** status.cost of a BillingAccount. */
export interface AccountCost {
  /** The billing period the figures are for (the account's usage period). */
  periodStart: string;
  /** Buckets ending at or before this instant are in the settled figures. */
  settledUntil: string;
  settledMicros: number;
  settledExecutionMs: number;
  /** Settled plus the buckets after them, micro-USD. */
  allocatedMicros: number;
  executionMs: number;
  /** Micro-USD of the settled buckets metered under the worker-cost rule (worker-cost.ts). */
  workerCostMeteredMicros?: number;
}

export interface AccountCostInput {
  account: string;
  /** Start of the account's current billing period, ms. */
  periodStartMs: number;
  current?: AccountCost | undefined;
}

const HOUR_MS = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

/** The account's figures when they are for its current period (a new period starts over). */
const currentOf = (a: AccountCostInput): AccountCost | undefined =>
  a.current !== undefined && Date.parse(a.current.periodStart) === a.periodStartMs ? a.current : undefined;

/** Where an account's settled figures end: the buckets it settles next start there. */
export function settledFrom(a: AccountCostInput): number {
  const current = currentOf(a);
  return current ? Date.parse(current.settledUntil) : a.periodStartMs;
}

/** Where each account's settled figures end and its open buckets begin. */
function bounds(a: AccountCostInput, nowMs: number, settleAfterMs: number) {
  const from = settledFrom(a);
  const to = Math.max(from, Math.floor((nowMs - settleAfterMs) / HOUR_MS) * HOUR_MS);
  return { current: currentOf(a), from, to };
}

/** The earliest instant any account still needs buckets from: where the provider is read from. */
export function costWindowStart(
  accounts: readonly AccountCostInput[],
  nowMs: number,
  settleAfterMs: number,
): number {
  return accounts.reduce((min, a) => Math.min(min, bounds(a, nowMs, settleAfterMs).from), nowMs);
}

/** Every account's status.cost after this pass's buckets and spans. */
export function planAccountCosts(input: {
  accounts: readonly AccountCostInput[];
  buckets: readonly ProviderBucket[];
  spans: readonly ExecutionSpan[];
  nowMs: number;
  settleAfterMs: number;
}): Map<string, AccountCost> {
  const allocated: Array<{ bucket: ProviderBucket; a: BucketAllocation }> = input.buckets.map((bucket) => ({
    bucket,
    a: allocateBucket(bucket, input.spans),
  }));
  const out = new Map<string, AccountCost>();
  for (const acct of input.accounts) {
    const { current, from, to } = bounds(acct, input.nowMs, input.settleAfterMs);
    let settledMicros = current?.settledMicros ?? 0;
    let settledExecutionMs = current?.settledExecutionMs ?? 0;
    let openMicros = 0;
    let openMs = 0;
    for (const { bucket, a } of allocated) {
      if (bucket.startMs < from) continue;
      const micros = a.byAccount.get(acct.account) ?? 0;
      const ms = a.msByAccount.get(acct.account) ?? 0;
      if (bucket.endMs <= to) {
        settledMicros += micros;
        settledExecutionMs += ms;
      } else {
        openMicros += micros;
        openMs += ms;
      }
    }
    out.set(acct.account, {
      periodStart: iso(acct.periodStartMs),
      settledUntil: iso(to),
      settledMicros,
      settledExecutionMs,
      allocatedMicros: settledMicros + openMicros,
      executionMs: settledExecutionMs + openMs,
      // Metered by the cost loop (worker-cost.ts) as buckets settle: carried, never recomputed.
      ...(current?.workerCostMeteredMicros !== undefined && {
        workerCostMeteredMicros: current.workerCostMeteredMicros,
      }),
    });
  }
  return out;
}
