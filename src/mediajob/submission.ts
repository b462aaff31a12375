// The write-ahead submission protocol:
//
// Pending --intent (rv-guarded write)--> Processing/Sending --/run answered--> Processing/Accepted
//                                              |--answer lost--> Processing/Unconfirmed
// Unconfirmed: adopted by its callback (the sidecar confirms it with the provider), else past the
// confirmation deadline Failed (policy `fail`), or resubmitted (policy `resubmit`): unconfirmed.ts.
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";

/**
 * How long the provider keeps trying a callback after a job ends. RunPod: "If the call fails,
 * Runpod retries up to 2 more times with a 10-second delay"
 * (https://docs.runpod.io/serverless/endpoints/send-requests#webhook-notifications), so 3
 * attempts over about 20 s; one minute leaves room for slow deliveries.
 */
export const CALLBACK_RETRY_WINDOW_MS = 60_000;

/**
 * The status that records the intent to submit, written before the provider is called: Processing,
 * a new attempt, a fresh submission id. Written with the resourceVersion it was computed from, so
 * two writers (a deposed leader, a stale cache) can never both win it.
 */
export function intentStatus(
  status: MediaJobStatus,
  o: { endpointId: string; submissionId: string; now: string },
): MediaJobStatus {
  const { error: _e, providerJobId: _p, ...rest } = status;
  const attempt = (status.attempts ?? 0) + 1;
  return {
    ...rest,
    phase: "Processing",
    endpointId: o.endpointId,
    attempts: attempt,
    submittedAt: o.now,
    startedAt: status.startedAt ?? o.now,
    updatedAt: o.now,
    submission: { attempt, id: o.submissionId, startedAt: o.now, state: "Sending" },
  };
}

/**
 * The provider refused the submission outright (a 4xx, or no connection at all): nothing runs, so
 * the intent is withdrawn and the job waits in Pending to be tried again. Only the same attempt is
 * withdrawn; undefined when the status moved on.
 */
export function withdrawIntent(
  current: MediaJobStatus | undefined,
  before: MediaJobStatus,
  attempt: number,
  now: string,
): MediaJobStatus | undefined {
  if (current?.phase !== "Processing" || current.submission?.attempt !== attempt) return undefined;
  if (current.submission.state !== "Sending") return undefined;
  const { submission: _s, submittedAt: _t, providerJobId: _p, startedAt: _a, ...rest } = current;
  return {
    ...rest,
    phase: "Pending",
    attempts: before.attempts ?? 0,
    updatedAt: now,
    ...(before.submittedAt !== undefined && { submittedAt: before.submittedAt }),
    ...(before.startedAt !== undefined && { startedAt: before.startedAt }),
  };
}

/**
 * Records what /run answered onto the current status (which a callback may already have changed):
 * the provider's id and Accepted, for this attempt only. Undefined when there is nothing to add.
 */
export function recordAccepted(
  current: MediaJobStatus | undefined,
  attempt: number,
  providerJobId: string,
): MediaJobStatus | undefined {
  const sub = current?.submission;
  if (!current || sub?.attempt !== attempt) return undefined;
  if (current.providerJobId && current.providerJobId !== providerJobId) return undefined;
  if (current.providerJobId === providerJobId && sub.state === "Accepted") return undefined;
  return { ...current, providerJobId, submission: { ...sub, state: "Accepted" } };
}

/** The /run answer was lost: the job may be running. Marks the attempt Unconfirmed (once). */
export function markUnconfirmed(status: MediaJobStatus, attempt: number): MediaJobStatus | undefined {
  const sub = status.submission;
  if (status.phase !== "Processing" || sub?.attempt !== attempt || sub.state !== "Sending") return undefined;
  if (status.providerJobId) return undefined;
  return { ...status, submission: { ...sub, state: "Unconfirmed" } };
}

/** Whether the current submission's provider id is unknown: its outcome can only come by callback. */
export const isUnconfirmed = (status: MediaJobStatus | undefined): boolean =>
  status?.phase === "Processing" && !status.providerJobId && status.submission !== undefined;

/**
 * Milliseconds until an unconfirmed submission may be given up on: its callback can no longer
 * arrive once the job's timeout and the provider's callback retries have passed.
 */
export function msUntilConfirmationDeadline(
  job: MediaJob,
  nowMs: number,
  defaultTimeoutSeconds: number,
  windowMs = CALLBACK_RETRY_WINDOW_MS,
): number {
  const since = Date.parse(job.status?.submission?.startedAt ?? job.status?.submittedAt ?? "") || nowMs;
  const timeoutMs = (job.spec.timeoutSeconds ?? defaultTimeoutSeconds) * 1000;
  return since + timeoutMs + windowMs - nowMs;
}
