// What the controller's caches keep of each object. The apiserver sends every object whole, with
// metadata.managedFields (the server-side-apply bookkeeping, often the largest part of a small
// object), and a cluster holds far more finished jobs than active ones, so the cache's memory
// follows active work, not history:
//  - every object loses managedFields and the last-applied annotation (client-go's
//    TransformStripManagedFields), which the controller never reads;
//  - a settled job (src/mediajob/at-rest.ts: finished for good, let go of, its spec observed) is kept as a
//    small record of what the controller reads of such a job (its key and identity, phase, next
//    step, workload): the manager never reconciles it, it only tells a change (a spec edit, a
//    reset, a deletion), and the watch event of that change brings the whole object back;
//  - a finished job not yet settled (a spec edit to observe, a finalizer to remove) keeps its
//    status whole, since the reconcile that settles it writes status from it (a status write,
//    PUT /status, takes only the status from the object sent), and loses its input and steps.
import type { MediaJob } from "../crds/mediajob.js";
import type { KubeObject } from "../k8s/api.js";
import { atRest, settled } from "../mediajob/at-rest.js";
import { keptVersion, versionString, type KeptVersion } from "./resource-version.js";

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * Drops managedFields and the last-applied annotation (for any cached object). The metadata is
 * rebuilt without them rather than `delete`d from: deleting a property turns an object into a
 * dictionary, several times the size of the same object with fixed fields.
 */
export function stripMetadata<T extends KubeObject>(obj: T): T {
  const {
    managedFields: _managedFields,
    annotations,
    ...meta
  } = obj.metadata as T["metadata"] & {
    managedFields?: unknown;
    annotations?: Record<string, string>;
  };
  const kept = annotations && LAST_APPLIED in annotations ? withoutLastApplied(annotations) : annotations;
  if (kept) (meta as typeof meta & { annotations?: Record<string, string> }).annotations = kept;
  obj.metadata = meta as T["metadata"];
  return obj;
}

function withoutLastApplied(annotations: Record<string, string>): Record<string, string> | undefined {
  const { [LAST_APPLIED]: _dropped, ...rest } = annotations;
  return Object.keys(rest).length ? rest : undefined;
}

/**
 * Values many cached jobs repeat (namespace, apiVersion, workload, phase, creation second,
 * condition types, reasons and messages, finalizer names), one copy each: the JSON parser makes a
 * new string per occurrence. Bounded: when full the table starts over, so values seen once (a message naming a
 * provider id) cannot crowd out the common ones for long, and a string is never kept alive by
 * the table alone beyond one generation of it.
 */
const SHARED_LIMIT = 4096;
const shared = new Map<string, string>();
function share<T extends string | undefined>(value: T): T {
  if (value === undefined) return value;
  return interned(shared, SHARED_LIMIT, value, () => value) as T;
}

/** The table's value for `key`, made and kept on first use; a full table starts over. */
function interned<V>(table: Map<string, V>, limit: number, key: string, make: () => V): V {
  const known = table.get(key);
  if (known !== undefined) return known;
  if (table.size >= limit) table.clear();
  const value = make();
  table.set(key, value);
  return value;
}

/**
 * A list many cached jobs hold alike (their finalizers), one frozen copy for all: a reader that
 * tried to change it in place would throw instead of changing every job that shares it.
 */
const sharedLists = new Map<string, readonly string[]>();
function shareList(list: string[]): string[] {
  return interned(sharedLists, SHARED_LIMIT, list.join("\u0000"), () =>
    Object.freeze(list.map(share)),
  ) as string[];
}

type Condition = NonNullable<NonNullable<MediaJob["status"]>["conditions"]>[number];
const CONDITION_FIELDS = 6;

/**
 * A condition with its strings shared, built as one literal: the parser adds fields one by one,
 * which leaves some of them outside the object in a second, growable store. A condition with a
 * field this does not know is kept as it came.
 */
function compactCondition(c: Condition, instant: (v: string) => string): Condition {
  const fields = Object.keys(c).length;
  const type = share(c.type);
  const status = share(c.status);
  const lastTransitionTime = instant(c.lastTransitionTime);
  const reason = share(c.reason);
  const message = share(c.message);
  if (!("observedGeneration" in c) && fields === CONDITION_FIELDS - 1)
    return { type, status, lastTransitionTime, reason, message };
  if (c.observedGeneration !== undefined && fields === CONDITION_FIELDS)
    return { type, status, observedGeneration: c.observedGeneration, lastTransitionTime, reason, message };
  return Object.assign(c, { type, status, lastTransitionTime, reason, message });
}

/**
 * Shares what a whole (not settled) job repeats with other jobs, and within itself: one pass
 * writes the same instant into several timestamps (submittedAt, updatedAt, the conditions'
 * lastTransitionTime), and the job id is usually the uid, each a separate string once parsed.
 */
function shareStrings(job: MediaJob): MediaJob {
  const own = new Map<string, string>();
  const instant = (v: string): string => {
    const known = own.get(v);
    if (known !== undefined) return known;
    own.set(v, v);
    return v;
  };
  const m = job.metadata;
  job.apiVersion = share(job.apiVersion);
  m.namespace = share(m.namespace);
  // Seconds only: the jobs created within one second share it.
  if (typeof m.creationTimestamp === "string") m.creationTimestamp = share(m.creationTimestamp);
  if (m.uid !== undefined) m.uid = instant(m.uid);
  if (m.finalizers) m.finalizers = shareList(m.finalizers);
  job.spec.workload = share(job.spec.workload);
  if (job.spec.endpointRef) job.spec.endpointRef = share(job.spec.endpointRef);
  const st = job.status;
  if (!st) return job;
  // A field is replaced only when present: adding an absent one, even as undefined, would grow
  // the object.
  if (st.phase !== undefined) st.phase = share(st.phase);
  if (st.jobId !== undefined) st.jobId = instant(st.jobId);
  if (st.endpointId !== undefined) st.endpointId = share(st.endpointId);
  if (st.submittedAt !== undefined) st.submittedAt = instant(st.submittedAt);
  if (st.updatedAt !== undefined) st.updatedAt = instant(st.updatedAt);
  if (st.completedAt !== undefined) st.completedAt = instant(st.completedAt);
  if (st.submission) {
    st.submission.state = share(st.submission.state);
    st.submission.startedAt = instant(st.submission.startedAt);
  }
  if (st.conditions) st.conditions = st.conditions.map((c) => compactCondition(c, instant));
  return job;
}

/** What a settled record keeps besides its name, uid and resourceVersion. */
interface SettledShape {
  readonly apiVersion: string;
  readonly namespace: string | undefined;
  readonly workload: MediaJob["spec"]["workload"];
  readonly phase: NonNullable<MediaJob["status"]>["phase"];
  readonly generation: number | undefined;
  readonly observedGeneration: number | undefined;
  readonly nextJob?: string;
  readonly finalizers?: string[];
}

/**
 * Most settled jobs differ only in name, uid and resourceVersion: one shape object per
 * (apiVersion, namespace, workload, phase, generations) is shared by all of them. A job with a
 * next step or another controller's finalizers has a shape of its own. Bounded like `shared`.
 */
const SHAPES_LIMIT = 1024;
const shapes = new Map<string, SettledShape>();
function shapeOf(job: MediaJob): SettledShape {
  const shape: SettledShape = {
    apiVersion: share(job.apiVersion),
    namespace: share(job.metadata.namespace),
    workload: share(job.spec.workload),
    phase: share(job.status?.phase),
    generation: job.metadata.generation,
    observedGeneration: job.status?.observedGeneration,
  };
  const nextJob = job.status?.nextJob;
  // Another controller's finalizers are kept: they say the object is not free to go yet.
  const finalizers = job.metadata.finalizers?.length ? job.metadata.finalizers.map(share) : undefined;
  if (nextJob !== undefined || finalizers) return { ...shape, nextJob, finalizers };
  const key = [
    shape.apiVersion,
    shape.namespace,
    shape.workload,
    shape.phase,
    shape.generation,
    shape.observedGeneration,
  ].join("\u0000");
  return interned(shapes, SHAPES_LIMIT, key, () => shape);
}

/**
 * The record a settled job is cached as: what the manager's handlers, the resync and the metrics
 * read of it (docs/controller.md, "The cache"). Not an object to act on: it has no input, no
 * steps and almost no status, and the manager does not reconcile a settled job.
 *
 * A cluster holds far more settled jobs than anything else, so the record holds four values (its
 * name, uid, resourceVersion and a shape most records share) and builds `metadata`, `spec` and
 * `status` when they are read. They are own, enumerable, read-only properties, so to every reader
 * (a spread, JSON.stringify, a deep comparison) the record is a plain MediaJob; a reader that
 * assigns to one gets a TypeError instead of a change that would be lost.
 */
class SettledJobRecord {
  readonly #name: string;
  readonly #uid: string | undefined;
  readonly #resourceVersion: KeptVersion | undefined;
  readonly #shape: SettledShape;
  declare readonly apiVersion: string;
  declare readonly kind: "MediaJob";
  declare readonly metadata: MediaJob["metadata"];
  declare readonly spec: MediaJob["spec"];
  declare readonly status: NonNullable<MediaJob["status"]>;

  constructor(job: MediaJob) {
    this.#name = job.metadata.name;
    this.#uid = job.metadata.uid;
    this.#resourceVersion = keptVersion(job.metadata.resourceVersion);
    this.#shape = shapeOf(job);
    // Accessors defined alike on every record share one hidden class: they cost no memory per record.
    Object.defineProperties(this, SettledJobRecord.#view);
  }

  static readonly #view: PropertyDescriptorMap = {
    apiVersion: {
      enumerable: true,
      get(this: SettledJobRecord) {
        return this.#shape.apiVersion;
      },
    },
    kind: { enumerable: true, get: () => "MediaJob" },
    metadata: {
      enumerable: true,
      get(this: SettledJobRecord): MediaJob["metadata"] {
        const shape = this.#shape;
        const metadata: MediaJob["metadata"] = {
          name: this.#name,
          namespace: shape.namespace,
          uid: this.#uid,
          resourceVersion: versionString(this.#resourceVersion),
          generation: shape.generation,
        };
        if (shape.finalizers) metadata.finalizers = [...shape.finalizers];
        return metadata;
      },
    },
    spec: {
      enumerable: true,
      get(this: SettledJobRecord): MediaJob["spec"] {
        return { workload: this.#shape.workload };
      },
    },
    status: {
      enumerable: true,
      get(this: SettledJobRecord): NonNullable<MediaJob["status"]> {
        const shape = this.#shape;
        const status: NonNullable<MediaJob["status"]> = {
          phase: shape.phase,
          observedGeneration: shape.observedGeneration,
        };
        if (shape.nextJob !== undefined) status.nextJob = shape.nextJob;
        return status;
      },
    },
  };
}

/** The record a settled job is cached as (see SettledJobRecord). */
export function settledJobRecord(job: MediaJob): MediaJob {
  return new SettledJobRecord(job);
}

/** What the MediaJob cache keeps of a job (the informer's transform). */
export function trimMediaJob(job: MediaJob): MediaJob {
  if (settled(job)) return settledJobRecord(job);
  stripMetadata(job);
  if (atRest(job)) {
    const { input: _input, then: _then, ...spec } = job.spec;
    job.spec = spec as MediaJob["spec"];
  }
  return shareStrings(job);
}
