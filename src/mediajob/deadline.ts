// Suspension and the active deadline (batch/v1 Job's suspend and activeDeadlineSeconds).
import type { MediaJobStatus } from "../crds/mediajob.js";
import { ERROR_MAX_CHARS, clip } from "./job.js";

/** The reason (Succeeded condition, Event, status.error prefix) of a job past its active deadline. */
export const DEADLINE_EXCEEDED = "DeadlineExceeded";

/**
 * Milliseconds left before spec.activeDeadlineSeconds, counted from the first submission (since the
 * last resumption); Infinity without a deadline or before the first submission.
 */
export function msUntilDeadline(
  spec: { activeDeadlineSeconds?: number },
  status: MediaJobStatus | undefined,
  nowMs: number,
): number {
  const since = Date.parse(status?.startedAt ?? "");
  if (spec.activeDeadlineSeconds === undefined || Number.isNaN(since)) return Infinity;
  return since + spec.activeDeadlineSeconds * 1000 - nowMs;
}

/** Failed for good: the deadline is a limit, not a failed attempt to retry. */
export function deadlineExceeded(status: MediaJobStatus, now: string, what: string): MediaJobStatus {
  return {
    ...status,
    phase: "Failed",
    updatedAt: now,
    completedAt: now,
    error: clip(
      `${DEADLINE_EXCEEDED}: the job ran past spec.activeDeadlineSeconds since its first submission (${what})`,
      ERROR_MAX_CHARS,
    ),
  };
}

/** RunPod's bounds on a request's policy (https://docs.runpod.io/serverless/endpoints/send-requests#execution-policies). */
export const PROVIDER_LIMITS = {
  /** executionTimeout and ttl: at most 7 days. */
  maxMs: 7 * 24 * 3600 * 1000,
  /** executionTimeout: at least 5 s. */
  minExecutionTimeoutMs: 5_000,
  /** ttl: at least 10 s. */
  minTtlMs: 10_000,
} as const;

/**
 * How long a job may wait in the provider's queue before it starts, when nothing shorter is asked:
 * RunPod's default ttl (24 h), which before it covered the run too was the queue's limit alone.
 */
export const DEFAULT_QUEUE_ALLOWANCE_MS = 24 * 3600 * 1000;

export interface PolicyInput {
  spec: { activeDeadlineSeconds?: number };
  /** The status the submission is made from (its intent): where the deadline counts from. */
  status: MediaJobStatus | undefined;
  nowMs: number;
  /** policy.executionTimeout from the job or its account's plan, ms (within the provider's range). */
  executionTimeoutMs?: number;
  /** The endpoint's own execution timeout as the provider reports it, ms: what applies when none is sent. */
  endpointExecutionTimeoutMs?: number;
  /** How long the job may wait in the provider's queue before it starts, ms. */
  queueAllowanceMs?: number;
}

/**
 * The provider's policy for a submission (RunPod: executionTimeout 5 s to 7 days; ttl 10 s to 7
 * days, "the total lifespan" of the job, queue plus execution, after which the job is removed and
 * its status answers 404: https://docs.runpod.io/serverless/endpoints/send-requests#execution-policies).
 *
 * - executionTimeout: the smaller of the job's (or its plan's) and what is left of its active
 *   deadline where that fits the provider's range; absent when neither applies (the endpoint's own
 *   then applies).
 * - ttl: the longest the run may take (the executionTimeout sent, else the endpoint's, else the
 *   provider's maximum) plus the queue allowance, within 10 s and 7 days. Never the deadline: a
 *   ttl that ran out before the controller's cancel would make the provider forget a job it ran,
 *   and with it the usage that job is billed for. The deadline is the controller's to enforce, by
 *   its cancel at the deadline, after which the job's status (and usage) is still readable.
 *
 * Under the earlier reading of ttl (the longest a job may wait in the queue) the same ttl holds:
 * it is at least the queue allowance.
 */
export function providerPolicy(input: PolicyInput): { executionTimeout?: number; ttl: number } {
  const { maxMs, minExecutionTimeoutMs, minTtlMs } = PROVIDER_LIMITS;
  const remaining = Math.floor(msUntilDeadline(input.spec, input.status, input.nowMs));
  const byDeadline = remaining >= minExecutionTimeoutMs && remaining <= maxMs ? remaining : undefined;
  const limits = [byDeadline, input.executionTimeoutMs].filter((v) => v !== undefined);
  const executionTimeout = limits.length ? Math.min(...limits) : undefined;
  const run = executionTimeout ?? input.endpointExecutionTimeoutMs ?? maxMs;
  const queue = input.queueAllowanceMs ?? DEFAULT_QUEUE_ALLOWANCE_MS;
  return {
    ttl: Math.max(minTtlMs, Math.min(maxMs, run + queue)),
    ...(executionTimeout !== undefined && { executionTimeout }),
  };
}

/** The reason (Succeeded condition, Event, status.error prefix) of a job that never started in time (start-deadline.ts). */
export const START_DEADLINE_EXCEEDED = "StartDeadlineExceeded";

/** The reason (Succeeded condition, Event, status.error prefix) of a job the provider forgot past its ttl. */
export const EXPIRED = "Expired";

/**
 * When the provider forgets the job at the latest: its submission's time plus the ttl sent. A
 * status 404 after it is the ttl's doing (Expired), one before it a lost job.
 */
export const providerExpiry = (submittedAtMs: number, ttlMs: number): string =>
  new Date(submittedAtMs + ttlMs).toISOString();

/** Whether the provider's ttl of the current submission has passed (false when it is not recorded). */
export function pastProviderTtl(status: MediaJobStatus | undefined, nowMs: number): boolean {
  const at = Date.parse(status?.submission?.expiresAt ?? "");
  return !Number.isNaN(at) && nowMs >= at;
}

/**
 * The provider no longer knows a job whose ttl (queue plus run) has passed: Failed for good, never
 * replayed blindly. It may have run, and been billed, without its end ever being read.
 */
export function expiredStatus(status: MediaJobStatus, now: string, providerJobId: string): MediaJobStatus {
  return {
    ...status,
    phase: "Failed",
    updatedAt: now,
    completedAt: now,
    error: clip(
      `${EXPIRED}: the provider no longer knows job ${providerJobId}: its policy.ttl (queue plus run) ran out at ` +
        `${status.submission?.expiresAt ?? "its expiry"} before the job was seen to end. It may have run at the provider; ` +
        "it is not submitted again (create the job again to run it, with a longer executionTimeoutSeconds if it needs one)",
      ERROR_MAX_CHARS,
    ),
  };
}

/**
 * Suspended while submitted: the submission was cancelled at the provider (or never ran), so the
 * job waits in Pending for its resumption, which is a new submission with a fresh id; the deadline
 * counts again from it, as Job's does. A late callback of the cancelled submission no longer
 * matches (no provider id, no submission).
 */
export function suspendedStatus(status: MediaJobStatus, now: string): MediaJobStatus {
  const { submission: _s, providerJobId: _p, submittedAt: _t, startedAt: _a, ...rest } = status;
  return { ...rest, phase: "Pending", updatedAt: now, suspensions: (status.suspensions ?? 0) + 1 };
}
