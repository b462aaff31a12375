// JSON over HTTP/1.1 to the apiserver: the path every reconcile, status write and watch takes.
// @kubernetes/client-node 2.x sends each request through its own copy of undici's fetch (WHATWG
// streams, a Response object, its model serializer): measured with `make bench
// BENCH_ARGS="--throughput --profile"`, that path was most of the controller's CPU per job. Here a
// request is one node:https request on a pooled keep-alive connection (src/http/client.ts), and its
// body one JSON.parse.
//
// TLS material and credentials come from the configuration (./cluster-config.ts): the in-cluster
// service account's files, or client-node's KubeConfig (certificates, tokens, token files, exec
// and auth-provider plugins, impersonation). They are read again every few seconds, and at once
// after a 401, so rotated certificates and tokens are picked up; the pool is rebuilt (the old one
// closed once idle) when the TLS material changes. Clusters reached through a proxy keep
// client-node's own path (src/k8s/typed.ts).
import type { Agent } from "node:http";
import type { RequestOptions } from "node:https";
import {
  dump,
  keepAlivePools,
  poolFor,
  send,
  text as readText,
  type HttpAnswer,
  type HttpMethod,
} from "../http/client.js";
import { tlsMaterial, type ClusterConfig } from "./cluster-config.js";
import { KubeTimeoutError, type CallOptions } from "./deadline.js";

/** How long credentials and TLS material read from the kubeconfig are reused. */
const CREDENTIALS_TTL_MS = 10_000;

/** What a watch event carries: an object, or for an ERROR event a Status with its code. */
export type WatchObject = {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; [k: string]: unknown };
  code?: number;
  [k: string]: unknown;
};

/** An apiserver answer other than 2xx, in the shape errors.ts reads (client-node's ApiException). */
class KubeHttpError extends Error {
  constructor(
    readonly code: number,
    readonly body: string,
    method: string,
    path: string,
  ) {
    super(`HTTP ${code} ${method} ${path}`);
    this.name = "KubeHttpError";
  }
}

interface Credentials {
  at: number;
  headers: Record<string, string>;
  pool: Agent;
  material: string;
}

export class KubeHttp {
  private readonly origin: string;
  private readonly basePath: string;
  private credentials?: Promise<Credentials>;
  private current?: Credentials;

  constructor(
    private readonly kc: ClusterConfig,
    private readonly defaultTimeoutMs: number,
    private readonly credentialsTtlMs = CREDENTIALS_TTL_MS,
  ) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error("no current cluster in kubeconfig");
    const server = new URL(cluster.server);
    this.origin = server.origin;
    this.basePath = server.pathname.replace(/\/+$/, "");
  }

  /** Whether this path can serve the configuration's cluster (not through a proxy). */
  static serves(kc: ClusterConfig): boolean {
    const cluster = kc.getCurrentCluster();
    return !!cluster && !cluster.proxyUrl && /^https?:/.test(cluster.server);
  }

  /** Headers and a pool for the kubeconfig's credentials as they are now (cached briefly). */
  private async auth(): Promise<Credentials> {
    const cur = this.current;
    if (cur && Date.now() - cur.at < this.credentialsTtlMs) return cur;
    this.credentials ??= this.readCredentials().finally(() => (this.credentials = undefined));
    return this.credentials;
  }

  /**
   * After a 401: the credentials read again at once (a rotated token), unless they were read after
   * the request started. Whether they changed, so the request is worth one more try.
   */
  private async reauthenticate(used: Credentials): Promise<boolean> {
    if (this.current === used) this.current = { ...used, at: 0 };
    const now = await this.auth();
    return now.headers.Authorization !== used.headers.Authorization;
  }

  private async readCredentials(): Promise<Credentials> {
    const opts: RequestOptions = { headers: {} };
    await this.kc.applyToHTTPSOptions(opts);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.headers ?? {}))
      if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(", ") : String(v);
    const user = this.kc.getCurrentUser();
    if (user?.username)
      headers.Authorization = `Basic ${Buffer.from(`${user.username}:${user.password ?? ""}`).toString("base64")}`;
    const material = tlsMaterial(this.kc.getCurrentCluster(), opts);
    const prev = this.current;
    let pool: Agent;
    if (prev && prev.material === material) pool = prev.pool;
    else {
      const pools = keepAlivePools({
        ...(opts.ca !== undefined && { ca: opts.ca }),
        ...(opts.cert !== undefined && { cert: opts.cert }),
        ...(opts.key !== undefined && { key: opts.key }),
        ...(opts.pfx !== undefined && { pfx: opts.pfx }),
        ...(opts.passphrase !== undefined && { passphrase: opts.passphrase }),
        ...(opts.servername !== undefined && { servername: opts.servername }),
        ...(opts.rejectUnauthorized !== undefined && { rejectUnauthorized: opts.rejectUnauthorized }),
      });
      pool = poolFor(pools, this.origin);
      // Connections in use finish their requests; idle ones close now, the rest once they are done.
      if (prev) closeWhenIdle(prev.pool);
    }
    this.current = { at: Date.now(), headers, pool, material };
    return this.current;
  }

  private async send(
    method: HttpMethod,
    path: string,
    body: string | undefined,
    contentType: string | undefined,
    signal: AbortSignal,
  ): Promise<HttpAnswer> {
    const attempt = (credentials: Credentials) =>
      send(this.origin + this.basePath + path, {
        agent: credentials.pool,
        method,
        headers: {
          ...credentials.headers,
          accept: "application/json",
          "user-agent": "media-orchestrator",
          ...(contentType !== undefined && { "content-type": contentType }),
        },
        ...(body !== undefined && { body }),
        signal,
      });
    const credentials = await this.auth();
    const res = await attempt(credentials);
    // A 401 is decided before the request is handled, so trying again cannot apply it twice;
    // once, and only with credentials that changed (a token rotated since they were read).
    if (res.statusCode !== 401 || !(await this.reauthenticate(credentials))) return res;
    await dump(res.body);
    return attempt(await this.auth());
  }

  /** One JSON request with a deadline over the whole exchange; a non-2xx answer throws KubeHttpError. */
  async json<T>(
    method: string,
    path: string,
    body?: unknown,
    contentType = "application/json",
    opts: CallOptions = {},
  ): Promise<T> {
    const timeoutMs = opts.timeoutMs ?? this.defaultTimeoutMs;
    const verb = method.toUpperCase() as HttpMethod;
    const where = path.split("?")[0]!;
    // The deadline is a timer cleared when the call ends: AbortSignal.timeout() would leave one
    // timer per call to fire (and build a DOMException) long after its answer, measured at a few
    // per cent of the controller's CPU under load.
    const controller = new AbortController();
    const signal = controller.signal;
    let settle: (err: Error) => void = () => {};
    const cut = new Promise<never>((_, reject) => (settle = reject));
    const timer = setTimeout(() => {
      const err = new KubeTimeoutError(verb, where, timeoutMs);
      controller.abort(err);
      settle(err);
    }, timeoutMs);
    timer.unref();
    const callerAborted = () => {
      const reason = opts.signal?.reason as Error;
      controller.abort(reason);
      settle(reason);
    };
    if (opts.signal?.aborted) callerAborted();
    else opts.signal?.addEventListener("abort", callerAborted, { once: true });
    const exchange = async (): Promise<T> => {
      const res = await this.send(
        verb,
        path,
        body === undefined ? undefined : JSON.stringify(body),
        body === undefined ? undefined : contentType,
        signal,
      );
      const text = await readText(res.body);
      if (res.statusCode >= 200 && res.statusCode < 300) return (text ? JSON.parse(text) : undefined) as T;
      throw new KubeHttpError(res.statusCode, text, verb, where);
    };
    try {
      // A request that waits for a connection (the pool is busy, the apiserver does not accept)
      // has no deadline of its own: the deadline and the caller's signal end the call themselves.
      return await Promise.race([exchange(), cut]);
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", callerAborted);
    }
  }

  /**
   * A watch (GET with watch=true): `onEvent` for each event line, `done` once when the stream
   * ends or fails (with no error once `signal` aborted it). Resolves once the apiserver answered
   * 200; rejects when it answered otherwise or could not be reached.
   */
  async watch(
    path: string,
    query: Record<string, string | number | boolean>,
    onEvent: (type: string, object: WatchObject) => void,
    done: (err?: unknown) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const params = new URLSearchParams({ watch: "true" });
    for (const [k, v] of Object.entries(query)) if (v !== "") params.set(k, String(v));
    const res = await this.send("GET", `${path}?${params.toString()}`, undefined, undefined, signal);
    if (res.statusCode !== 200) {
      const text = await readText(res.body).catch(() => "");
      throw new KubeHttpError(res.statusCode, text, "GET", path);
    }
    let ended = false;
    const end = (err?: unknown) => {
      if (ended) return;
      ended = true;
      done(signal.aborted ? undefined : err);
    };
    let pending = "";
    // Decoded as a stream, so a character split across chunks survives.
    res.body.setEncoding("utf8");
    res.body.on("data", (chunk: string) => {
      // One event per line; a chunk may end inside one. Lines are cut by position, so a chunk
      // with many events costs one pass over it, not one copy of the rest per event.
      const text = pending === "" ? chunk : pending + chunk;
      let from = 0;
      for (let nl = text.indexOf("\n"); nl >= 0 && !ended; nl = text.indexOf("\n", from)) {
        const line = text.slice(from, nl);
        from = nl + 1;
        if (line.trim() === "") continue;
        let event: { type?: string; object?: unknown };
        try {
          event = JSON.parse(line) as { type?: string; object?: unknown };
        } catch (err) {
          end(err);
          res.body.destroy();
          return;
        }
        onEvent(event.type ?? "", event.object as WatchObject);
      }
      pending = text.slice(from);
    });
    res.body.on("end", () => end());
    res.body.on("error", (err) => end(err));
    res.body.on("close", () => end());
  }

  /** Closes the pool's connections, each once its request is done. */
  close(): Promise<void> {
    if (this.current) closeWhenIdle(this.current.pool);
    return Promise.resolve();
  }
}

/**
 * A pool being replaced: its idle connections close now, and each connection in use closes once
 * its request is done instead of going back to the pool, so requests in flight finish first.
 */
function closeWhenIdle(pool: Agent): void {
  // Node's Agent keeps a released connection only when keepSocketAlive returns true.
  (pool as unknown as { keepSocketAlive: (socket: unknown) => boolean }).keepSocketAlive = () => false;
  for (const sockets of Object.values(pool.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
}
