// The sidecar's own door to the Kubernetes API for the payment path: raw JSON over undici with one
// keep-alive pool, and a deadline on every call (a request that never answers would otherwise hold
// a delivery, and the provider's retry, forever). Errors carry `code` and `body` as
// @kubernetes/client-node's do, so ../k8s/errors.js classifies both the same way.
import type { RequestOptions } from "node:https";
import { Agent, request, type Dispatcher } from "undici";
import { GROUP, VERSION } from "../crds/common.js";
import type { KubeObject, Plural } from "../k8s/api.js";
import { tlsMaterial, type ClusterConfig } from "../k8s/cluster-config.js";

/** Deadline of one Kubernetes call on the delivery path. */
export const DEFAULT_KUBE_TIMEOUT_MS = 10_000;
/** Credentials are read again this often (rotated service-account tokens, exec plugins). */
const AUTH_REFRESH_MS = 30_000;

export class KubeCallTimeout extends Error {
  constructor(what: string, ms: number) {
    super(`no answer from the Kubernetes API in ${ms} ms: ${what}`);
    this.name = "KubeCallTimeout";
  }
}

export interface WatchEvent<T> {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: T;
}

export class KubeJson {
  readonly #kc: ClusterConfig;
  readonly #server: string;
  readonly timeoutMs: number;
  #dispatcher: Dispatcher | undefined;
  #auth: { headers: Record<string, string>; at: number } | undefined;
  #material: string | undefined;

  constructor(kc: ClusterConfig, opts: { timeoutMs?: number } = {}) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error("no current cluster in kubeconfig");
    this.#kc = kc;
    this.#server = cluster.server.replace(/\/+$/, "");
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_KUBE_TIMEOUT_MS;
  }

  async #connection(): Promise<{ dispatcher: Dispatcher; headers: Record<string, string> }> {
    const now = Date.now();
    if (!this.#dispatcher || !this.#auth || now - this.#auth.at > AUTH_REFRESH_MS) {
      const opts: RequestOptions = { headers: {} };
      await this.#kc.applyToHTTPSOptions(opts);
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(opts.headers ?? {}))
        if (typeof v === "string") headers[k.toLowerCase()] = v;
      if (opts.auth) headers.authorization = `Basic ${Buffer.from(opts.auth).toString("base64")}`;
      this.#auth = { headers, at: now };
      // A rotated CA or client certificate: a new pool (the old one closes once idle).
      const material = tlsMaterial(null, opts);
      if (material !== this.#material) {
        this.#dispatcher?.close().catch(() => {});
        this.#dispatcher = undefined;
        this.#material = material;
      }
      this.#dispatcher ??= new Agent({
        connections: 64,
        keepAliveTimeout: 30_000,
        connect: {
          timeout: this.timeoutMs,
          ...(opts.ca !== undefined && { ca: opts.ca as string }),
          ...(opts.cert !== undefined && { cert: opts.cert as string }),
          ...(opts.key !== undefined && { key: opts.key as string }),
          ...(opts.rejectUnauthorized !== undefined && { rejectUnauthorized: opts.rejectUnauthorized }),
        },
      });
    }
    return { dispatcher: this.#dispatcher, headers: this.#auth.headers };
  }

  /** The resource's path; without a namespace, the collection across all namespaces. */
  path(plural: Plural, namespace: string | undefined, name?: string, sub?: "status"): string {
    const base =
      namespace === undefined
        ? `/apis/${GROUP}/${VERSION}/${plural}`
        : `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/${plural}`;
    return name === undefined ? base : `${base}/${encodeURIComponent(name)}${sub ? `/${sub}` : ""}`;
  }

  /**
   * One JSON request with a deadline. Non-2xx answers throw { code, body } errors. The deadline is
   * a timer raced against the request, not only an abort signal: undici does not abort a connect
   * in progress (a TLS handshake that never completes waits for its own connect timeout).
   */
  async call<T>(method: string, path: string, body?: unknown, timeoutMs = this.timeoutMs): Promise<T> {
    const what = `${method} ${path.split("?")[0]}`;
    const abort = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        abort.abort();
        reject(new KubeCallTimeout(what, timeoutMs));
      }, timeoutMs);
    });
    const attempt = this.#send<T>(method, path, body, abort.signal);
    attempt.catch(() => undefined); // after the deadline its failure has no one to tell
    try {
      return await Promise.race([attempt, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #send<T>(method: string, path: string, body: unknown, signal: AbortSignal): Promise<T> {
    const { dispatcher, headers } = await this.#connection();
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const res = await request(`${this.#server}${path}`, {
      method: method as Dispatcher.HttpMethod,
      headers: {
        ...headers,
        accept: "application/json",
        ...(payload !== undefined && { "content-type": "application/json" }),
      },
      ...(payload !== undefined && { body: payload }),
      dispatcher,
      signal,
    });
    const text = await res.body.text();
    if (res.statusCode >= 200 && res.statusCode < 300) return (text ? JSON.parse(text) : undefined) as T;
    if (res.statusCode === 401) this.#auth = undefined; // a rotated token: read it again next call
    throw Object.assign(new Error(`HTTP ${res.statusCode} ${method} ${path.split("?")[0]}`), {
      code: res.statusCode,
      body: text,
    });
  }

  async get<T extends KubeObject>(plural: Plural, namespace: string, name: string): Promise<T | undefined> {
    try {
      return await this.call<T>("GET", this.path(plural, namespace, name));
    } catch (err) {
      if ((err as { code?: unknown }).code === 404) return undefined;
      throw err;
    }
  }

  create<T extends KubeObject>(plural: Plural, namespace: string, obj: KubeObject): Promise<T> {
    return this.call<T>("POST", this.path(plural, namespace), obj);
  }

  /** PUT /status with the object's resourceVersion: 409 when someone wrote in between. */
  replaceStatus<T extends KubeObject>(plural: Plural, obj: T): Promise<T> {
    const { name, namespace } = obj.metadata;
    if (!namespace) throw new Error(`replaceStatus: ${plural}/${name} has no namespace`);
    return this.call<T>("PUT", this.path(plural, namespace, name, "status"), obj);
  }

  /** One page of a list: `limit` items at most, and the token of the next page. */
  listPage<T extends KubeObject>(
    plural: Plural,
    namespace: string | undefined,
    opts: { limit: number; continueToken?: string },
  ): Promise<{ items: T[]; metadata: { resourceVersion?: string; continue?: string } }> {
    const q = new URLSearchParams({ limit: String(opts.limit) });
    if (opts.continueToken) q.set("continue", opts.continueToken);
    return this.call("GET", `${this.path(plural, namespace)}?${q.toString()}`);
  }

  /**
   * One watch from `resourceVersion`, until the server ends it (timeoutSeconds), the stream fails,
   * `signal` aborts it, or it stays silent for `silenceMs` (a dead TCP stream sends nothing and
   * never ends; bookmarks keep a healthy idle one talking). Resolves with how it ended.
   */
  async watch<T extends KubeObject>(
    plural: Plural,
    namespace: string,
    resourceVersion: string,
    onEvent: (e: WatchEvent<T>) => void,
    opts: { signal: AbortSignal; timeoutSeconds?: number; silenceMs?: number },
  ): Promise<"ended" | "expired"> {
    const { dispatcher, headers } = await this.#connection();
    const timeoutSeconds = opts.timeoutSeconds ?? 300;
    const q = new URLSearchParams({
      watch: "1",
      resourceVersion,
      allowWatchBookmarks: "true",
      timeoutSeconds: String(timeoutSeconds),
    });
    const silence = new AbortController();
    const signal = AbortSignal.any([opts.signal, silence.signal]);
    const silenceMs = opts.silenceMs ?? (timeoutSeconds + 30) * 1000;
    let timer = setTimeout(() => silence.abort(), silenceMs);
    const alive = () => {
      clearTimeout(timer);
      timer = setTimeout(() => silence.abort(), silenceMs);
    };
    try {
      const res = await request(`${this.#server}${this.path(plural, namespace)}?${q.toString()}`, {
        method: "GET",
        headers: { ...headers, accept: "application/json" },
        dispatcher,
        signal,
        bodyTimeout: 0,
      });
      if (res.statusCode === 410) {
        await res.body.dump();
        return "expired";
      }
      if (res.statusCode < 200 || res.statusCode >= 300) {
        const text = await res.body.text();
        throw Object.assign(new Error(`HTTP ${res.statusCode} watch ${plural}`), {
          code: res.statusCode,
          body: text,
        });
      }
      let buffered = "";
      for await (const chunk of res.body) {
        alive();
        buffered += (chunk as Buffer).toString("utf8");
        let nl: number;
        while ((nl = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (!line) continue;
          const e = JSON.parse(line) as WatchEvent<T>;
          // An ERROR event carrying 410 is the in-stream form of "resourceVersion too old".
          if (e.type === "ERROR") {
            if ((e.object as unknown as { code?: number }).code === 410) return "expired";
            throw Object.assign(new Error(`watch ${plural} error event`), { body: e.object });
          }
          onEvent(e);
        }
      }
      return "ended";
    } catch (err) {
      if (silence.signal.aborted || opts.signal.aborted) return "ended";
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await this.#dispatcher?.close();
  }
}
