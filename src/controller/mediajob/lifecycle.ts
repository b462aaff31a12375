// The MediaJob lifecycle as pure functions of (object, facts, now): no I/O here. The controller
// and the webhooks sidecar both apply provider results through applyProviderResult, so a
// callback, a poll and a replay of either always produce the same status.
//
//   Pending --submit--> Processing --COMPLETED--> Completed --> next step created once
//      ^                    |  \--FAILED/TIMED_OUT--> Failed, or Pending again while attempts remain
//      +--reset (operator, or the provider lost the job)--+
import type { Condition } from "../../crds/common.js";
import type { JobPhase, MediaJob, MediaJobStatus } from "../../crds/mediajob.js";
import { setCondition } from "../conditions.js";

export const FINALIZER = "media-orchestrator.io/cancel-at-provider";
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
  const failures = status?.failures ?? 0;
  return failures === 0 ? jobId : `${jobId}-retry-${failures}`;
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
 * polls of an earlier attempt (late, reordered) must not touch the current one.
 */
export function concernsCurrentSubmission(
  status: MediaJobStatus | undefined,
  result: ProviderResult,
): boolean {
  if (!status?.jobId) return false;
  if (status.providerJobId) return result.id === status.providerJobId;
  return result.id === submissionId(status, status.jobId);
}

function errorText(error: unknown, fallback: string): string {
  if (error === undefined || error === null || error === "") return fallback;
  const text = typeof error === "string" ? error : JSON.stringify(error);
  return text.slice(0, 4096);
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
): MediaJobStatus | undefined {
  // A fast job's callback can arrive before the controller's first status write: judge it against
  // the status the job is about to have (its id is spec.id or the uid, fixed already).
  const status = job.status?.jobId ? job.status : initialStatus(job, now);
  if (isTerminal(status.phase)) return undefined;
  if (!concernsCurrentSubmission(status, result)) return undefined;
  const base: MediaJobStatus = {
    ...status,
    providerJobId: status.providerJobId ?? result.id,
    updatedAt: now,
  };
  switch (result.status) {
    case "COMPLETED": {
      const output =
        result.output && typeof result.output === "object" && !Array.isArray(result.output)
          ? (result.output as Record<string, unknown>)
          : { value: result.output ?? null };
      const { error: _drop, ...rest } = base;
      return { ...rest, phase: "Completed", output, completedAt: now };
    }
    case "FAILED":
    case "TIMED_OUT": {
      const failures = (status.failures ?? 0) + 1;
      const message = errorText(
        result.error,
        result.status === "TIMED_OUT" ? "the job timed out at the provider" : "the job failed",
      );
      // Judged by failures, not submissions: a replay of a lost job is not a failed try, and the
      // failure count is right even when the callback beat the controller's record of the attempt.
      if (failures < maxAttempts(job)) {
        // Retry: back to Pending with a fresh submission id; forget the failed provider job.
        const { providerJobId: _p, submittedAt: _s, ...rest } = base;
        return { ...rest, phase: "Pending", failures, error: `${result.status}: ${message}` };
      }
      return { ...base, phase: "Failed", failures, error: `${result.status}: ${message}`, completedAt: now };
    }
    case "CANCELLED":
      return { ...base, phase: "Cancelled", error: "cancelled at the provider", completedAt: now };
    default:
      return undefined;
  }
}

/** What one submission established: facts that exist only in the controller until written. */
export interface SubmissionRecord {
  providerJobId: string;
  endpointId: string;
  submittedAt: string;
  attempts: number;
}

/**
 * A submission this controller made but could not record because another writer changed the
 * status first (typically the sidecar, applying a callback that beat the controller's write).
 * Returns that writer's status with the submission's facts added where they are missing, or
 * undefined when there is nothing to add. It never changes the phase or the outcome the other
 * writer decided: it only makes a finished job say when, where and as which attempt it ran.
 */
export function recordSubmission(
  current: MediaJobStatus | undefined,
  sub: SubmissionRecord,
): MediaJobStatus | undefined {
  if (!current?.jobId || (current.attempts ?? 0) >= sub.attempts) return undefined;
  if (current.phase === "Pending") {
    // A FAILED callback already sent the job back for a retry: count the submission all the same.
    return { ...current, attempts: sub.attempts, endpointId: sub.endpointId };
  }
  if (current.providerJobId && current.providerJobId !== sub.providerJobId) return undefined;
  return {
    ...current,
    providerJobId: sub.providerJobId,
    endpointId: sub.endpointId,
    submittedAt: current.submittedAt ?? sub.submittedAt,
    attempts: sub.attempts,
  };
}

/**
 * Submissions after which a job the provider keeps losing is failed instead of replayed. A provider
 * keeps a finished job's status only for a while (RunPod: 30 min); when callbacks never reach the
 * sidecar and the timeout is longer than that, every replay would run (and bill) the job again.
 */
export const MAX_ATTEMPTS_AFTER_LOSS = 3;

/** The provider answered 404 for a Processing job: replay it, or stop replaying. */
export function afterProviderLostJob(status: MediaJobStatus, now: string): MediaJobStatus {
  if ((status.attempts ?? 1) >= MAX_ATTEMPTS_AFTER_LOSS) {
    return {
      ...status,
      phase: "Failed",
      updatedAt: now,
      completedAt: now,
      error:
        `ProviderLostJob: the provider lost this job ${status.attempts} times. Its status is kept only for a ` +
        "limited time after it finishes, so callbacks are probably not reaching the sidecar: check " +
        "CALLBACK_BASE_URL and the sidecar, then reset the job to run it again",
    };
  }
  return resetToPending(status, now)!;
}

/** The reset (docs/design.md, Lifecycle): Pending, updatedAt now, replay true; only from Processing. */
export function resetToPending(status: MediaJobStatus, now: string): MediaJobStatus | undefined {
  if (status.phase !== "Processing") return undefined;
  return { ...status, phase: "Pending", updatedAt: now, replay: true };
}

/** The JSON patch that performs the reset atomically: the `test` op makes it apply only to Processing. */
export function resetPatch(
  now: string,
): Array<{ op: "test" | "replace" | "add"; path: string; value: unknown }> {
  return [
    { op: "test", path: "/status/phase", value: "Processing" },
    { op: "replace", path: "/status/phase", value: "Pending" },
    { op: "add", path: "/status/updatedAt", value: now },
    { op: "add", path: "/status/replay", value: true },
  ];
}

/** Milliseconds until a Processing job counts as stuck (negative once it is). */
export function msUntilStuck(job: MediaJob, nowMs: number, defaultTimeoutSeconds: number): number {
  const since = Date.parse(job.status?.submittedAt ?? job.status?.updatedAt ?? "") || nowMs;
  return since + (job.spec.timeoutSeconds ?? defaultTimeoutSeconds) * 1000 - nowMs;
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
    Failed: ["False", "Failed", status.error ?? "the job failed"],
    Cancelled: ["False", "Cancelled", status.error ?? "the job was cancelled"],
  };
  const [s, reason, message] = byPhase[status.phase ?? "Pending"];
  let conditions = setCondition(
    status.conditions,
    { type: "Succeeded", status: s, reason, message },
    now,
    generation,
  );
  if (status.phase === "Processing" || isTerminal(status.phase)) {
    conditions = setCondition(
      conditions,
      {
        type: "Submitted",
        status: "True",
        reason: "Submitted",
        message: `submitted as ${status.providerJobId ?? status.jobId}`,
      },
      now,
      generation,
    );
  }
  return { ...status, conditions, ...(generation !== undefined ? { observedGeneration: generation } : {}) };
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

/** The deterministic name of the MediaJob for the next pipeline step. */
export function nextStepName(job: MediaJob): string {
  const pipeline = job.metadata.labels?.[PIPELINE_LABEL] ?? job.metadata.name;
  const step = Number(job.metadata.labels?.[STEP_LABEL] ?? "0") + 1;
  const workload = job.spec.then?.[0]?.workload ?? "step";
  return `${pipeline.slice(0, 200)}-${step}-${workload}`;
}

/** The next step's MediaJob: created once (fixed name), owned by this job, fed its output. */
export function nextStepObject(job: MediaJob): Record<string, unknown> | undefined {
  const [step, ...rest] = job.spec.then ?? [];
  if (!step || job.status?.phase !== "Completed") return undefined;
  const pipeline = job.metadata.labels?.[PIPELINE_LABEL] ?? job.metadata.name;
  const index = Number(job.metadata.labels?.[STEP_LABEL] ?? "0") + 1;
  return {
    apiVersion: job.apiVersion,
    kind: "MediaJob",
    metadata: {
      name: nextStepName(job),
      namespace: job.metadata.namespace,
      labels: { [PIPELINE_LABEL]: pipeline.slice(0, 63), [STEP_LABEL]: String(index) },
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
