// Replays and resets: the provider lost a job, a job is stuck past its timeout, an operator resets.
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { MAX_REPLAYS } from "./job.js";
import { failedUnconfirmed } from "./unconfirmed.js";

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
function resetUnconfirmedPatch(
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

/** When the job entered Processing (its submission), as the stuck rule measures it. */
export function processingSinceMs(status: MediaJobStatus | undefined): number | undefined {
  const t = Date.parse(status?.submittedAt ?? status?.updatedAt ?? "");
  return Number.isNaN(t) ? undefined : t;
}

/** How long a Processing job runs before it counts as stuck: its timeout, else the default. */
export const stuckLimitMs = (job: MediaJob, defaultTimeoutSeconds: number): number =>
  (job.spec.timeoutSeconds ?? defaultTimeoutSeconds) * 1000;

/** Milliseconds until a Processing job counts as stuck after `limitMs` (negative once it is). */
export function msUntilStuckAfter(job: MediaJob, nowMs: number, limitMs: number): number {
  return (processingSinceMs(job.status) || nowMs) + limitMs - nowMs;
}

/** Milliseconds until a Processing job counts as stuck (negative once it is). */
export function msUntilStuck(job: MediaJob, nowMs: number, defaultTimeoutSeconds: number): number {
  return msUntilStuckAfter(job, nowMs, stuckLimitMs(job, defaultTimeoutSeconds));
}

/** What an operator's reset may reset: a Processing job, or (when asked) one Failed unconfirmed. */
function resettable(status: MediaJobStatus | undefined, opts: { failedUnconfirmed?: boolean }): boolean {
  return status?.phase === "Processing" || (opts.failedUnconfirmed === true && failedUnconfirmed(status));
}

/** Why a job may not be reset. */
function resetRefusal(status: MediaJobStatus | undefined, opts: { failedUnconfirmed?: boolean }): string {
  return (
    `it is ${status?.phase ?? "without a phase"}, not Processing` +
    (opts.failedUnconfirmed && status?.phase === "Failed" ? " or Failed with SubmissionUnconfirmed" : "")
  );
}

type JsonPatch = Array<{ op: "test" | "replace" | "add" | "remove"; path: string; value?: unknown }>;

/**
 * An operator's reset of the job as it was read: the patch (its `test` ops bind it to that very
 * job and submission) and what it resets, or why it may not be reset.
 */
export function planReset(
  status: MediaJobStatus | undefined,
  now: string,
  opts: { failedUnconfirmed?: boolean },
): { patch: JsonPatch; from: "Processing" | "Failed" } | { refused: string } {
  if (!resettable(status, opts) || !status?.jobId) return { refused: resetRefusal(status, opts) };
  if (status.phase === "Processing") return { patch: resetPatch(now, status.jobId), from: "Processing" };
  return { patch: resetUnconfirmedPatch(status, now)!, from: "Failed" };
}

/**
 * Why a reset's patch was refused, from the job as it is now (`current`) against the job it was
 * planned from (`seen`); undefined when neither explains it (the patch failed for another reason).
 */
export function resetLostRace(
  seen: MediaJobStatus,
  current: MediaJobStatus | undefined,
  opts: { failedUnconfirmed?: boolean },
): string | undefined {
  if (!current || current.jobId !== seen.jobId) return "it was re-created under the same name meanwhile";
  if (current.phase !== seen.phase || !resettable(current, opts)) return resetRefusal(current, opts);
  if (current.submission?.id !== seen.submission?.id) return "it was submitted again meanwhile";
  return undefined;
}
