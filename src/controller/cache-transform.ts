// What the controller's caches keep of each object. The apiserver sends every object whole, with
// metadata.managedFields (the server-side-apply bookkeeping, often the largest part of a small
// object), and a cluster holds far more finished jobs than active ones. The controller reads
// neither managedFields nor the last-applied annotation, nor a finished job's input and steps, so the cache
// drops them, as client-go's TransformStripManagedFields does for managedFields.
//
// Only fields outside status are dropped: a status write (PUT /status) sends the cached object
// with its new status, and the apiserver takes only the status from it, so nothing dropped here
// can be written back as missing.
import type { MediaJob } from "../crds/mediajob.js";
import type { KubeObject } from "../k8s/api.js";
import { atRest } from "./job-at-rest.js";

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/** Drops managedFields and the last-applied annotation (for any cached object). */
export function stripMetadata<T extends KubeObject>(obj: T): T {
  const meta = obj.metadata as T["metadata"] & {
    managedFields?: unknown;
    annotations?: Record<string, string>;
  };
  delete meta.managedFields;
  if (meta.annotations && LAST_APPLIED in meta.annotations) {
    const { [LAST_APPLIED]: _dropped, ...rest } = meta.annotations;
    if (Object.keys(rest).length) meta.annotations = rest;
    else delete meta.annotations;
  }
  return obj;
}

/**
 * stripMetadata, and what a finished job no longer needs: its input (submitted, never sent again)
 * and its pipeline steps (the next one exists).
 */
export function trimMediaJob(job: MediaJob): MediaJob {
  stripMetadata(job);
  if (atRest(job)) {
    const { input: _input, then: _then, ...spec } = job.spec;
    job.spec = spec as MediaJob["spec"];
  }
  return job;
}
