// Which MediaJobs have nothing left for the controller to do. A finished job is most of what a
// cluster holds; reconciling it on every tick or every watch event would change nothing and cost
// a pass per job (and, before this, provider calls and writes at rest).
import type { MediaJob } from "../crds/mediajob.js";
import { FINALIZER, isTerminal } from "../mediajob/lifecycle.js";

/**
 * Failed, Cancelled, or Completed with its next pipeline step created (or none to create), and no
 * spec.ttlSecondsAfterFinished: a job to be deleted after a while still needs that pass.
 */
export function finishedForGood(job: MediaJob): boolean {
  const status = job.status;
  if (!isTerminal(status?.phase) || job.spec.ttlSecondsAfterFinished !== undefined) return false;
  return status?.phase !== "Completed" || Boolean(status.nextJob) || !job.spec.then?.length;
}

/** Finished for good and let go of (no finalizer of ours, not being deleted). */
export function atRest(job: MediaJob): boolean {
  return (
    finishedForGood(job) && !job.metadata.deletionTimestamp && !job.metadata.finalizers?.includes(FINALIZER)
  );
}

/**
 * At rest, and its current spec observed (status.observedGeneration is the object's generation):
 * a reconcile would change nothing, so the manager never runs one, and the cache keeps such a job
 * as a small record (cache-transform.ts). A spec edit makes the job unobserved until the reconcile
 * it triggers writes the new observedGeneration.
 */
export function settled(job: MediaJob): boolean {
  return (
    atRest(job) &&
    job.metadata.generation !== undefined &&
    job.status?.observedGeneration === job.metadata.generation
  );
}

/**
 * Whether a watch event of a MediaJob is a reason to reconcile it. `ours`: this version is one the
 * controller wrote itself; `supersededByUs`: a later write of ours replaced it. Our own write of
 * a finished job is no news (the pass that wrote it also lets go of it, or failed and waits on its
 * backoff); a job at rest is looked at again only when its spec changes or it is deleted. A
 * Pending or Processing job is looked at on every event, its own writes included: a pass may end
 * on its write and count on the event to go on.
 */
export function jobEventWorthALook(
  event: "add" | "update" | "delete",
  job: MediaJob,
  old: MediaJob | undefined,
  ours: boolean,
  supersededByUs = false,
): boolean {
  if (event === "delete" || job.metadata.deletionTimestamp) return true;
  // A version we wrote and then wrote over in the same pass (the finalizer, then the intent, then
  // the provider's id): the event of the last write follows, and a pass on this one would only
  // find the cache stale and wait for it.
  if (ours && supersededByUs) return false;
  if (ours) return !finishedForGood(job);
  const specChanged = event === "update" && old?.metadata.generation !== job.metadata.generation;
  return specChanged || !atRest(job);
}
