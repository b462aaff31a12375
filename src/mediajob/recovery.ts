// Replays and resets: the provider lost a job, a job is stuck past its timeout, an operator resets.
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { failedUnconfirmed } from "./unconfirmed.js";

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
