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

/**
 * The provider's limits for a submission (RunPod's policy: executionTimeout 5 s to 7 days, ttl 10 s
 * to 7 days, https://docs.runpod.io/serverless/endpoints/send-requests#execution-policies): the
 * job's remaining deadline where it fits them. A remaining time below their minimum is not sent:
 * the controller cancels the job at its deadline instead. `executionTimeoutMs` (the job's own or
 * its plan's, already within the provider's range) is sent too: the smaller of the two limits.
 */
export function providerPolicy(
  spec: { activeDeadlineSeconds?: number },
  status: MediaJobStatus | undefined,
  nowMs: number,
  defaultTtlMs: number,
  executionTimeoutMs?: number,
): { executionTimeout?: number; ttl: number } {
  const remaining = Math.floor(msUntilDeadline(spec, status, nowMs));
  const byDeadline = remaining >= 5_000 && remaining <= 7 * 24 * 3600 * 1000 ? remaining : undefined;
  const limits = [byDeadline, executionTimeoutMs].filter((v) => v !== undefined);
  const executionTimeout = limits.length ? Math.min(...limits) : undefined;
  return {
    ttl: Number.isFinite(remaining) && remaining >= 10_000 ? Math.min(remaining, defaultTtlMs) : defaultTtlMs,
    ...(executionTimeout !== undefined && { executionTimeout }),
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
