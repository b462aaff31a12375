// What the controller's caches keep of each object. The apiserver sends every object whole, with
// metadata.managedFields (the server-side-apply bookkeeping, often the largest part of a small
// object), and a cluster holds far more finished jobs than active ones, so the cache's memory
// follows active work, not history:
//  - every object loses managedFields and the last-applied annotation (client-go's
//    TransformStripManagedFields), which the controller never reads;
//  - a settled job (src/mediajob/at-rest.ts: finished for good, let go of, its spec observed) is kept as a
//    small record of what the controller reads of such a job (its key and identity, phase, next
//    step, workload, the provider job it holds): the manager never reconciles it, it only tells a change (a spec edit, a
//    reset, a deletion), and the watch event of that change brings the whole object back;
//  - a finished job not yet settled (a spec edit to observe, a finalizer to remove) keeps its
//    status whole, since the reconcile that settles it writes status from it (a status write,
//    PUT /status, takes only the status from the object sent), and loses its input and steps.
import { STORAGE_USAGE_ANNOTATION } from "../storage/retention.js";
import type { MediaJob } from "../crds/mediajob.js";
import type { KubeObject } from "../k8s/api.js";
import { atRest, settled } from "../mediajob/at-rest.js";
import { ACCOUNTS_ANNOTATION, ACCOUNTS_USAGE_ANNOTATION } from "../mediajob/tenancy.js";
import { stripMetadata } from "../runtime/strip-metadata.js";

/**
 * The record a settled job is cached as: what the manager's handlers, the resync and the metrics
 * read of it (docs/controller.md, "The cache"). Not an object to act on: it has no input, no
 * steps and almost no status, and the manager does not reconcile a settled job. Frozen, so a
 * reader that assigns to it gets a TypeError instead of a change that would be lost.
 */
function settledJobRecord(job: MediaJob): MediaJob {
  const m = job.metadata;
  const metadata: MediaJob["metadata"] = {
    name: m.name,
    namespace: m.namespace,
    uid: m.uid,
    resourceVersion: m.resourceVersion,
    generation: m.generation,
  };
  // Another controller's finalizers are kept: they say the object is not free to go yet.
  if (m.finalizers?.length) metadata.finalizers = m.finalizers;
  const status: NonNullable<MediaJob["status"]> = {
    phase: job.status?.phase,
    observedGeneration: job.status?.observedGeneration,
  };
  if (job.status?.nextJob !== undefined) status.nextJob = job.status.nextJob;
  // Which provider job it holds: a /run answer naming it for another job is refused (holders).
  if (job.status?.providerJobId !== undefined) status.providerJobId = job.status.providerJobId;
  return deepFreeze({
    apiVersion: job.apiVersion,
    kind: "MediaJob",
    metadata,
    spec: { workload: job.spec.workload },
    status,
  } as MediaJob);
}

function deepFreeze<T extends object>(o: T): T {
  for (const v of Object.values(o)) if (v !== null && typeof v === "object") deepFreeze(v as object);
  return Object.freeze(o);
}

/** What the MediaJob cache keeps of a job (the informer's transform). */
export function trimMediaJob(job: MediaJob): MediaJob {
  if (settled(job)) return settledJobRecord(job);
  stripMetadata(job);
  if (atRest(job)) {
    const { input: _input, then: _then, ...spec } = job.spec;
    job.spec = spec as MediaJob["spec"];
  }
  return job;
}

/** A Namespace as the cache keeps it: its name, its account binding and their summary, its storage's summary. */
export function keepBinding(ns: KubeObject): KubeObject {
  const annotations = ns.metadata.annotations as Record<string, string> | undefined;
  const kept: Record<string, string> = {};
  for (const key of [ACCOUNTS_ANNOTATION, ACCOUNTS_USAGE_ANNOTATION, STORAGE_USAGE_ANNOTATION])
    if (annotations?.[key] !== undefined) kept[key] = annotations[key];
  return {
    metadata: {
      name: ns.metadata.name,
      ...(ns.metadata.resourceVersion !== undefined && { resourceVersion: ns.metadata.resourceVersion }),
      ...(Object.keys(kept).length > 0 && { annotations: kept }),
    },
  };
}
