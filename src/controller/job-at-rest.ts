// Which watch events of a MediaJob are worth a reconcile, from the domain's at-rest predicates.
import type { MediaJob } from "../crds/mediajob.js";
import { atRest, finishedForGood } from "../mediajob/at-rest.js";

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
