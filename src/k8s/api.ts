// A small typed door to the project's custom resources: JSON over HTTP/1.1 (./http.ts). Status is
// written with PUT on the status subresource carrying the resourceVersion we read: the apiserver
// answers 409 when someone else wrote in between (optimistic concurrency), and the status becomes
// exactly what we computed (no merge surprises). Every call has a deadline: the client's, or the
// call's own CallOptions. @kubernetes/client-node is not imported here: its typed clients and its
// HTTP path (a cluster behind a proxy) load on first use, from ./typed.ts.
import { GROUP, VERSION } from "../crds/common.js";
import type { ClusterConfig } from "./cluster-config.js";
import { DEFAULT_KUBE_TIMEOUT_MS, type CallOptions } from "./deadline.js";
import { isConflict, isNotFound } from "./errors.js";
import { KubeHttp, type WatchObject } from "./http.js";
import type { TypedClients } from "./typed.js";

export type { CallOptions } from "./deadline.js";

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

export interface ListResult<T> {
  items: T[];
  resourceVersion: string;
}

export type Plural = "mediajobs" | "gpuendpoints" | "paymentevents" | "billingaccounts" | "namespaces";

export interface JsonPatchOp {
  op: "add" | "remove" | "replace" | "test" | "copy" | "move";
  path: string;
  value?: unknown;
}

export interface KubeApiOptions {
  /** Deadline of every call that names none (default 30 s). */
  timeoutMs?: number;
  /** How long TLS material and credentials read from the configuration are reused (default 10 s). */
  credentialsTtlMs?: number;
}

/** Content types of the patches the apiserver accepts. */
const JSON_PATCH = "application/json-patch+json";
const MERGE_PATCH = "application/merge-patch+json";

export class KubeApi {
  readonly timeoutMs: number;
  /** The fast path (src/k8s/http.ts); absent for a cluster behind a proxy. */
  private readonly fast?: KubeHttp;
  private typedClients?: Promise<TypedClients>;

  constructor(
    /** The cluster's configuration: client-node's KubeConfig, or the in-cluster one. */
    readonly kubeConfig: ClusterConfig,
    opts: KubeApiOptions = {},
  ) {
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_KUBE_TIMEOUT_MS;
    if (!kubeConfig.getCurrentCluster()) throw new Error("no current cluster in kubeconfig");
    if (KubeHttp.serves(kubeConfig))
      this.fast = new KubeHttp(kubeConfig, this.timeoutMs, opts.credentialsTtlMs);
  }

  /**
   * client-node's typed clients (CoreV1Api, CustomObjectsApi) on the same configuration, with the
   * client's deadline. Loads client-node (about 85 MiB of memory) on first use: the CLI and the
   * tests use them, the containers do not.
   */
  typed(): Promise<TypedClients> {
    this.typedClients ??= import("./typed.js").then(
      ({ TypedClients }) => new TypedClients(this.kubeConfig, this.timeoutMs),
    );
    return this.typedClients;
  }

  /**
   * A watch of `path` with the fast path's streaming, else client-node's Watch. `done` is called
   * once when the watch ends or fails (not after `signal` aborted it).
   */
  async watch(
    path: string,
    query: Record<string, string | number | boolean>,
    onEvent: (type: string, object: WatchObject) => void,
    done: (err?: unknown) => void,
    signal: AbortSignal,
    inactivityMs: number,
  ): Promise<void> {
    if (this.fast) return this.fast.watch(path, query, onEvent, done, signal);
    return (await this.typed()).watch(path, query, onEvent, done, signal, inactivityMs);
  }

  objectPath(plural: Plural, namespace: string | undefined, name?: string, sub?: string): string {
    // Namespaces are the one core, cluster-scoped resource read here (their account bindings).
    const base =
      plural === "namespaces"
        ? "/api/v1/namespaces"
        : namespace
          ? `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/${plural}`
          : `/apis/${GROUP}/${VERSION}/${plural}`;
    return name === undefined ? base : `${base}/${encodeURIComponent(name)}${sub ? `/${sub}` : ""}`;
  }

  /**
   * A JSON request with the kubeconfig's TLS and credentials: every call of this class, over
   * src/k8s/http.ts (client-node's typed path only for a cluster behind a proxy). Raw JSON also
   * keeps what the generated models drop (a CRD schema's `enum`, `default`, `x-kubernetes-*`).
   */
  async rawJson<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    contentType = "application/json",
    opts: CallOptions = {},
  ): Promise<T> {
    if (this.fast) return this.fast.json<T>(method, path, body, contentType, opts);
    return (await this.typed()).rawJson<T>(method, path, body, contentType, {
      ...opts,
      timeoutMs: opts.timeoutMs ?? this.timeoutMs,
    });
  }

  /**
   * `fromCache`: served from the API server's watch cache (resourceVersion=0), no etcd read, but
   * possibly behind the latest write: for a reader that checks what it read (a write with its
   * resourceVersion, or a second read when the cached object does not settle the question).
   */
  async get<T extends KubeObject>(
    plural: Plural,
    namespace: string,
    name: string,
    opts?: CallOptions & { fromCache?: boolean },
  ): Promise<T | undefined> {
    const path = this.objectPath(plural, namespace, name);
    try {
      return await this.rawJson<T>(
        "GET",
        opts?.fromCache ? `${path}?resourceVersion=0` : path,
        undefined,
        undefined,
        opts,
      );
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Lists every page. `namespace` undefined means all namespaces. */
  async list<T extends KubeObject>(
    plural: Plural,
    namespace?: string,
    opts: { labelSelector?: string; fieldSelector?: string; pageSize?: number } & CallOptions = {},
  ): Promise<ListResult<T>> {
    const items: T[] = [];
    let token: string | undefined;
    let resourceVersion = "";
    do {
      const query = new URLSearchParams({ limit: String(opts.pageSize ?? 500) });
      if (token) query.set("continue", token);
      if (opts.labelSelector) query.set("labelSelector", opts.labelSelector);
      if (opts.fieldSelector) query.set("fieldSelector", opts.fieldSelector);
      // Each page has its own deadline: a long list is many calls, not one.
      const res = await this.rawJson<{
        items: T[];
        metadata?: { resourceVersion?: string; continue?: string };
      }>("GET", `${this.objectPath(plural, namespace)}?${query.toString()}`, undefined, undefined, opts);
      items.push(...res.items);
      resourceVersion = res.metadata?.resourceVersion ?? resourceVersion;
      token = res.metadata?.continue || undefined;
    } while (token);
    return { items, resourceVersion };
  }

  async create<T extends KubeObject>(
    plural: Plural,
    namespace: string,
    body: KubeObject,
    opts?: CallOptions,
  ): Promise<T> {
    return this.rawJson<T>("POST", this.objectPath(plural, namespace), body, undefined, opts);
  }

  /** Replaces status (PUT /status). Fails with 409 when `obj.metadata.resourceVersion` is stale. */
  async replaceStatus<T extends KubeObject>(plural: Plural, obj: T, opts?: CallOptions): Promise<T> {
    const { name, namespace } = obj.metadata;
    if (!namespace) throw new Error(`replaceStatus: ${plural}/${name} has no namespace`);
    return this.rawJson<T>("PUT", this.objectPath(plural, namespace, name, "status"), obj, undefined, opts);
  }

  /** JSON patch of the status subresource (the operator's reset uses a `test` op). */
  async jsonPatchStatus<T extends KubeObject>(
    plural: Plural,
    namespace: string,
    name: string,
    ops: JsonPatchOp[],
    opts?: CallOptions,
  ): Promise<T> {
    return this.rawJson<T>(
      "PATCH",
      this.objectPath(plural, namespace, name, "status"),
      ops,
      JSON_PATCH,
      opts,
    );
  }

  /** Merge patch of the main resource (metadata such as finalizers; spec). */
  async mergePatch<T extends KubeObject>(
    plural: Plural,
    namespace: string,
    name: string,
    patch: object,
    opts?: CallOptions,
  ): Promise<T> {
    return this.rawJson<T>("PATCH", this.objectPath(plural, namespace, name), patch, MERGE_PATCH, opts);
  }

  async delete(plural: Plural, namespace: string, name: string, opts?: CallOptions): Promise<boolean> {
    try {
      await this.rawJson("DELETE", this.objectPath(plural, namespace, name), undefined, undefined, opts);
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  /**
   * Read, change, write the status, retrying on conflict with a fresh read: the read-modify-write
   * loop of client-go's RetryOnConflict. `change` returns undefined when there is nothing to write.
   * `read` is a copy the caller has just read: the first try starts from it instead of reading
   * again (its resourceVersion makes the write fail with a conflict if it is no longer current).
   */
  async updateStatusWithRetry<T extends KubeObject>(
    plural: Plural,
    namespace: string,
    name: string,
    change: (current: T) => T | undefined,
    attempts = 5,
    read?: T,
  ): Promise<{ object: T | undefined; written: boolean; conflicts: number }> {
    let conflicts = 0;
    for (let i = 0; ; i++) {
      const current = i === 0 && read ? read : await this.get<T>(plural, namespace, name);
      if (!current) return { object: undefined, written: false, conflicts };
      const next = change(current);
      if (!next) return { object: current, written: false, conflicts };
      try {
        return { object: await this.replaceStatus(plural, next), written: true, conflicts };
      } catch (err) {
        if (!isConflict(err) || i + 1 >= attempts) throw err;
        conflicts++;
        // Jittered backoff, so writers that collided do not collide again in lockstep.
        await new Promise((r) => setTimeout(r, Math.random() * Math.min(200, 10 * 2 ** i)));
      }
    }
  }
}
