// A submission whose provider id is unknown, at its confirmation deadline: failed (at most once) or
// resubmitted (at least once), as UNCONFIRMED_SUBMISSION_POLICY says.
import { setCondition } from "../crds/conditions.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { ERROR_MAX_CHARS, MAX_REPLAYS, clip } from "./job.js";
import { msUntilConfirmationDeadline } from "./submission.js";

/**
 * What becomes of a submission still unconfirmed at its confirmation deadline. Past it, no callback
 * can arrive any more, and the provider (RunPod) offers no lookup by our id, so nothing can tell a
 * job that never ran from one that ran and whose result was lost.
 * - `fail` (the default): the job ends Failed (SubmissionUnconfirmed) and is never submitted again
 *   by the controller: at most once, without exception. An operator may resubmit it on purpose.
 * - `resubmit`: the job is submitted again, counted (an unconfirmed resubmission): at least once,
 *   and a job whose first submission did run is run, and billed, twice.
 */
export const UNCONFIRMED_SUBMISSION_POLICIES = ["fail", "resubmit"] as const;
export type UnconfirmedSubmissionPolicy = (typeof UNCONFIRMED_SUBMISSION_POLICIES)[number];

/** The reason (condition, Event, status.error prefix) of a job failed for an unconfirmed submission. */
export const SUBMISSION_UNCONFIRMED = "SubmissionUnconfirmed";

/** What to do with an unconfirmed submission now, and what to tell (Event reason, metric outcome). */
export type UnconfirmedDecision =
  | { action: "wait"; remainingMs: number }
  | {
      action: "fail" | "resubmit";
      status: MediaJobStatus;
      reason: typeof SUBMISSION_UNCONFIRMED | "UnconfirmedResubmission";
      message: string;
      outcome: "unconfirmed-failed" | "unconfirmed-resubmission";
    };

/**
 * The decision for a Processing job whose current submission has no provider id: wait for its
 * callback until the confirmation deadline; past it, apply the policy. A `resubmit` job whose
 * submissions stay unconfirmed MAX_REPLAYS times fails as under `fail`.
 */
export function decideUnconfirmed(
  job: MediaJob,
  o: {
    nowMs: number;
    defaultTimeoutSeconds: number;
    windowMs?: number;
    policy: UnconfirmedSubmissionPolicy;
  },
): UnconfirmedDecision {
  const remainingMs = msUntilConfirmationDeadline(job, o.nowMs, o.defaultTimeoutSeconds, o.windowMs);
  if (remainingMs > 0) return { action: "wait", remainingMs };
  const status = job.status ?? {};
  const now = new Date(o.nowMs).toISOString();
  const attempt = status.submission?.attempt ?? status.attempts ?? 0;
  const resubmissions = status.unconfirmedResubmissions ?? 0;
  if (o.policy === "resubmit" && resubmissions < MAX_REPLAYS) {
    const next = afterUnconfirmedDeadline(status, now);
    return {
      action: "resubmit",
      status: next,
      reason: "UnconfirmedResubmission",
      message:
        `attempt ${attempt} was never confirmed (no answer, no callback before its deadline); submitting again ` +
        `(unconfirmed resubmission ${next.unconfirmedResubmissions}): it may run twice at the provider`,
      outcome: "unconfirmed-resubmission",
    };
  }
  const ref = `${job.metadata.name}${job.metadata.namespace ? ` -n ${job.metadata.namespace}` : ""}`;
  const why =
    o.policy === "resubmit"
      ? `${resubmissions + 1} submissions of this job were never confirmed (no answer from the provider ` +
        "and no callback): check GPU_PROVIDER_API_URL, CALLBACK_BASE_URL and the sidecar"
      : `attempt ${attempt} was never confirmed: the provider's answer to the submission was lost and ` +
        "no callback arrived before the confirmation deadline. The provider may have run the job once " +
        "and its result never arrived; it is not submitted again (UNCONFIRMED_SUBMISSION_POLICY=fail, " +
        "at most once)";
  const message =
    `${SUBMISSION_UNCONFIRMED}: ${why}. To run it again deliberately (it may then run twice): ` +
    `kubectl media reset ${ref}`;
  return {
    action: "fail",
    status: failUnconfirmed(status, now, message, job.metadata.generation),
    reason: SUBMISSION_UNCONFIRMED,
    message,
    outcome: "unconfirmed-failed",
  };
}

/**
 * Failed for an unconfirmed submission. The submission is kept (state Unconfirmed, no provider id):
 * it is the record of what may have run, and what lets an operator's reset recognise the case.
 */
function failUnconfirmed(
  status: MediaJobStatus,
  now: string,
  message: string,
  generation: number | undefined,
): MediaJobStatus {
  const { providerJobId: _p, ...rest } = status;
  const failed: MediaJobStatus = {
    ...rest,
    phase: "Failed",
    updatedAt: now,
    completedAt: now,
    error: clip(message, ERROR_MAX_CHARS),
    ...(status.submission && { submission: { ...status.submission, state: "Unconfirmed" as const } }),
  };
  return {
    ...failed,
    conditions: setCondition(
      status.conditions,
      { type: "Submitted", status: "False", reason: SUBMISSION_UNCONFIRMED, message: failed.error! },
      now,
      generation,
    ),
  };
}

/** Whether a job ended Failed because its submission was never confirmed (it may have run once). */
export const failedUnconfirmed = (status: MediaJobStatus | undefined): boolean =>
  status?.phase === "Failed" && !status.providerJobId && status.submission?.state === "Unconfirmed";

/** The submission again, counted as an unconfirmed resubmission (policy `resubmit`). */
export function afterUnconfirmedDeadline(status: MediaJobStatus, now: string): MediaJobStatus {
  const count = (status.unconfirmedResubmissions ?? 0) + 1;
  const { submission: _s, providerJobId: _p, ...rest } = status;
  return { ...rest, phase: "Pending", updatedAt: now, replay: true, unconfirmedResubmissions: count };
}
