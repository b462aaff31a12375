// The steps of the write-ahead submission, as the statuses each step writes. The reconciler runs
// them in order, by name: (1) persist the intent with the resourceVersion the pass read, so a
// stale cache or a deposed leader loses the race before the provider hears of the job; (2) check
// the leader fence; (3) POST /run once (the client retries only what the provider provably did
// not take); (4) record the provider's id. An answer lost at (3) leaves the job Processing and
// Unconfirmed: its callback adopts it, and it is not sent again before its confirmation deadline.
import type { AttemptIOPlan } from "../storage/attempt-io.js";
import { confirmAdoption } from "../callback/adoption.js";
import { callbackExpiry, type CallbackTarget } from "../callback/token.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { withCondition, withPhaseConditions } from "./conditions.js";
import { providerExpiry, providerPolicy } from "./deadline.js";
import { queueAllowanceMs, startNotSeen } from "./start-deadline.js";
import { effectiveJobId, providerRequestId } from "./job.js";
import { submissionIdentity, withSubmissionIdentity } from "./submission-identity.js";
import {
  intentStatus,
  markUnconfirmed,
  msUntilConfirmationDeadline,
  recordAccepted,
  withdrawIntent,
} from "./submission.js";

/** Everything the write-ahead sequence sends and writes, decided before any of it happens. */
export interface SubmissionPlan {
  endpointId: string;
  /** The status of the job before the intent: what a withdrawn intent goes back to. */
  before: MediaJobStatus;
  /** Step (1): the intent, written with the resourceVersion the pass read. */
  intent: MediaJobStatus;
  attempt: number;
  /** Step (3): the /run request, less its callback URL (signed by the reconciler: the key stays there). */
  request: {
    id: string;
    input: Record<string, unknown>;
    policy: { executionTimeout?: number; ttl: number; lowPriority?: boolean };
  };
  callback: CallbackTarget;
  callbackExpiresAt: number;
  /** When the job is looked at again once accepted: its timeout, or its start deadline if sooner. */
  timeoutMs: number;
  /**
   * The attempt's presigned I/O, for a job with media (media.ts): keys and lifetime, signed by the
   * reconciler into the input's `_mediaOrchestrator` just before /run (src/storage/mint.ts).
   */
  io?: AttemptIOPlan;
  /**
   * The stage cache's key (stage-cache.ts): the reconciler looks the stage up before anything is
   * written, and a job found there completes from it instead (cacheHitStatus).
   */
  stageKey?: string;
}

/** The plan of one submission of a Pending job to its Ready endpoint. */
export function planSubmission(
  job: MediaJob,
  status: MediaJobStatus,
  o: {
    endpointId: string;
    newSubmissionId: string;
    now: string;
    defaultTimeoutSeconds: number;
    /** policy.executionTimeout from spec or the account's plan (planLimits), ms. */
    executionTimeoutMs?: number;
    /** The endpoint's own execution timeout as the provider reports it, ms. */
    endpointExecutionTimeoutMs?: number;
    /** The start deadline of a job without spec.startDeadlineSeconds, seconds. */
    defaultStartDeadlineSeconds?: number;
  },
): SubmissionPlan {
  const { endpointId, now } = o;
  const jobId = status.jobId ?? effectiveJobId(job);
  const timeoutSeconds = job.spec.timeoutSeconds ?? o.defaultTimeoutSeconds;
  const generation = job.metadata.generation;
  const startDeadline = job.spec.startDeadlineSeconds ?? o.defaultStartDeadlineSeconds;
  const written = withPhaseConditions(
    withCondition(
      intentStatus(status, { endpointId, submissionId: o.newSubmissionId, now }),
      generation,
      {
        type: "Submitted",
        status: "Unknown",
        reason: "Submitting",
        message: `submitting to endpoint ${endpointId}`,
      },
      now,
    ),
    generation,
    now,
  );
  const attempt = written.submission!.attempt;
  // spec.timeoutSeconds is when *we* look at a job, not an execution limit: a slow job that is
  // still running is left alone. The job's or its plan's executionTimeout bounds the run, and so
  // does what is left of spec.activeDeadlineSeconds where it fits: the smaller limit is sent. The
  // ttl covers the queue and the longest run, never less: the deadline is enforced by the
  // controller's cancel (deadline.ts, providerPolicy). Its expiry is recorded with the intent, so a
  // later 404 is told apart from a lost job.
  const policy = providerPolicy({
    spec: job.spec,
    status: written,
    nowMs: Date.parse(now),
    ...(o.executionTimeoutMs !== undefined && { executionTimeoutMs: o.executionTimeoutMs }),
    ...(o.endpointExecutionTimeoutMs !== undefined && {
      endpointExecutionTimeoutMs: o.endpointExecutionTimeoutMs,
    }),
    ...(startDeadline !== undefined && { queueAllowanceMs: queueAllowanceMs(startDeadline) }),
  });
  const intent: MediaJobStatus = {
    // Each attempt is seen started on its own: a Started=True of an earlier one is dropped.
    ...(startDeadline === undefined
      ? { ...written, conditions: (written.conditions ?? []).filter((c) => c.type !== "Started") }
      : startNotSeen(job, written, startDeadline, now)),
    submission: {
      ...written.submission!,
      ...(startDeadline !== undefined && {
        startBy: new Date(Date.parse(now) + startDeadline * 1000).toISOString(),
      }),
      expiresAt: providerExpiry(Date.parse(now), policy.ttl),
    },
  };
  return {
    endpointId,
    before: status,
    intent,
    attempt,
    request: {
      id: providerRequestId(job, status, jobId),
      input: withSubmissionIdentity(
        job.spec.input ?? {},
        submissionIdentity(job.metadata.uid ?? "", jobId, intent),
      ),
      // A low priority job does not make the endpoint scale up (RunPod's policy.lowPriority).
      policy: { ...policy, ...(job.spec.priority === "low" && { lowPriority: true }) },
    },
    callback: {
      namespace: job.metadata.namespace!,
      name: job.metadata.name,
      uid: job.metadata.uid ?? "",
      jobId,
      attempt,
      submission: intent.submission!.id,
    },
    callbackExpiresAt: callbackExpiry(Date.parse(now), timeoutSeconds),
    // Looked at again at its timeout, or at its start deadline when that comes first.
    timeoutMs: Math.min(timeoutSeconds, startDeadline ?? Infinity) * 1000,
  };
}

/** Step (2) failed or (3) refused outright: the intent withdrawn, with why (undefined: it moved on). */
export function withdrawnStatus(
  cur: MediaJob,
  p: SubmissionPlan,
  now: string,
  refused?: { reason: string; message: string },
): MediaJobStatus | undefined {
  const back = withdrawIntent(cur.status, p.before, p.attempt, now);
  if (!back || !refused) return back;
  return withCondition(
    back,
    cur.metadata.generation,
    { type: "Submitted", status: "False", reason: refused.reason, message: refused.message },
    now,
  );
}

/** The note told when the /run answer was lost: until when the job waits for its callback. */
export function unconfirmedNote(
  stored: MediaJob,
  message: string,
  nowMs: number,
  o: { defaultTimeoutSeconds: number; confirmationWindowMs?: number },
): { note: string; waitMs: number } {
  const waitMs = msUntilConfirmationDeadline(stored, nowMs, o.defaultTimeoutSeconds, o.confirmationWindowMs);
  const deadline = new Date(nowMs + waitMs).toISOString();
  return {
    note: `${message}; the job may be running: waiting for its callback until ${deadline}, no resubmission before then`,
    waitMs,
  };
}

/** Step (3) unanswered: the attempt Unconfirmed, with why (undefined: already marked, or moved on). */
export function unconfirmedStatus(
  cur: MediaJob,
  attempt: number,
  message: string,
  now: string,
): MediaJobStatus | undefined {
  const marked = markUnconfirmed(cur.status ?? {}, attempt);
  if (!marked) return undefined;
  return withCondition(
    marked,
    cur.metadata.generation,
    { type: "Submitted", status: "Unknown", reason: "SubmissionUnconfirmed", message },
    now,
  );
}

/**
 * Step (4): the provider's id recorded onto the current status (a callback may have changed it).
 * A callback that adopted this very id is confirmed by the answer: its next step may go on.
 */
export function acceptedStatus(
  cur: MediaJob,
  attempt: number,
  providerJobId: string,
  now: string,
): MediaJobStatus | undefined {
  const accepted = recordAccepted(cur.status, attempt, providerJobId);
  const confirmed = confirmAdoption(accepted ?? cur.status, providerJobId, now, cur.metadata.generation);
  const recorded = confirmed ?? accepted;
  if (!recorded) return undefined;
  return recorded.phase === "Processing"
    ? withCondition(
        recorded,
        cur.metadata.generation,
        { type: "Submitted", status: "True", reason: "Submitted", message: `submitted as ${providerJobId}` },
        now,
      )
    : recorded;
}
