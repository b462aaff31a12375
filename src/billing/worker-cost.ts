// The worker-cost pricing rule (docs/design.md, "Pricing rules"): besides, or instead of, the
// seconds its jobs executed, each account is metered its share of what the GPU provider billed
// for worker time (cold starts, execution, idle tails: cost-allocation.ts), in micro-USD, to a
// meter of its own. One meter event per account, endpoint and hourly bucket, sent when the bucket
// is settled (account-cost.ts), so a bucket is metered once: its identifier is the same at every
// pass and on every replica, and the payment provider drops a repeat. Pure.
import { createHash } from "node:crypto";
import { allocateBucket, type ExecutionSpan, type ProviderBucket } from "./cost-allocation.js";

/** One account's share of one settled bucket, as a meter event carries it. */
export interface WorkerCostEvent {
  identifier: string;
  endpointId: string;
  bucketStartMs: number;
  /** Micro-USD: the account's allocated share of the bucket's amount (> 0). */
  micros: number;
  /** Unix seconds: the bucket's last second, so the event lands in the period the bucket belongs to. */
  timestamp: number;
}

/** Stripe's limit on a meter event identifier. */
const IDENTIFIER_MAX = 100;

/**
 * The identifier of an account's share of one bucket: `wc:<account>:<endpoint>:<bucket start>`,
 * or, when longer than the payment provider takes, `wc:` and the SHA-256 of that text.
 */
export function workerCostIdentifier(account: string, endpointId: string, bucketStartMs: number): string {
  const plain = `wc:${account}:${endpointId}:${Math.floor(bucketStartMs / 1000)}`;
  if (plain.length <= IDENTIFIER_MAX) return plain;
  return `wc:${createHash("sha256").update(plain).digest("hex")}`;
}

/**
 * The meter events of the buckets an account settles in this pass: those starting at or after
 * `fromMs` (where its settled figures ended) and ending by `toMs` (where they end now), each
 * with the share the allocation gives the account. A bucket it had no job time in sends nothing.
 */
export function planWorkerCostEvents(input: {
  account: string;
  buckets: readonly ProviderBucket[];
  spans: readonly ExecutionSpan[];
  fromMs: number;
  toMs: number;
}): WorkerCostEvent[] {
  const events: WorkerCostEvent[] = [];
  for (const bucket of input.buckets) {
    if (bucket.startMs < input.fromMs || bucket.endMs > input.toMs) continue;
    const micros = allocateBucket(bucket, input.spans).byAccount.get(input.account) ?? 0;
    if (micros === 0) continue;
    events.push({
      identifier: workerCostIdentifier(input.account, bucket.endpointId, bucket.startMs),
      endpointId: bucket.endpointId,
      bucketStartMs: bucket.startMs,
      micros,
      timestamp: Math.floor(bucket.endMs / 1000) - 1,
    });
  }
  return events.sort((a, b) => a.bucketStartMs - b.bucketStartMs || (a.endpointId < b.endpointId ? -1 : 1));
}
