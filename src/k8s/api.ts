// A small typed door to the project's custom resources, on @kubernetes/client-node's
// CustomObjectsApi. Status is written with PUT on the status subresource carrying the
// resourceVersion we read: the apiserver answers 409 when someone else wrote in between
// (optimistic concurrency), and the status becomes exactly what we computed (no merge surprises).
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from "@kubernetes/client-node";
import { request as httpsRequest, type RequestOptions } from "node:https";
import { GROUP, VERSION } from "../crds/common.js";
import { withConnectionReuse } from "./config.js";
import { isConflict, isNotFound } from "./errors.js";

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

export type Plural = "mediajobs" | "gpuendpoints" | "paymentevents" | "billingaccounts";

export interface JsonPatchOp {
  op: "add" | "remove" | "replace" | "test" | "copy" | "move";
  path: string;
  value?: unknown;
}

export class KubeApi {
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;

  constructor(readonly kubeConfig: KubeConfig) {
    withConnectionReuse(kubeConfig);
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
    this.core = kubeConfig.makeApiClient(CoreV1Api);
  }

  /**
   * A JSON request with the kubeconfig's TLS and credentials, bypassing the generated models. The
   * typed APIs serialize through models that drop fields they name differently (a CRD schema's
   * `enum`, `default`, `x-kubernetes-*`), so raw objects such as CRDs go through here.
   */
  async rawJson<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    contentType = "application/json",
  ): Promise<T> {
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error("no current cluster in kubeconfig");
    const url = new URL(path, cluster.server);
    const opts: RequestOptions = { method, headers: { Accept: "application/json" } };
    await this.kubeConfig.applyToHTTPSOptions(opts);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    // Always a Content-Length: Node sends a DELETE body unframed (no chunking by default), and on
    // a kept-alive connection those bytes would be read as the start of the next request.
    if (payload !== undefined) {
      opts.headers = {
        ...opts.headers,
        "Content-Type": contentType,
        "Content-Length": Buffer.byteLength(payload),
      };
    }
    return new Promise<T>((resolve, reject) => {
      const req = httpsRequest(url, opts, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          const code = res.statusCode ?? 0;
          if (code >= 200 && code < 300) resolve((text ? JSON.parse(text) : undefined) as T);
          else
            reject(Object.assign(new Error(`HTTP ${code} ${method} ${url.pathname}`), { code, body: text }));
        });
        res.on("error", reject);
      });
      req.setTimeout(30_000, () => req.destroy(new Error(`timeout: ${method} ${url.pathname}`)));
      req.on("error", reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  async get<T extends KubeObject>(plural: Plural, namespace: string, name: string): Promise<T | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural,
        namespace,
        name,
      })) as T;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Lists every page. `namespace` undefined means all namespaces. */
  async list<T extends KubeObject>(
    plural: Plural,
    namespace?: string,
    opts: { labelSelector?: string; pageSize?: number } = {},
  ): Promise<ListResult<T>> {
    const items: T[] = [];
    let _continue: string | undefined;
    let resourceVersion = "";
    do {
      const page = {
        group: GROUP,
        version: VERSION,
        plural,
        limit: opts.pageSize ?? 500,
        _continue,
        labelSelector: opts.labelSelector,
      };
      const res = (
        namespace === undefined
          ? await this.custom.listClusterCustomObject(page)
          : await this.custom.listNamespacedCustomObject({ ...page, namespace })
      ) as { items: T[]; metadata?: { resourceVersion?: string; continue?: string } };
      items.push(...res.items);
      resourceVersion = res.metadata?.resourceVersion ?? resourceVersion;
      _continue = res.metadata?.continue || undefined;
    } while (_continue);
    return { items, resourceVersion };
  }

  async create<T extends KubeObject>(plural: Plural, namespace: string, body: KubeObject): Promise<T> {
    return (await this.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      plural,
      namespace,
      body,
    })) as T;
  }

  /** Replaces status (PUT /status). Fails with 409 when `obj.metadata.resourceVersion` is stale. */
  async replaceStatus<T extends KubeObject>(plural: Plural, obj: T): Promise<T> {
    const { name, namespace } = obj.metadata;
    if (!namespace) throw new Error(`replaceStatus: ${plural}/${name} has no namespace`);
    return (await this.custom.replaceNamespacedCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      plural,
      namespace,
      name,
      body: obj,
    })) as T;
  }

  /** JSON patch of the status subresource (the operator's reset uses a `test` op). */
  async jsonPatchStatus<T extends KubeObject>(
    plural: Plural,
    namespace: string,
    name: string,
    ops: JsonPatchOp[],
  ): Promise<T> {
    return (await this.custom.patchNamespacedCustomObjectStatus(
      { group: GROUP, version: VERSION, plural, namespace, name, body: ops },
      setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
    )) as T;
  }

  /** Merge patch of the main resource (metadata such as finalizers; spec). */
  async mergePatch<T extends KubeObject>(
    plural: Plural,
    namespace: string,
    name: string,
    patch: object,
  ): Promise<T> {
    return (await this.custom.patchNamespacedCustomObject(
      { group: GROUP, version: VERSION, plural, namespace, name, body: patch },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    )) as T;
  }

  async delete(plural: Plural, namespace: string, name: string): Promise<boolean> {
    try {
      await this.custom.deleteNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural,
        namespace,
        name,
      });
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  /**
   * Read, change, write the status, retrying on conflict with a fresh read: the read-modify-write
   * loop of client-go's RetryOnConflict. `change` returns undefined when there is nothing to write.
   */
  async updateStatusWithRetry<T extends KubeObject>(
    plural: Plural,
    namespace: string,
    name: string,
    change: (current: T) => T | undefined,
    attempts = 5,
  ): Promise<{ object: T | undefined; written: boolean; conflicts: number }> {
    let conflicts = 0;
    for (let i = 0; ; i++) {
      const current = await this.get<T>(plural, namespace, name);
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
