// The GPU provider's bill, allocated to the customers whose jobs ran (docs/design.md, "Cost
// allocation"). RunPod bills worker time per endpoint (cold starts, execution, idle tails, active
// workers) and reports it per endpoint and hourly bucket; each bucket's amount goes to the accounts
// in proportion to their jobs' execution time inside it, in integer micro-USD, the remainder by
// largest remainder (ties by account name). A bucket with no job time inside (idle or active
// workers nobody's job reached) is `unallocated`, shown per endpoint, never spread silently: per
// bucket, allocated + unallocated is the provider's amount exactly. Pure.

/** One provider billing record: an endpoint's amount over one bucket. */
export interface ProviderBucket {
  endpointId: string;
  startMs: number;
  endMs: number;
  amountMicros: number;
}

/** One attempt's execution on an endpoint: [startMs, endMs). */
export interface ExecutionSpan {
  account: string;
  endpointId: string;
  startMs: number;
  endMs: number;
}

export interface BucketAllocation {
  /** Micro-USD per account (only accounts with time in the bucket). */
  byAccount: Map<string, number>;
  /** Execution ms per account inside the bucket. */
  msByAccount: Map<string, number>;
  unallocatedMicros: number;
}

/** USD as RunPod answers it, to integer micro-USD, rounded to the nearest (half up). */
export function usdToMicros(usd: number): number {
  return Math.round(usd * 1_000_000);
}

/** The bucket's amount split over the spans' time inside it. */
export function allocateBucket(bucket: ProviderBucket, spans: readonly ExecutionSpan[]): BucketAllocation {
  const msByAccount = new Map<string, number>();
  for (const s of spans) {
    if (s.endpointId !== bucket.endpointId) continue;
    const ms = Math.min(s.endMs, bucket.endMs) - Math.max(s.startMs, bucket.startMs);
    if (ms > 0) msByAccount.set(s.account, (msByAccount.get(s.account) ?? 0) + ms);
  }
  const total = [...msByAccount.values()].reduce((a, b) => a + b, 0);
  const byAccount = new Map<string, number>();
  if (total === 0 || bucket.amountMicros === 0)
    return { byAccount, msByAccount, unallocatedMicros: bucket.amountMicros };
  // Exact integer shares: floor(amount × ms / total), in BigInt (the product passes 2^53).
  const amount = BigInt(bucket.amountMicros);
  const t = BigInt(total);
  const shares = [...msByAccount.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([account, ms]) => {
      const scaled = amount * BigInt(ms);
      return { account, floor: scaled / t, remainder: scaled % t };
    });
  let left = amount - shares.reduce((n, s) => n + s.floor, 0n);
  // Largest remainder first; ties by account name (the sort above is stable).
  const byRemainder = [...shares].sort((a, b) =>
    a.remainder === b.remainder ? 0 : a.remainder > b.remainder ? -1 : 1,
  );
  for (const s of byRemainder) {
    if (left === 0n) break;
    s.floor += 1n;
    left -= 1n;
  }
  for (const s of shares) byAccount.set(s.account, Number(s.floor));
  return { byAccount, msByAccount, unallocatedMicros: 0 };
}

/** What an account was allocated over some buckets. */
export interface AccountAllocation {
  micros: number;
  executionMs: number;
}

/**
 * Every bucket allocated and summed: per account, and per endpoint what no known account took: the
 * buckets with no job time, and the shares of jobs whose account is not in `known` (no account, or
 * no BillingAccount of it): they ran and were billed, and are nobody's to charge. Buckets outside
 * [fromMs, toMs) are left out (a bucket is in when it starts inside).
 */
export function allocate(
  buckets: readonly ProviderBucket[],
  spans: readonly ExecutionSpan[],
  known?: ReadonlySet<string>,
  fromMs = -Infinity,
  toMs = Infinity,
): { accounts: Map<string, AccountAllocation>; unallocated: Map<string, number> } {
  const accounts = new Map<string, AccountAllocation>();
  const unallocated = new Map<string, number>();
  const leave = (endpointId: string, micros: number) => {
    if (micros > 0) unallocated.set(endpointId, (unallocated.get(endpointId) ?? 0) + micros);
  };
  for (const b of buckets) {
    if (b.startMs < fromMs || b.startMs >= toMs) continue;
    const a = allocateBucket(b, spans);
    for (const [account, micros] of a.byAccount) {
      if (known !== undefined && !known.has(account)) {
        leave(b.endpointId, micros);
        continue;
      }
      const cur = accounts.get(account) ?? { micros: 0, executionMs: 0 };
      cur.micros += micros;
      cur.executionMs += a.msByAccount.get(account) ?? 0;
      accounts.set(account, cur);
    }
    leave(b.endpointId, a.unallocatedMicros);
  }
  return { accounts, unallocated };
}
