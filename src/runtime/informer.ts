// A list+watch cache of one resource (the watch streams over src/k8s/http.ts), hardened against
// what watches are known to do (see docs/controller.md):
//  - a watch that ends or errors is restarted from the last resourceVersion, with backoff;
//  - a watch that goes silent (a dead TCP stream sends nothing and never ends) is aborted by a
//    watchdog; bookmarks keep a healthy idle watch talking;
//  - 410 Gone (resourceVersion too old) triggers a full relist, diffed against the cache so
//    handlers see the deletes they missed;
//  - handlers run synchronously and must only enqueue keys; a throwing handler is contained;
//  - an optional transform trims each object before it is cached (client-go's SetTransform):
//    the cache holds what the controller reads, not everything the apiserver sends.
import type { Logger } from "pino";
import type { ZodType } from "zod";
import type { KubeApi, KubeObject, Plural } from "../k8s/api.js";
import { describeError, isGone, isTimeout } from "../k8s/errors.js";

export type InformerEvent = "add" | "update" | "delete";
export type InformerHandler<T> = (event: InformerEvent, obj: T, old?: T) => void;

export interface InformerOptions<T> {
  plural: Plural;
  namespace?: string;
  schema?: ZodType<T>;
  /** Called with an object that fails the schema (it is left out of the cache, an older copy evicted). */
  onInvalid?: (raw: KubeObject) => void;
  /**
   * Whether an object is a version this process wrote itself (own-writes.ts): it is taken without
   * the schema check. The copy it was written from passed that check when it came in, and the
   * apiserver checked the write against the resource's schema: the check is for what others write.
   */
  ownVersion?: (raw: KubeObject) => boolean;
  /** Trims an accepted object before it is cached (it may change and return the object it gets). */
  transform?: (obj: T) => T;
  /** Only the objects that match (a list's and a watch's fieldSelector), e.g. `metadata.name=x`. */
  fieldSelector?: string;
  /** Server-side watch timeout; the watch is renewed after it (default 60 s). */
  watchTimeoutSeconds?: number;
  /** Abort a watch that sent nothing, not even a bookmark, for this long (default timeout + 30 s). */
  silenceMs?: number;
  maxBackoffMs?: number;
  log: Logger;
}

/** Objects per list request (client-go's reflector pages by 500 as well). */
const LIST_PAGE_SIZE = 500;

export const objectKey = (o: { metadata: { namespace?: string; name: string } }): string =>
  `${o.metadata.namespace ?? ""}/${o.metadata.name}`;

export class Informer<T extends KubeObject> {
  private readonly cache = new Map<string, T>();
  private readonly handlers: InformerHandler<T>[] = [];
  private resourceVersion = "";
  private stopped = false;
  private abort?: AbortController;
  private synced = false;
  private syncWaiters: Array<() => void> = [];
  private loop?: Promise<void>;
  /** Last time the watch delivered anything (event or bookmark) or was (re)established. */
  lastActivityAt = 0;
  restarts = 0;
  relists = 0;
  /** Objects seen that fail the schema (each left out of the cache). */
  invalid = 0;

  constructor(
    private readonly api: KubeApi,
    private readonly opts: InformerOptions<T>,
  ) {}

  on(handler: InformerHandler<T>): void {
    this.handlers.push(handler);
  }

  get hasSynced(): boolean {
    return this.synced;
  }

  get(namespace: string, name: string): T | undefined {
    return this.cache.get(`${namespace}/${name}`);
  }

  getByKey(key: string): T | undefined {
    return this.cache.get(key);
  }

  list(namespace?: string): T[] {
    const all = [...this.cache.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata.namespace === namespace);
  }

  keys(): string[] {
    return [...this.cache.keys()];
  }

  get size(): number {
    return this.cache.size;
  }

  /** Starts the list+watch loop; resolves once the first list is in the cache. */
  async start(): Promise<void> {
    this.stopped = false;
    this.loop ??= this.run();
    if (!this.synced) await new Promise<void>((r) => this.syncWaiters.push(r));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort?.abort();
    for (const w of this.syncWaiters) w();
    this.syncWaiters = [];
    await this.loop;
    this.loop = undefined;
  }

  private emit(event: InformerEvent, obj: T, old?: T): void {
    for (const h of this.handlers) {
      try {
        h(event, obj, old);
      } catch (err) {
        this.opts.log.error({ err: describeError(err) }, "informer handler threw");
      }
    }
  }

  private accept(raw: unknown): T | undefined {
    if (!this.opts.schema || this.opts.ownVersion?.(raw as KubeObject)) return raw as T;
    const res = this.opts.schema.safeParse(raw);
    if (res.success) return res.data;
    const meta = (raw as KubeObject | undefined)?.metadata;
    this.opts.log.warn(
      {
        object: meta ? `${meta.namespace}/${meta.name}` : "?",
        issues: res.error.issues.slice(0, 3).map((i) => i.message),
      },
      "ignoring an object that fails the schema",
    );
    return undefined;
  }

  private upsert(raw: unknown): void {
    const accepted = this.accept(raw);
    if (!accepted) {
      // The object changed into something the controller cannot read. Keeping the older copy would
      // have the controller act on state that is no longer true: evict it, so nothing acts on it
      // until a valid version arrives, and tell (a handler sees the delete; `invalid` counts it).
      const meta = (raw as KubeObject | undefined)?.metadata;
      if (meta?.name) {
        const key = objectKey(raw as KubeObject);
        const old = this.cache.get(key);
        this.invalid++;
        this.opts.onInvalid?.(raw as KubeObject);
        if (old) {
          this.cache.delete(key);
          this.emit("delete", old);
        }
      }
      return;
    }
    const obj = this.opts.transform ? this.opts.transform(accepted) : accepted;
    const key = objectKey(obj);
    const old = this.cache.get(key);
    if (old?.metadata.resourceVersion === obj.metadata.resourceVersion) return;
    this.cache.set(key, obj);
    this.emit(old ? "update" : "add", obj, old);
  }

  private remove(raw: KubeObject): void {
    const key = objectKey(raw);
    const old = this.cache.get(key);
    if (!old) return;
    this.cache.delete(key);
    this.emit("delete", old);
  }

  /**
   * Lists page by page into the cache: a page is trimmed and cached before the next is read, so
   * the process never holds the whole list untrimmed (its peak memory, which the heap keeps).
   */
  private async relist(): Promise<void> {
    const seen = new Set<string>();
    let resourceVersion = "";
    let token: string | undefined;
    do {
      const query = new URLSearchParams({ limit: String(LIST_PAGE_SIZE) });
      if (token) query.set("continue", token);
      if (this.opts.fieldSelector) query.set("fieldSelector", this.opts.fieldSelector);
      const page = await this.api.rawJson<{
        items?: unknown[];
        metadata?: { resourceVersion?: string; continue?: string };
      }>("GET", `${this.path()}?${query.toString()}`);
      for (const item of page.items ?? []) {
        const obj = item as KubeObject;
        seen.add(objectKey(obj));
        this.upsert(obj);
      }
      resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
      token = page.metadata?.continue || undefined;
    } while (token);
    for (const [key, old] of [...this.cache]) if (!seen.has(key)) this.remove(old);
    this.resourceVersion = resourceVersion;
    this.relists++;
    if (!this.synced) {
      this.synced = true;
      for (const w of this.syncWaiters) w();
      this.syncWaiters = [];
    }
  }

  private path(): string {
    return this.api.objectPath(this.opts.plural, this.opts.namespace);
  }

  /** One watch, from the current resourceVersion, until it ends. */
  private watchOnce(): Promise<"ended" | "expired" | "stalled"> {
    const timeoutSeconds = this.opts.watchTimeoutSeconds ?? 60;
    const silenceMs = this.opts.silenceMs ?? (timeoutSeconds + 30) * 1000;
    return new Promise((resolve, reject) => {
      let outcome: "ended" | "expired" | "stalled" = "ended";
      let settled = false;
      const finish = (err?: unknown) => {
        if (settled) return;
        settled = true;
        clearInterval(watchdog);
        this.abort?.abort();
        if (err && outcome === "ended" && !this.stopped) reject(err);
        else resolve(outcome);
      };
      this.lastActivityAt = Date.now();
      const watchdog = setInterval(
        () => {
          if (Date.now() - this.lastActivityAt > silenceMs) {
            outcome = "stalled";
            finish();
          }
        },
        Math.min(5_000, silenceMs / 2),
      );
      watchdog.unref();
      const controller = new AbortController();
      this.abort = controller;
      this.api
        .watch(
          this.path(),
          {
            resourceVersion: this.resourceVersion,
            allowWatchBookmarks: true,
            timeoutSeconds,
            ...(this.opts.fieldSelector && { fieldSelector: this.opts.fieldSelector }),
          },
          (type, obj) => {
            this.lastActivityAt = Date.now();
            if (type === "ERROR") {
              // 410 Gone (or any other error object): our resourceVersion is unusable; relist.
              outcome = "expired";
              this.opts.log.info({ code: obj.code }, "watch error event; relisting");
              return finish();
            }
            const rv = obj.metadata?.resourceVersion;
            if (rv) this.resourceVersion = rv;
            if (type === "ADDED" || type === "MODIFIED") this.upsert(obj);
            else if (type === "DELETED") this.remove(obj as KubeObject);
          },
          (err: unknown) => {
            if (err && isGone(err)) outcome = "expired";
            else if (isTimeout(err)) outcome = "stalled"; // the library's own silence limit
            finish(err);
          },
          controller.signal,
          silenceMs,
        )
        .catch(finish);
    });
  }

  private async run(): Promise<void> {
    let backoff = 500;
    const maxBackoff = this.opts.maxBackoffMs ?? 30_000;
    while (!this.stopped) {
      try {
        if (!this.resourceVersion) await this.relist();
        const outcome = await this.watchOnce();
        if (this.stopped) break;
        if (outcome === "expired") this.resourceVersion = "";
        if (outcome === "stalled")
          this.opts.log.warn({ plural: this.opts.plural }, "watch went silent; restarting it");
        this.restarts++;
        backoff = 500;
      } catch (err) {
        if (this.stopped) break;
        if (isGone(err)) this.resourceVersion = "";
        this.restarts++;
        this.opts.log.warn(
          { plural: this.opts.plural, err: describeError(err), retryInMs: backoff },
          "list/watch failed",
        );
        await new Promise((r) => setTimeout(r, backoff * (0.5 + Math.random() / 2)));
        backoff = Math.min(maxBackoff, backoff * 2);
      }
    }
  }
}
