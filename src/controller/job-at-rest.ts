// Which MediaJobs have nothing left for the controller to do. A finished job is most of what a
// cluster holds; reconciling it on every tick or every watch event would change nothing and cost
// a pass per job (and, before this, provider calls and writes at rest).
import type { MediaJob } from "../crds/mediajob.js";
import { FINALIZER, isTerminal } from "./mediajob/lifecycle.js";

/** Failed, Cancelled, or Completed with its next pipeline step created (or none to create). */
export function finishedForGood(job: MediaJob): boolean {
  const status = job.status;
  if (!isTerminal(status?.phase)) return false;
  return status?.phase !== "Completed" || Boolean(status.nextJob) || !job.spec.then?.length;
}

/** Finished for good and let go of (no finalizer of ours, not being deleted). */
export function atRest(job: MediaJob): boolean {
  return (
    finishedForGood(job) && !job.metadata.deletionTimestamp && !job.metadata.finalizers?.includes(FINALIZER)
  );
}
