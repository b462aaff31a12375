// Which objects of the bucket no job owns any more, and how much each namespace stores. The
// controller writes every object of an attempt under `<namespace>/<jobUid>/<attempt>/<name>`
// (keys.ts); such an object whose job is gone (no MediaJob of that uid in the namespace) is an
// orphan, and is deleted once it is older than a margin (an upload of a job the cache may not
// show yet is never touched). Every other key is the tenants' own (their inputs, anywhere under
// their namespace) and is never deleted, only counted; so is a stage cache entry, until it expires,
// and the attempt objects it names outlive their job while it lives. Pure.

import { parseStageEntryKey } from "./stage-cache.js";

/** One object as the store lists it. */
export interface StoredObject {
  key: string;
  size: number;
  lastModifiedMs: number;
}

/** What one namespace stores: all its objects, and of them the orphans found. */
export interface NamespaceStorage {
  namespace: string;
  objects: number;
  bytes: number;
  orphans: number;
  orphanBytes: number;
}

export interface SweepPlan {
  /** Orphans old enough to delete now. */
  delete: StoredObject[];
  /** Per namespace, sorted by name. */
  namespaces: NamespaceStorage[];
}

// A Kubernetes object uid (RFC 4122, as the apiserver makes them) and an attempt number.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ATTEMPT = /^[1-9][0-9]{0,8}$/;

/** The namespace and job uid of a key the controller wrote, or undefined for any other key. */
export function attemptObjectOwner(key: string): { namespace: string; jobUid: string } | undefined {
  const parts = key.split("/");
  if (parts.length !== 4) return undefined;
  const [namespace, jobUid, attempt, name] = parts as [string, string, string, string];
  if (namespace === "" || name === "" || !UUID.test(jobUid) || !ATTEMPT.test(attempt)) return undefined;
  return { namespace, jobUid };
}

/** The "directory" of a key: up to its last `/`, included. */
export const objectDir = (key: string): string => key.slice(0, key.lastIndexOf("/") + 1);

/**
 * Of the listed objects, the stage cache entries (stage-cache.ts): the attempt directories
 * (`<namespace>/<jobUid>/<attempt>/`) the live ones keep, and the entries older than `ttlMs`.
 */
export function cacheKeeps(
  objects: readonly StoredObject[],
  nowMs: number,
  ttlMs = Infinity,
): { kept: Set<string>; expired: StoredObject[] } {
  const kept = new Set<string>();
  const expired: StoredObject[] = [];
  for (const o of objects) {
    const entry = parseStageEntryKey(o.key);
    if (!entry) continue;
    if (nowMs - o.lastModifiedMs < ttlMs) kept.add(`${entry.namespace}/${entry.jobUid}/${entry.attempt}/`);
    else expired.push(o);
  }
  return { kept, expired };
}

/**
 * The sweep's plan: `liveJobs` holds `<namespace>/<uid>` of every MediaJob the cache shows; an
 * attempt object of any other job is an orphan, deleted once `minAgeMs` old.
 */
export function planSweep(input: {
  objects: readonly StoredObject[];
  liveJobs: ReadonlySet<string>;
  nowMs: number;
  minAgeMs: number;
  /** How long a stage cache entry keeps its attempt's objects (stage-cache.ts); default forever. */
  cacheTtlMs?: number;
}): SweepPlan {
  const perNamespace = new Map<string, NamespaceStorage>();
  const del: StoredObject[] = [];
  // A live stage cache entry keeps the objects of the attempt it names, whatever became of its
  // job; an expired one is deleted, and its attempt's objects are orphans when their job is gone.
  const { kept, expired } = cacheKeeps(input.objects, input.nowMs, input.cacheTtlMs);
  del.push(...expired);
  for (const o of input.objects) {
    const namespace = o.key.split("/", 1)[0]!;
    let ns = perNamespace.get(namespace);
    if (!ns)
      perNamespace.set(namespace, (ns = { namespace, objects: 0, bytes: 0, orphans: 0, orphanBytes: 0 }));
    ns.objects++;
    ns.bytes += o.size;
    const owner = attemptObjectOwner(o.key);
    if (!owner || input.liveJobs.has(`${owner.namespace}/${owner.jobUid}`)) continue;
    if (kept.has(objectDir(o.key))) continue;
    ns.orphans++;
    ns.orphanBytes += o.size;
    if (input.nowMs - o.lastModifiedMs >= input.minAgeMs) del.push(o);
  }
  return {
    delete: del,
    namespaces: [...perNamespace.values()].sort((a, b) => a.namespace.localeCompare(b.namespace)),
  };
}

/**
 * The annotation on each Namespace with what it stores, written by the sweep when it changes: the
 * namespace's tenants and `kubectl media storage` read it without the bucket's credentials.
 */
export const STORAGE_USAGE_ANNOTATION = "media-orchestrator.io/storage-usage";

/** What the annotation holds: the namespace's objects and bytes, and the orphans left after the sweep. */
export interface StorageSummary {
  objects: number;
  bytes: number;
  orphans: number;
  orphanBytes: number;
}

/** The annotation's text for a namespace after a sweep that deleted `deleted` of its orphans; undefined when it stores nothing. */
export function storageSummaryText(
  ns: NamespaceStorage | undefined,
  deleted: readonly StoredObject[],
): string | undefined {
  if (!ns) return undefined;
  const gone = deleted.filter((o) => o.key.startsWith(`${ns.namespace}/`));
  const goneBytes = gone.reduce((n, o) => n + o.size, 0);
  const summary: StorageSummary = {
    objects: ns.objects - gone.length,
    bytes: ns.bytes - goneBytes,
    orphans: ns.orphans - gone.length,
    orphanBytes: ns.orphanBytes - goneBytes,
  };
  return summary.objects > 0 ? JSON.stringify(summary) : undefined;
}

/** The annotation read back; undefined when absent or not a summary. */
export function readStorageSummary(
  annotations: Record<string, string> | undefined,
): StorageSummary | undefined {
  const text = annotations?.[STORAGE_USAGE_ANNOTATION];
  if (text === undefined) return undefined;
  try {
    const v = JSON.parse(text) as Partial<StorageSummary>;
    const ok = (["objects", "bytes", "orphans", "orphanBytes"] as const).every((k) =>
      Number.isSafeInteger(v[k]),
    );
    return ok ? (v as StorageSummary) : undefined;
  } catch {
    return undefined;
  }
}
