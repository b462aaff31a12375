// How long a finished MediaJob is kept (spec.ttlSecondsAfterFinished, as batch/v1 Job's).
import type { MediaJob } from "../crds/mediajob.js";
import { isTerminal } from "./job.js";
import { usageOutstanding } from "./usage-hold.js";

/**
 * Milliseconds until a finished job is deleted for spec.ttlSecondsAfterFinished (<= 0: now), or
 * undefined while it must stay: no TTL, not finished, or a next pipeline step not yet recorded or
 * still there, or usage not yet billed, counted and reported (usage.ts, usageOutstanding). The pipeline's steps are owned by the step before (ownerReferences), so deleting a
 * step while a later one exists would delete that one too, running or not: a pipeline goes from its
 * last step back, and its first job, the pipeline's handle, goes last.
 */
export function msUntilExpiry(job: MediaJob, nowMs: number, nextStepExists: boolean): number | undefined {
  const ttl = job.spec.ttlSecondsAfterFinished;
  const status = job.status;
  if (ttl === undefined || !isTerminal(status?.phase)) return undefined;
  if (status?.phase === "Completed" && job.spec.then?.length && !status.nextJob) return undefined;
  if (nextStepExists) return undefined;
  // Its usage is billed, counted and reported first: the job is the outbox of its meter report.
  if (usageOutstanding(job)) return undefined;
  const finished = Date.parse(status?.completedAt ?? status?.updatedAt ?? "");
  return (Number.isNaN(finished) ? nowMs : finished) + ttl * 1000 - nowMs;
}
