// Which MediaJobs have nothing left for the controller to do. A finished job is most of what a
// cluster holds; reconciling it on every tick or every watch event would change nothing and cost
// a pass per job.
import type { MediaJob } from "../crds/mediajob.js";
import { FINALIZER, isTerminal } from "./job.js";
import { USAGE_FINALIZER, usageOutstanding } from "./usage-hold.js";

/**
 * Failed, Cancelled, or Completed with its next pipeline step created (or none to create), and no
 * spec.ttlSecondsAfterFinished: a job to be deleted after a while still needs that pass.
 */
export function finishedForGood(job: MediaJob): boolean {
  const status = job.status;
  if (!isTerminal(status?.phase) || job.spec.ttlSecondsAfterFinished !== undefined) return false;
  return status?.phase !== "Completed" || Boolean(status.nextJob) || !job.spec.then?.length;
}

/**
 * Finished for good and let go of (no finalizer of ours, not being deleted). A job kept for its
 * usage report (USAGE_FINALIZER) is at rest while the report waits: the usage reporter's write that
 * settles it brings the pass that lets go, so the tick need not look at every job of a backlog.
 */
export function atRest(job: MediaJob): boolean {
  const finalizers = job.metadata.finalizers ?? [];
  return (
    finishedForGood(job) &&
    !job.metadata.deletionTimestamp &&
    !finalizers.includes(FINALIZER) &&
    !(finalizers.includes(USAGE_FINALIZER) && !usageOutstanding(job))
  );
}

/**
 * At rest, its usage billed, counted and reported (the usage reporter reads it whole from the
 * cache until then), and its current spec observed (status.observedGeneration is the object's generation):
 * a reconcile would change nothing, so the manager never runs one, and the cache keeps such a job
 * as a small record (cache-transform.ts). A spec edit makes the job unobserved until the reconcile
 * it triggers writes the new observedGeneration.
 */
export function settled(job: MediaJob): boolean {
  return (
    atRest(job) &&
    !usageOutstanding(job) &&
    job.metadata.generation !== undefined &&
    job.status?.observedGeneration === job.metadata.generation
  );
}
