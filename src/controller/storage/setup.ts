// The storage loop's setup (docs/design.md, "Media and storage", Retention): a deleted MediaJob's
// objects (`<namespace>/<uid>/...`, keys.ts) are deleted once the informer tells of the deletion,
// and a sweep of the whole bucket at STORAGE_SWEEP_INTERVAL_SECONDS deletes the orphans that
// missed it (the store was down, the controller restarted between the two), older than
// STORAGE_ORPHAN_MIN_AGE_SECONDS, and sets how much each namespace stores. Leader only; nothing
// runs, and no storage code is loaded, while storage is off.
import { Counter, Gauge } from "prom-client";
import { describeError } from "../../k8s/errors.js";
import { openStore, type Store } from "../../storage/index.js";
import {
  cacheKeeps,
  objectDir,
  planSweep,
  STORAGE_USAGE_ANNOTATION,
  storageSummaryText,
  type NamespaceStorage,
  type StoredObject,
} from "../../storage/retention.js";
import { jobObjectPrefix } from "../../storage/keys.js";
import { CACHE_DIR } from "../../storage/stage-cache.js";
import type { LoopContext } from "../loop-context.js";

/** Deletions in flight at once (one store call each). */
const DELETE_CONCURRENCY = 8;

export function setupStorage(ctx: LoopContext) {
  const { env, log } = ctx;
  const { jobs, namespaces } = ctx.caches;
  const registers = [ctx.metrics.registry];
  const objects = new Gauge({
    name: "media_orchestrator_storage_objects",
    help: "Objects in the media bucket per namespace, at the last sweep",
    labelNames: ["namespace"] as const,
    registers,
  });
  const bytes = new Gauge({
    name: "media_orchestrator_storage_bytes",
    help: "Bytes in the media bucket per namespace, at the last sweep",
    labelNames: ["namespace"] as const,
    registers,
  });
  const deleted = new Counter({
    name: "media_orchestrator_storage_objects_deleted_total",
    help: "Objects deleted from the media bucket: with their job (job_deleted) or by the sweep (orphan)",
    labelNames: ["reason"] as const,
    registers,
  });
  const sweepFailures = new Counter({
    name: "media_orchestrator_storage_sweep_failures_total",
    help: "Sweeps or job-object deletions that failed (the store unreachable or refusing); retried",
    registers,
  });

  let store: Store | undefined;
  let timer: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> | undefined;
  /** Prefixes of deleted jobs waiting to be emptied, one pass at a time. */
  const gone = new Set<string>();
  let emptying: Promise<void> | undefined;

  /** Lists every object under `prefix` (all pages). */
  async function listAll(s: Store, prefix?: string): Promise<StoredObject[]> {
    const all: StoredObject[] = [];
    let next: string | undefined;
    do {
      const page = await s.client.list(next, prefix);
      all.push(...page.objects);
      next = page.next;
    } while (next !== undefined);
    return all;
  }

  async function deleteAll(s: Store, list: readonly StoredObject[], reason: string): Promise<void> {
    let i = 0;
    const worker = async () => {
      while (i < list.length && ctx.fence()) {
        const o = list[i++]!;
        await s.client.delete(o.key);
        deleted.inc({ reason });
      }
    };
    await Promise.all(Array.from({ length: Math.min(DELETE_CONCURRENCY, list.length) }, worker));
  }

  /** Empties the prefixes of the jobs deleted meanwhile; a failure leaves them to the sweep. */
  function emptyDeleted(): void {
    if (emptying || !store || gone.size === 0) return;
    const s = store;
    emptying = (async () => {
      // What the namespaces' live stage cache entries keep stays (stage-cache.ts): read once a pass.
      const namespaces = new Set([...gone].map((p) => p.slice(0, p.indexOf("/"))));
      const kept = new Set<string>();
      for (const ns of namespaces)
        for (const dir of cacheKeeps(
          await listAll(s, `${ns}/${CACHE_DIR}/`),
          Date.now(),
          env.STORAGE_CACHE_TTL_SECONDS * 1000,
        ).kept)
          kept.add(dir);
      for (const prefix of [...gone]) {
        gone.delete(prefix);
        if (!ctx.fence()) return;
        const objects = await listAll(s, prefix);
        await deleteAll(
          s,
          objects.filter((o) => !kept.has(objectDir(o.key))),
          "job_deleted",
        );
      }
    })()
      .catch((err: unknown) => {
        sweepFailures.inc();
        // Left to the sweep, all of them: trying the rest again at once would call a store that is
        // down in a loop without pause (the cache entries' listing fails before any prefix is taken).
        gone.clear();
        log.warn({ err: describeError(err) }, "a deleted job's objects were not deleted; the sweep retries");
      })
      .finally(() => {
        emptying = undefined;
        if (gone.size > 0 && ctx.leading()) emptyDeleted();
      });
  }

  /** The whole bucket against the cache: orphans deleted, each namespace's use set. */
  function sweep(): void {
    if (sweeping || !store || !ctx.leading() || !ctx.synced()) return;
    const s = store;
    sweeping = (async () => {
      // A controller that watches one namespace knows only that namespace's jobs: it sweeps only there.
      const listed = await listAll(
        s,
        env.WATCH_NAMESPACE === undefined ? undefined : `${env.WATCH_NAMESPACE}/`,
      );
      const liveJobs = new Set(jobs.list().map((j) => `${j.metadata.namespace}/${j.metadata.uid}`));
      const plan = planSweep({
        objects: listed,
        liveJobs,
        nowMs: Date.now(),
        minAgeMs: env.STORAGE_ORPHAN_MIN_AGE_SECONDS * 1000,
        cacheTtlMs: env.STORAGE_CACHE_TTL_SECONDS * 1000,
      });
      objects.reset();
      bytes.reset();
      for (const ns of plan.namespaces) {
        objects.set({ namespace: ns.namespace }, ns.objects);
        bytes.set({ namespace: ns.namespace }, ns.bytes);
      }
      await deleteAll(s, plan.delete, "orphan");
      if (plan.delete.length > 0) log.info({ deleted: plan.delete.length }, "orphaned media objects deleted");
      await summarize(plan.namespaces, plan.delete);
    })()
      .catch((err: unknown) => {
        sweepFailures.inc();
        log.warn({ err: describeError(err) }, "storage sweep failed; retried at the next interval");
      })
      .finally(() => (sweeping = undefined));
  }

  /** Each Namespace's storage annotation, written only when it changed (none at rest). */
  async function summarize(measured: readonly NamespaceStorage[], deleted: readonly StoredObject[]) {
    const byName = new Map(measured.map((n) => [n.namespace, n]));
    for (const ns of namespaces.list()) {
      const annotations = ns.metadata.annotations as Record<string, string> | undefined;
      const text = storageSummaryText(byName.get(ns.metadata.name), deleted);
      if (text === annotations?.[STORAGE_USAGE_ANNOTATION] || !ctx.fence()) continue;
      await ctx.api
        .mergePatch("namespaces", "", ns.metadata.name, {
          metadata: { annotations: { [STORAGE_USAGE_ANNOTATION]: text ?? null } },
        })
        .catch((err: unknown) =>
          log.warn({ namespace: ns.metadata.name, err: describeError(err) }, "storage summary not written"),
        );
    }
  }

  jobs.on((event, job) => {
    if (event !== "delete" || !store || !ctx.leading() || !job.metadata.uid) return;
    gone.add(jobObjectPrefix(job.metadata.namespace ?? "", job.metadata.uid));
    emptyDeleted();
  });

  return {
    /** The store, once load() opened it. */
    store: (): Store | undefined => store,
    /** Opens the store (loads its code) when storage is on. */
    async load(): Promise<void> {
      store ??= await openStore(env);
    },
    lead(): void {
      if (!store) return;
      sweep();
      timer = setInterval(sweep, env.STORAGE_SWEEP_INTERVAL_SECONDS * 1000);
      timer.unref();
    },
    stopLeading(): void {
      if (timer) clearInterval(timer);
      timer = undefined;
      gone.clear();
    },
    async stop(): Promise<void> {
      if (timer) clearInterval(timer);
      await Promise.all([sweeping, emptying]);
      store?.client.close();
    },
  };
}
