// client-node's typed clients and HTTP path, for what the JSON path (./http.ts) does not serve: the
// CLI's and the tests' typed calls (CoreV1Api, CustomObjectsApi) and a cluster reached through a
// proxy. KubeApi imports this module on first use (KubeApi.typed()), so a container that never
// needs it never loads client-node.
import {
  CoreV1Api,
  createConfiguration,
  CustomObjectsApi,
  KubeConfig,
  RequestContext,
  ServerConfiguration,
  setHeaderMiddleware,
  wrapHttpLibrary,
  type HttpMethod,
} from "@kubernetes/client-node";
import type { ClusterConfig } from "./cluster-config.js";
import { withConnectionReuse } from "./config.js";
import { InClusterConfig } from "./in-cluster.js";
import type { WatchObject } from "./http.js";
import { deadlineSignal, DeadlineHttpLibrary, type CallOptions } from "./transport.js";
import { watchWithInactivityLimit } from "./watch.js";

/** client-node's KubeConfig for a configuration: itself, or the in-cluster one's files. */
function asKubeConfig(config: ClusterConfig): KubeConfig {
  // By shape, not instanceof: a bundle or a test runner may hold a second copy of the class.
  if (typeof (config as Partial<KubeConfig>).makeApiClient === "function") return config as KubeConfig;
  if (!(config instanceof InClusterConfig))
    throw new Error("client-node's typed clients need a KubeConfig or the in-cluster configuration");
  const kc = new KubeConfig();
  kc.loadFromClusterAndUser(
    { ...config.getCurrentCluster(), caFile: config.caFile, skipTLSVerify: false },
    { name: "inClusterUser", authProvider: { name: "tokenFile", config: { tokenFile: config.tokenFile } } },
  );
  return kc;
}

export class TypedClients {
  readonly kubeConfig: KubeConfig;
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;
  private readonly http: DeadlineHttpLibrary;

  constructor(config: ClusterConfig, timeoutMs: number) {
    this.kubeConfig = withConnectionReuse(asKubeConfig(config));
    this.http = new DeadlineHttpLibrary(timeoutMs);
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error("no current cluster in kubeconfig");
    // As KubeConfig.makeApiClient builds it, with the deadline-bound HTTP library in place of
    // the default one.
    const options = createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      authMethods: { default: this.kubeConfig },
      httpApi: wrapHttpLibrary(this.http),
      middleware: [setHeaderMiddleware("User-Agent", "media-orchestrator")],
    });
    this.custom = new CustomObjectsApi(options);
    this.core = new CoreV1Api(options);
  }

  /** One JSON request through client-node's fetch (a proxied cluster's path). */
  async rawJson<T>(
    method: string,
    path: string,
    body: unknown,
    contentType: string,
    opts: CallOptions & { timeoutMs: number },
  ): Promise<T> {
    const signal = deadlineSignal(opts.timeoutMs, opts.signal);
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error("no current cluster in kubeconfig");
    const url = new URL(path, cluster.server);
    const request = new RequestContext(url.toString(), method.toUpperCase() as HttpMethod);
    await this.kubeConfig.applySecurityAuthentication(request);
    request.setHeaderParam("Accept", "application/json");
    if (body !== undefined) {
      request.setHeaderParam("Content-Type", contentType);
      request.setBody(JSON.stringify(body));
    }
    request.setSignal(signal);
    const res = await this.http.send(request);
    const text = await res.body.text();
    const code = res.httpStatusCode;
    if (code >= 200 && code < 300) return (text ? JSON.parse(text) : undefined) as T;
    throw Object.assign(new Error(`HTTP ${code} ${method} ${url.pathname}`), { code, body: text });
  }

  /** client-node's Watch with the caller's inactivity window (a proxied cluster's path). */
  async watch(
    path: string,
    query: Record<string, string | number | boolean>,
    onEvent: (type: string, object: WatchObject) => void,
    done: (err?: unknown) => void,
    signal: AbortSignal,
    inactivityMs: number,
  ): Promise<void> {
    const controller = await watchWithInactivityLimit(this.kubeConfig, inactivityMs).watch(
      path,
      query,
      onEvent,
      (err: unknown) => done(signal.aborted ? undefined : err),
    );
    if (signal.aborted) controller.abort();
    else signal.addEventListener("abort", () => controller.abort(), { once: true });
  }
}
