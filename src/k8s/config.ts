import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { KubeConfig } from "@kubernetes/client-node";

type AgentFactory = (
  cluster: { name?: string; server?: string; proxyUrl?: string } | null,
  options: object,
) => HttpAgent;
const patched = new WeakSet<KubeConfig>();

/**
 * @kubernetes/client-node 1.4 builds a new https.Agent for every request
 * (KubeConfig.applySecurityAuthentication -> createAgent), so every API call pays a new TCP and
 * TLS handshake: on two cores that capped a bare client at ~40 writes/s. Reuse one keep-alive
 * agent per cluster and credentials instead. Proxied clusters keep the library's own agents.
 */
export function withConnectionReuse(kc: KubeConfig): KubeConfig {
  if (patched.has(kc)) return kc;
  patched.add(kc);
  const target = kc as unknown as { createAgent: AgentFactory };
  const original = target.createAgent.bind(kc);
  const agents = new Map<string, HttpAgent>();
  target.createAgent = (cluster, options) => {
    if (!cluster || cluster.proxyUrl) return original(cluster, options);
    const key = `${cluster.name}|${kc.getCurrentContext()}`;
    let agent = agents.get(key);
    if (!agent) {
      const opts = { ...options, keepAlive: true, maxSockets: 64, maxFreeSockets: 16 };
      agent = cluster.server?.startsWith("http:") ? new HttpAgent(opts) : new HttpsAgent(opts);
      agents.set(key, agent);
    }
    return agent;
  };
  return kc;
}

/**
 * The kubeconfig, as kubectl finds it: an explicit path, else $KUBECONFIG, else in-cluster, else
 * ~/.kube/config. An optional context overrides the current one.
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
