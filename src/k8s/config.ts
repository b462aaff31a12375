// client-node's KubeConfig: kubeconfig files (contexts, exec plugins, OIDC), for the CLI, the
// tests and a container started with a kubeconfig. Importing this module loads client-node; the
// containers reach it only through loadClusterConfig (./cluster-config.ts), and only when a
// kubeconfig file is used.
import type { AgentOptions } from "node:https";
import { KubeConfig, type Cluster } from "@kubernetes/client-node";
import { tlsMaterial } from "./cluster-config.js";

type Dispatcher = { close(): Promise<void> };
type DispatcherFactory = (cluster: Cluster | null, options: AgentOptions) => Dispatcher | undefined;
type AgentClass = new (options: { connect?: object; allowH2: boolean }) => Dispatcher;

/**
 * undici's Agent as client-node's fetch knows it: client-node has its own undici (a major apart
 * from ours), and a dispatcher must come from the copy of the fetch that uses it. Taken from an
 * Agent the library builds itself, which also holds when the CLI is bundled into one file.
 */
function clientNodeAgentClass(): AgentClass {
  const factory = new KubeConfig() as unknown as { createDispatcher: DispatcherFactory };
  const sample = factory.createDispatcher(null, { rejectUnauthorized: false });
  if (!sample) throw new Error("@kubernetes/client-node built no undici Agent: revisit withConnectionReuse");
  void sample.close();
  return sample.constructor as AgentClass;
}

const patched = new WeakSet<KubeConfig>();

/**
 * How our requests reach the apiserver; two measured problems of @kubernetes/client-node 2.0
 * (test/k8s/transport.test.ts):
 *  - it builds a new undici Agent for every request that carries TLS settings (any kubeconfig
 *    with a CA, a client certificate or insecure-skip-tls-verify), so every call and every
 *    watch paid a new TCP and TLS handshake: 200 calls, 200 connections. One dispatcher, and so
 *    one pool, per cluster and user instead; rebuilt (the old one closed once idle) when the TLS
 *    material changes, so certificates rotated on disk are still picked up.
 *  - its undici speaks HTTP/2 to the apiserver when offered, and has no PING timeout: a
 *    connection that goes silent (a black-holed path) keeps every later call and watch hanging
 *    on it; a call's deadline resets only its own stream. Over HTTP/1.1 a request that hits its
 *    deadline takes its connection down with it, so a dead connection is never used again.
 * Proxied clusters (HTTP or SOCKS proxy) keep the library's dispatchers, pooled the same way.
 */
export function withConnectionReuse(kc: KubeConfig): KubeConfig {
  if (patched.has(kc)) return kc;
  patched.add(kc);
  const target = kc as unknown as { createDispatcher?: DispatcherFactory };
  if (typeof target.createDispatcher !== "function")
    throw new Error(
      "@kubernetes/client-node has no KubeConfig.createDispatcher: revisit withConnectionReuse",
    );
  const original = target.createDispatcher.bind(kc);
  const Agent = clientNodeAgentClass();
  const build: DispatcherFactory = (cluster, options) => {
    const spec = kc.createDispatcherOptions(cluster, options);
    if (spec.type === "agent") return new Agent({ connect: spec.connect, allowH2: false });
    if (spec.type === "none") return new Agent({ allowH2: false });
    return original(cluster, options);
  };
  const pools = new Map<string, { material: string; dispatcher: Dispatcher | undefined }>();
  target.createDispatcher = (cluster, options) => {
    const slot = JSON.stringify([cluster?.name, cluster?.server, kc.getCurrentUser()?.name]);
    const material = tlsMaterial(cluster, options);
    const cached = pools.get(slot);
    if (cached?.material === material) return cached.dispatcher;
    const dispatcher = build(cluster, options);
    // close() lets requests in flight finish first.
    cached?.dispatcher?.close().catch(() => {});
    pools.set(slot, { material, dispatcher });
    return dispatcher;
  };
  return kc;
}

/**
 * The kubeconfig, as client-node's loadFromDefault finds it: an explicit path, else $KUBECONFIG,
 * else ~/.kube/config, else in-cluster. An optional context overrides the current one.
 */
export function loadKubeConfig(opts: { path?: string; context?: string } = {}): KubeConfig {
  const kc = new KubeConfig();
  const path = opts.path ?? process.env.KUBECONFIG;
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  if (opts.context) kc.setCurrentContext(opts.context);
  if (!kc.getCurrentCluster())
    throw new Error("no Kubernetes cluster configured (set KUBECONFIG or --kubeconfig)");
  return kc;
}

/** The same cluster and credentials, impersonating a ServiceAccount (used to test the chart's RBAC). */
export function impersonating(kc: KubeConfig, user: string): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromString(kc.exportConfig());
  const current = copy.getCurrentUser();
  if (!current) throw new Error("kubeconfig has no current user");
  (current as { impersonateUser?: string }).impersonateUser = user;
  return copy;
}
