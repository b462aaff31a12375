// The MediaJob lifecycle as pure functions of (object, facts, now): no I/O here. The controller
// and the webhooks sidecar both apply provider results through applyProviderResult, so a
// callback, a poll and a replay of either always produce the same status.
//
//   Pending --submit--> Processing --COMPLETED--> Completed --> next step created once
//      ^  ^                 |  \--FAILED/TIMED_OUT--> Failed, or Pending again while attempts remain
//      |  |                 |--past spec.activeDeadlineSeconds--> Failed (DeadlineExceeded)
//      |  +--spec.suspend: cancelled at the provider--+
//      +--reset (operator, or the provider lost the job)--+
import { createHash } from "node:crypto";
import type { Condition } from "../crds/common.js";
import type { JobPhase, MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { getCondition, setCondition, type ConditionInput } from "../crds/conditions.js";

export const FINALIZER = "media-orchestrator.io/cancel-at-provider";
/** Set to "true" on a MediaJob to delete it without cancelling its job at the provider. */
export const SKIP_CANCEL_ANNOTATION = "media-orchestrator.io/skip-provider-cancel";
export const PIPELINE_LABEL = "media-orchestrator.io/pipeline";
export const STEP_LABEL = "media-orchestrator.io/step";

export const TERMINAL_PHASES: ReadonlySet<JobPhase> = new Set(["Completed", "Failed", "Cancelled"]);
export const isTerminal = (phase: JobPhase | undefined): boolean =>
  phase !== undefined && TERMINAL_PHASES.has(phase);

/** The provider's job status object, as far as the lifecycle reads it. */
export interface ProviderResult {
  id: string;
  status: string;
  output?: unknown;
  error?: unknown;
}

/** spec.id, else metadata.uid: the idempotency key, fixed in status.jobId once set. */
export function effectiveJobId(job: MediaJob): string {
  return job.status?.jobId ?? job.spec.id ?? job.metadata.uid ?? job.metadata.name;
}

/**
 * The id sent to the provider for the next submission. Resets resubmit the same id (a provider
 * that honours it answers with the job it already has instead of running it again); a retry after
 * the provider reported a failure needs a fresh id, or it would get the failed job back.
 */
export function submissionId(status: MediaJobStatus | undefined, jobId: string): string {
  // A submission cancelled by a suspension is over at the provider too: resuming needs a fresh id.
  const ended = (status?.failures ?? 0) + (status?.suspensions ?? 0);
  return ended === 0 ? jobId : `${jobId}-retry-${ended}`;
}

export const maxAttempts = (job: MediaJob): number => job.spec.maxAttempts ?? 1;

/** A new object's status: the job id fixed, Pending. */
export function initialStatus(job: MediaJob, now: string): MediaJobStatus {
  const status: MediaJobStatus = {
    ...job.status,
    phase: job.status?.phase ?? "Pending",
    jobId: effectiveJobId(job),
    attempts: job.status?.attempts ?? 0,
  };
  if (!job.status?.updatedAt) status.updatedAt = now;
  return status;
}

/**
 * Whether a provider status object speaks about the current submission of this job. Callbacks and
 * polls of an earlier attempt (late, reordered) must not touch the current one. While the
 * provider's id for the current submission is unknown (its /run answer was lost, or the callback
 * beat the controller's record of it), only a caller that has bound the result to this submission
 * (the sidecar: a callback URL of this attempt, confirmed with the provider's status API) may adopt
 * it; nothing else can tell our job from another.
 */
export function concernsCurrentSubmission(
  status: MediaJobStatus | undefined,
  result: ProviderResult,
  opts: { adopt?: boolean } = {},
): boolean {
  if (!status?.jobId) return false;
  if (status.providerJobId) return result.id === status.providerJobId;
  return opts.adopt === true && status.submission !== undefined;
}

/** status.error's limit in the CRD: anything written there must fit, or the write fails forever. */
export const ERROR_MAX_CHARS = 4096;

/**
 * status.output's cap, as JSON bytes. etcd refuses objects over 1.5 MiB, and the next pipeline step
 * copies this output into its own spec (input.previous), so one output must leave room for the
 * rest of both objects. Larger outputs are stored as a marker with a preview: the worker should
 * put large results in object storage and return their location.
 */
export const OUTPUT_MAX_BYTES = 256 * 1024;
const OUTPUT_PREVIEW_CHARS = 4096;

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 16)}… [truncated]`;
}

function errorText(error: unknown, fallback: string): string {
  if (error === undefined || error === null || error === "") return fallback;
  return typeof error === "string" ? error : JSON.stringify(error);
}

/**
 * status.output's nesting cap. A worker's output nested thousands deep makes JSON.stringify (and
 * every writer of the object after it) overflow the stack; such an output is stored as a marker
 * instead, so the job still ends Completed rather than staying Processing on a write that throws.
 */
export const OUTPUT_MAX_DEPTH = 64;

/** Whether a value nests deeper than `max` levels of objects and arrays (iterative: never recurses). */
function deeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (!v || typeof v !== "object") continue;
    if (depth >= max) return true;
    for (const child of Object.values(v as Record<string, unknown>)) stack.push([child, depth + 1]);
  }
  return false;
}

/** The provider's output as status.output stores it: an object, within OUTPUT_MAX_BYTES and OUTPUT_MAX_DEPTH. */
export function storedOutput(output: unknown): Record<string, unknown> {
  const obj =
    output && typeof output === "object" && !Array.isArray(output)
      ? (output as Record<string, unknown>)
      : { value: output ?? null };
  if (deeperThan(obj, OUTPUT_MAX_DEPTH))
    return {
      truncated: true,
      reason: `nested deeper than ${OUTPUT_MAX_DEPTH} levels`,
      maxDepth: OUTPUT_MAX_DEPTH,
    };
  const text = JSON.stringify(obj);
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes <= OUTPUT_MAX_BYTES) return obj;
  return {
    truncated: true,
    originalBytes: bytes,
    maxBytes: OUTPUT_MAX_BYTES,
    preview: text.slice(0, OUTPUT_PREVIEW_CHARS),
  };
}

/**
 * Applies a provider result. Returns the new status, or undefined when nothing changes: a
 * non-terminal status, a result about another submission, or a job already finished (a late
 * FAILED after Completed changes nothing: a job never moves backwards).
 */
export function applyProviderResult(
  job: MediaJob,
  result: ProviderResult,
  now: string,
  opts: { adopt?: boolean } = {},
): MediaJobStatus | undefined {
  // A fast job's callback can arrive before the controller's first status write: judge it against
  // the status the job is about to have (its id is spec.id or the uid, fixed already).
  const status = job.status?.jobId ? job.status : initialStatus(job, now);
  if (isTerminal(status.phase)) return undefined;
  if (!concernsCurrentSubmission(status, result, opts)) return undefined;
  const base: MediaJobStatus = {
    ...status,
    providerJobId: status.providerJobId ?? result.id,
    ...(status.submission && { submission: { ...status.submission, state: "Accepted" as const } }),
    updatedAt: now,
  };
  const overDeadline = msUntilDeadline(job.spec, status, Date.parse(now)) <= 0;
  switch (result.status) {
    case "COMPLETED": {
      const { error: _drop, ...rest } = base;
      return { ...rest, phase: "Completed", output: storedOutput(result.output), completedAt: now };
    }
    case "FAILED":
    case "TIMED_OUT": {
      // The provider enforced the deadline we sent it (or the job failed past it): no retry.
      if (overDeadline) return deadlineExceeded(base, now, `the provider reports ${result.status}`);
      const failures = (status.failures ?? 0) + 1;
      const message = errorText(
        result.error,
        result.status === "TIMED_OUT" ? "the job timed out at the provider" : "the job failed",
      );
      const error = clip(`${result.status}: ${message}`, ERROR_MAX_CHARS);
      // Judged by failures, not submissions: a replay of a lost job is not a failed try.
      if (failures < maxAttempts(job)) {
        // Retry: back to Pending; the next submission is a new attempt with a new intent, so a late
        // callback of this one no longer matches.
        const { providerJobId: _p, submittedAt: _s, submission: _i, ...rest } = base;
        return { ...rest, phase: "Pending", failures, error };
      }
      return { ...base, phase: "Failed", failures, error, completedAt: now };
    }
    case "CANCELLED":
      // The controller's own cancellations (a suspension, the deadline) may reach the sidecar as a
      // callback before the controller records them: they end as the controller would end them.
      if (overDeadline) return deadlineExceeded(base, now, "cancelled at the provider");
      if (job.spec.suspend) return suspendedStatus(base, now);
      return { ...base, phase: "Cancelled", error: "cancelled at the provider", completedAt: now };
    default:
      return undefined;
  }
}

// ---- The write-ahead submission protocol ----------------------------------------------------
//
// Pending --intent (rv-guarded write)--> Processing/Sending --/run answered--> Processing/Accepted
//                                              |--answer lost--> Processing/Unconfirmed
// Unconfirmed: adopted by its callback (the sidecar confirms it with the provider), else past the
// confirmation deadline Failed (policy `fail`), or resubmitted as a counted "unconfirmed
// resubmission" (policy `resubmit`).

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

/**
 * Replays after which a job the provider keeps losing is failed instead of replayed. A provider
 * keeps a finished job's status only for a while (RunPod: 30 min); when callbacks never reach the
 * sidecar and the timeout is longer than that, every replay would run (and bill) the job again.
 * Counted per cause: provider losses (status 404), and unconfirmed resubmissions. Operator resets
 * and failure retries are not losses.
 */
export const MAX_REPLAYS = 3;

/** The provider answered 404 for a Processing job: replay it, or stop replaying. */
export function afterProviderLostJob(status: MediaJobStatus, now: string): MediaJobStatus {
  const losses = (status.providerLosses ?? 0) + 1;
  if (losses >= MAX_REPLAYS) {
    return {
      ...status,
      providerLosses: losses,
      phase: "Failed",
      updatedAt: now,
      completedAt: now,
      error:
        `ProviderLostJob: the provider lost this job ${losses} times. Its status is kept only for a ` +
        "limited time after it finishes, so callbacks are probably not reaching the sidecar: check " +
        "CALLBACK_BASE_URL and the sidecar, then create the job again to run it (a Failed job is not reset)",
    };
  }
  return { ...resetToPending(status, now)!, providerLosses: losses };
}

/** The reset (docs/design.md, Lifecycle): Pending, updatedAt now, replay true; only from Processing. */
export function resetToPending(status: MediaJobStatus, now: string): MediaJobStatus | undefined {
  if (status.phase !== "Processing") return undefined;
  const { submission: _s, ...rest } = status;
  return { ...rest, phase: "Pending", updatedAt: now, replay: true };
}

/**
 * The JSON patch that performs the reset atomically. Its `test` ops make it apply only to a
 * Processing job with this job id, so a job deleted and re-created under the same name (a new
 * uid, so a new job id unless spec.id is set) is not reset by mistake.
 */
export function resetPatch(
  now: string,
  jobId: string,
): Array<{ op: "test" | "replace" | "add" | "remove"; path: string; value?: unknown }> {
  return [
    { op: "test", path: "/status/jobId", value: jobId },
    { op: "test", path: "/status/phase", value: "Processing" },
    { op: "replace", path: "/status/phase", value: "Pending" },
    { op: "add", path: "/status/updatedAt", value: now },
    { op: "add", path: "/status/replay", value: true },
  ];
}

/**
 * An operator's deliberate resubmission of a job Failed for an unconfirmed submission (`kubectl
 * media reset`): Pending, replay true, the failure cleared. Its `test` ops make it apply only to
 * that job (its job id) still Failed for that very submission. Undefined for any other job.
 */
export function resetUnconfirmedPatch(
  status: MediaJobStatus | undefined,
  now: string,
): Array<{ op: "test" | "replace" | "add" | "remove"; path: string; value?: unknown }> | undefined {
  if (!failedUnconfirmed(status) || !status?.jobId || !status.submission) return undefined;
  return [
    { op: "test", path: "/status/jobId", value: status.jobId },
    { op: "test", path: "/status/phase", value: "Failed" },
    { op: "test", path: "/status/submission/id", value: status.submission.id },
    { op: "test", path: "/status/submission/state", value: "Unconfirmed" },
    { op: "replace", path: "/status/phase", value: "Pending" },
    { op: "add", path: "/status/updatedAt", value: now },
    { op: "add", path: "/status/replay", value: true },
    { op: "remove", path: "/status/submission" },
    ...(status.completedAt !== undefined ? [{ op: "remove" as const, path: "/status/completedAt" }] : []),
    ...(status.error !== undefined ? [{ op: "remove" as const, path: "/status/error" }] : []),
  ];
}

/** Milliseconds until a Processing job counts as stuck (negative once it is). */
export function msUntilStuck(job: MediaJob, nowMs: number, defaultTimeoutSeconds: number): number {
  const since = Date.parse(job.status?.submittedAt ?? job.status?.updatedAt ?? "") || nowMs;
  return since + (job.spec.timeoutSeconds ?? defaultTimeoutSeconds) * 1000 - nowMs;
}

// ---- Suspension and the active deadline (batch/v1 Job's suspend and activeDeadlineSeconds) ---

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
 * the controller cancels the job at its deadline instead.
 */
export function providerPolicy(
  spec: { activeDeadlineSeconds?: number },
  status: MediaJobStatus | undefined,
  nowMs: number,
  defaultTtlMs: number,
): { executionTimeout?: number; ttl: number } {
  const remaining = Math.floor(msUntilDeadline(spec, status, nowMs));
  if (!Number.isFinite(remaining)) return { ttl: defaultTtlMs };
  return {
    ttl: remaining >= 10_000 ? Math.min(remaining, defaultTtlMs) : defaultTtlMs,
    ...(remaining >= 5_000 && remaining <= 7 * 24 * 3600 * 1000 && { executionTimeout: remaining }),
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

/**
 * Milliseconds until a finished job is deleted for spec.ttlSecondsAfterFinished (<= 0: now), or
 * undefined while it must stay: no TTL, not finished, or a next pipeline step not yet recorded or
 * still there. The pipeline's steps are owned by the step before (ownerReferences), so deleting a
 * step while a later one exists would delete that one too, running or not: a pipeline goes from its
 * last step back, and its first job, the pipeline's handle, goes last.
 */
export function msUntilExpiry(job: MediaJob, nowMs: number, nextStepExists: boolean): number | undefined {
  const ttl = job.spec.ttlSecondsAfterFinished;
  const status = job.status;
  if (ttl === undefined || !isTerminal(status?.phase)) return undefined;
  if (status?.phase === "Completed" && job.spec.then?.length && !status.nextJob) return undefined;
  if (nextStepExists) return undefined;
  const finished = Date.parse(status?.completedAt ?? status?.updatedAt ?? "");
  return (Number.isNaN(finished) ? nowMs : finished) + ttl * 1000 - nowMs;
}

/** Why a Failed job failed, as the Succeeded condition's reason. */
function failureReason(status: MediaJobStatus): string {
  if (status.error?.startsWith(`${DEADLINE_EXCEEDED}:`)) return DEADLINE_EXCEEDED;
  if (failedUnconfirmed(status)) return SUBMISSION_UNCONFIRMED;
  return "Failed";
}

/**
 * status.reason and status.message (the REASON and MESSAGE columns): the condition that matters
 * most now. A final job: Succeeded. A waiting one: what it waits for (suspended, its account, its
 * endpoint, a refused submission). A running one: an unconfirmed submission, or running past its
 * timeout.
 */
export function summaryOf(conditions: Condition[]): { reason: string; message: string } {
  const find = (type: string, status: string, reason?: string) =>
    conditions.find((c) => c.type === type && c.status === status && (!reason || c.reason === reason));
  const succeeded = conditions.find((c) => c.type === "Succeeded");
  const pick =
    (succeeded?.status !== "Unknown" && succeeded) ||
    find("Suspended", "True") ||
    find("Suspended", "Unknown") ||
    (succeeded?.reason === "Pending" &&
      (find("Admitted", "False") || find("EndpointReady", "False") || find("Submitted", "False"))) ||
    find("Submitted", "Unknown", SUBMISSION_UNCONFIRMED) ||
    find("Overdue", "True") ||
    succeeded;
  return { reason: pick?.reason ?? "Pending", message: (pick?.message ?? "").slice(0, 4096) };
}

/** Succeeded follows the phase, so phase and conditions always agree. */
export function withPhaseConditions(
  status: MediaJobStatus,
  generation: number | undefined,
  now: string,
): MediaJobStatus {
  const byPhase: Record<JobPhase, [Condition["status"], string, string]> = {
    Pending: ["Unknown", "Pending", "waiting to be submitted to the GPU provider"],
    Processing: ["Unknown", "Processing", "running at the GPU provider"],
    Completed: ["True", "Completed", "the GPU provider completed the job"],
    Failed: ["False", failureReason(status), status.error ?? "the job failed"],
    Cancelled: ["False", "Cancelled", status.error ?? "the job was cancelled"],
  };
  const [s, reason, message] = byPhase[status.phase ?? "Pending"];
  let conditions = setCondition(
    status.conditions,
    { type: "Succeeded", status: s, reason, message },
    now,
    generation,
  );
  // Submitted is True once the provider's id is known. While a submission is unconfirmed it keeps
  // what the submission protocol wrote (Unknown: Submitting, SubmissionUnconfirmed), and once True
  // it keeps how the id was learnt (Submitted, AdoptedByCallback).
  if ((status.phase === "Processing" || isTerminal(status.phase)) && status.providerJobId) {
    const prev = conditions.find((c) => c.type === "Submitted");
    conditions = setCondition(
      conditions,
      {
        type: "Submitted",
        status: "True",
        reason: prev?.status === "True" ? prev.reason : "Submitted",
        message: `submitted as ${status.providerJobId}`,
      },
      now,
      generation,
    );
  }
  return {
    ...status,
    conditions,
    ...summaryOf(conditions),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
}

/** Semantic equality of two statuses, ignoring the order of keys. */
export function sameStatus(a: unknown, b: unknown): boolean {
  return stableJson(a) === stableJson(b);
}

function stableJson(v: unknown): string {
  return JSON.stringify(v, (_k, val: unknown) =>
    val && typeof val === "object" && !Array.isArray(val)
      ? Object.fromEntries(
          Object.entries(val as Record<string, unknown>).sort(([x], [y]) => x.localeCompare(y)),
        )
      : val,
  );
}

/** The pipeline's own name (its first job's), kept whole on every step. */
export const PIPELINE_ANNOTATION = "media-orchestrator.io/pipeline-name";
/** The first job's uid on every later step: the step reports its end to that job, not a namesake. */
export const PIPELINE_UID_ANNOTATION = "media-orchestrator.io/pipeline-uid";

/** The condition on a pipeline's first job that speaks for the whole pipeline. */
export const PIPELINE_SUCCEEDED = "PipelineSucceeded";

/** A pipeline's first job (or a job on its own): no step label. */
export const isFirstStep = (job: MediaJob): boolean => job.metadata.labels?.[STEP_LABEL] === undefined;

/**
 * The labels and annotations a pipeline's first job gets, as its later steps have them, so that
 * `-l media-orchestrator.io/pipeline=<name>` selects the whole pipeline. Undefined when it has them
 * (or is not a pipeline's first job).
 */
export function firstStepMetadata(
  job: MediaJob,
): { labels: Record<string, string>; annotations: Record<string, string> } | undefined {
  if (!isFirstStep(job) || !job.spec.then?.length) return undefined;
  const name = job.metadata.name;
  if (
    job.metadata.labels?.[PIPELINE_LABEL] !== undefined &&
    job.metadata.annotations?.[PIPELINE_ANNOTATION] !== undefined
  )
    return undefined;
  // The annotation keeps the whole name, which nextStepName reads before the (shortened) label.
  return { labels: { [PIPELINE_LABEL]: pipelineLabel(name) }, annotations: { [PIPELINE_ANNOTATION]: name } };
}

/**
 * PipelineSucceeded on a pipeline's first job (on any job with no step label: a job on its own is a
 * pipeline of one step), from what the job itself knows: Unknown while it runs or its later steps
 * do, False when it failed, True when it was the only step. Once a later step has decided it (True
 * or False), the first job keeps that.
 */
export function ownPipelineCondition(job: MediaJob, status: MediaJobStatus): ConditionInput | undefined {
  if (!isFirstStep(job)) return undefined;
  const steps = 1 + (job.spec.then?.length ?? 0);
  const phase = status.phase ?? "Pending";
  if (phase === "Failed" || phase === "Cancelled") return stepFailed(job, status, 1);
  if (phase === "Completed" && steps === 1)
    return {
      type: PIPELINE_SUCCEEDED,
      status: "True",
      reason: "PipelineCompleted",
      message: "the job (a pipeline of one step) completed",
    };
  const decided = getCondition(status.conditions, PIPELINE_SUCCEEDED);
  if (decided && decided.status !== "Unknown") return undefined;
  return {
    type: PIPELINE_SUCCEEDED,
    status: "Unknown",
    reason: "StepsRunning",
    message:
      phase === "Completed"
        ? `step 1 of ${steps} completed${status.nextJob ? `; next: ${status.nextJob}` : ""}`
        : `step 1 of ${steps} is ${phase}`,
  };
}

/** How a job failed, in one line: its Succeeded reason, then what it says (once). */
export function failureText(status: MediaJobStatus): string {
  const why = getCondition(status.conditions, "Succeeded");
  const reason = why?.reason ?? status.phase ?? "Failed";
  const message = why?.message ?? status.error ?? `the job ended ${status.phase}`;
  return message.startsWith(`${reason}:`) ? message : `${reason}: ${message}`;
}

function stepFailed(job: MediaJob, status: MediaJobStatus, step: number): ConditionInput {
  return {
    type: PIPELINE_SUCCEEDED,
    status: "False",
    reason: "StepFailed",
    message: `step ${step} (${job.metadata.name}) ended ${status.phase}: ${failureText(status)}`,
  };
}

/**
 * What a later step's end means for the pipeline, written onto its first job: False when the step
 * failed, True when it was the last and completed. Undefined while the pipeline goes on.
 */
export function stepPipelineCondition(job: MediaJob, status: MediaJobStatus): ConditionInput | undefined {
  if (isFirstStep(job)) return undefined;
  const step = Number(job.metadata.labels?.[STEP_LABEL]) + 1;
  const phase = status.phase;
  if (phase === "Failed" || phase === "Cancelled") return stepFailed(job, status, step);
  if (phase === "Completed" && !job.spec.then?.length)
    return {
      type: PIPELINE_SUCCEEDED,
      status: "True",
      reason: "PipelineCompleted",
      message: `all ${step} steps completed; the last: ${job.metadata.name}`,
    };
  return undefined;
}

const shortHash = (text: string): string => createHash("sha256").update(text).digest("hex").slice(0, 10);

/**
 * `text` if it fits in `max` characters, else a prefix and a hash of the whole: valid for any
 * length (the prefix is cut back to end in a letter or digit, as names and label values must)
 * and unique per input, so two long names that share a prefix never collide.
 */
export function fitName(text: string, max: number): string {
  if (text.length <= max) return text;
  const prefix = text.slice(0, max - 11).replace(/[^A-Za-z0-9]+$/, "");
  return prefix ? `${prefix}-${shortHash(text)}` : shortHash(text);
}

/** The pipeline a job belongs to: the first job's name (older steps carry only the label). */
export function pipelineOf(job: MediaJob): string {
  return (
    job.metadata.annotations?.[PIPELINE_ANNOTATION] ??
    job.metadata.labels?.[PIPELINE_LABEL] ??
    job.metadata.name
  );
}

/** A label value (at most 63 characters, starting and ending alphanumeric) that names the pipeline. */
export function pipelineLabel(pipeline: string): string {
  const value = fitName(pipeline, 63);
  return /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(value) ? value : `p-${shortHash(pipeline)}`;
}

/** The deterministic name of the MediaJob for the next pipeline step: valid for any pipeline name. */
export function nextStepName(job: MediaJob): string {
  const step = Number(job.metadata.labels?.[STEP_LABEL] ?? "0") + 1;
  const workload = job.spec.then?.[0]?.workload ?? "step";
  const suffix = `-${step}-${workload}`;
  return `${fitName(pipelineOf(job), 253 - suffix.length)}${suffix}`;
}

/** The next step's MediaJob: created once (fixed name), owned by this job, fed its output. */
export function nextStepObject(job: MediaJob): Record<string, unknown> | undefined {
  const [step, ...rest] = job.spec.then ?? [];
  if (!step || job.status?.phase !== "Completed") return undefined;
  const pipeline = pipelineOf(job);
  const index = Number(job.metadata.labels?.[STEP_LABEL] ?? "0") + 1;
  return {
    apiVersion: job.apiVersion,
    kind: "MediaJob",
    metadata: {
      name: nextStepName(job),
      namespace: job.metadata.namespace,
      labels: { [PIPELINE_LABEL]: pipelineLabel(pipeline), [STEP_LABEL]: String(index) },
      annotations: {
        [PIPELINE_ANNOTATION]: pipeline,
        [PIPELINE_UID_ANNOTATION]: isFirstStep(job)
          ? (job.metadata.uid ?? "")
          : (job.metadata.annotations?.[PIPELINE_UID_ANNOTATION] ?? ""),
      },
      ownerReferences: [
        {
          apiVersion: job.apiVersion,
          kind: "MediaJob",
          name: job.metadata.name,
          uid: job.metadata.uid,
          controller: true,
        },
      ],
    },
    spec: {
      ...step,
      ...(step.account === undefined && job.spec.account !== undefined ? { account: job.spec.account } : {}),
      ...(step.ttlSecondsAfterFinished === undefined &&
        job.spec.ttlSecondsAfterFinished !== undefined && {
          ttlSecondsAfterFinished: job.spec.ttlSecondsAfterFinished,
        }),
      input: {
        ...step.input,
        previous: {
          job: job.metadata.name,
          jobId: job.status?.jobId,
          workload: job.spec.workload,
          output: job.status?.output ?? {},
        },
      },
      ...(rest.length ? { then: rest } : {}),
    },
  };
}
