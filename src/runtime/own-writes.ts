// The watch event of a write the controller made itself is no news: the reconcile that wrote it
// already acted on that state (controller-runtime reaches the same end with predicates such as
// GenerationChangedPredicate). This remembers the resourceVersions our writes produced, per key, so
// the event handlers can tell those events from changes made by others, which still count.
import type { KubeApi, KubeObject, Plural } from "../k8s/api.js";
import { objectKey } from "./informer.js";

/** resourceVersions per key are few: a reconcile writes at most a status and a metadata patch. */
const PER_KEY = 4;

/** Versions remembered as arrived before their answers; only the last moments' matter. */
const ARRIVED_LIMIT = 1024;

export class OwnWrites {
  private readonly versions = new Map<string, string[]>();
  /**
   * Versions whose events came before their writes' answers (the apiserver sends both at once;
   * the watch stream is sometimes read first), oldest dropped first: recorded after its event,
   * such a version would wait for a claim that never comes, for as long as its job is cached.
   */
  private readonly arrived = new Set<string>();

  record(obj: KubeObject | undefined): void {
    const rv = obj?.metadata.resourceVersion;
    if (!obj || !rv) return;
    if (this.arrived.delete(rv)) return;
    const key = objectKey(obj);
    const list = this.versions.get(key) ?? [];
    list.push(rv);
    if (list.length > PER_KEY) list.shift();
    this.versions.set(key, list);
  }

  /**
   * Whether this version of the object is one we wrote (each version is claimed once). Called
   * for every event of the resource: a version not (yet) recorded is remembered as arrived.
   */
  claim(obj: KubeObject): boolean {
    const key = objectKey(obj);
    const rv = obj.metadata.resourceVersion ?? "";
    const list = this.versions.get(key);
    const i = list?.indexOf(rv) ?? -1;
    if (!list || i < 0) {
      this.arrived.add(rv);
      if (this.arrived.size > ARRIVED_LIMIT) this.arrived.delete(this.arrived.values().next().value!);
      return false;
    }
    list.splice(i, 1);
    if (!list.length) this.versions.delete(key);
    return true;
  }

  /** Whether this version of the object is one we wrote and whose event is still to come (claims nothing). */
  wrote(obj: KubeObject): boolean {
    const rv = obj.metadata?.resourceVersion;
    return rv !== undefined && (this.versions.get(objectKey(obj))?.includes(rv) ?? false);
  }

  forget(obj: KubeObject): void {
    this.versions.delete(objectKey(obj));
  }

  get size(): number {
    return this.versions.size;
  }
}

/**
 * The API as a reconciler sees it, with every status write and metadata patch of `plural`
 * recorded in `own`. Reads and everything else go to `api` unchanged.
 */
export function recordingWrites(api: KubeApi, plural: Plural, own: OwnWrites): KubeApi {
  const recording: KubeApi = Object.create(api) as KubeApi;
  // updateStatusWithRetry calls this.replaceStatus, so it is recorded through here as well.
  recording.replaceStatus = async <T extends KubeObject>(p: Plural, obj: T): Promise<T> => {
    const written = (await api.replaceStatus.call(recording, p, obj)) as T;
    if (p === plural) own.record(written);
    return written;
  };
  recording.mergePatch = async <T extends KubeObject>(
    p: Plural,
    namespace: string,
    name: string,
    patch: object,
  ): Promise<T> => {
    const written = (await api.mergePatch.call(recording, p, namespace, name, patch)) as T;
    if (p === plural) own.record(written);
    return written;
  };
  return recording;
}
