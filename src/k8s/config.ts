import { KubeConfig } from "@kubernetes/client-node";

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
