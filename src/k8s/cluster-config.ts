// Where the containers find their cluster, and what their clients need of it. Inside a cluster the
// service account's files are read directly (./in-cluster.ts); @kubernetes/client-node, whose
// import costs a fresh Node process about 85 MiB of resident memory (its generated API models come
// with its KubeConfig), is imported only when a kubeconfig file is used: a developer's machine,
// the CLI, the tests (docs/benchmarks.md, "Import costs").
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import type { AgentOptions, RequestOptions } from "node:https";
import { homedir } from "node:os";
import { join } from "node:path";
import { inClusterConfig } from "./in-cluster.js";

/**
 * What the product's Kubernetes clients read of a configuration: the apiserver's URL and, for each
 * request, the TLS material and credentials as they are now. @kubernetes/client-node's KubeConfig
 * has this shape; so has InClusterConfig, without that library.
 */
export interface ClusterConfig {
  getCurrentCluster(): { readonly name: string; readonly server: string; readonly proxyUrl?: string } | null;
  getCurrentUser(): { readonly name: string; readonly username?: string; readonly password?: string } | null;
  /** Puts the CA, client certificate and Authorization header into `opts` (read afresh each call). */
  applyToHTTPSOptions(opts: RequestOptions): Promise<void>;
}

/** The TLS settings a pool's connections are built from. */
export type TlsOptions = Pick<
  AgentOptions,
  "ca" | "cert" | "key" | "pfx" | "passphrase" | "servername" | "rejectUnauthorized"
>;

/** A digest of what a dispatcher's connections are built from (never the secrets themselves). */
export function tlsMaterial(cluster: { proxyUrl?: string } | null, o: TlsOptions): string {
  const hash = createHash("sha256");
  for (const v of [
    cluster?.proxyUrl,
    o.ca,
    o.cert,
    o.key,
    o.pfx,
    o.passphrase,
    o.servername,
    o.rejectUnauthorized,
  ]) {
    hash.update(v === undefined ? "-" : typeof v === "string" || Buffer.isBuffer(v) ? v : JSON.stringify(v));
    hash.update("\0");
  }
  return hash.digest("hex");
}

/**
 * The configuration in client-node's order (KubeConfig.loadFromDefault): an explicit path, else
 * $KUBECONFIG, else ~/.kube/config, else in-cluster (the service account's token file exists),
 * else client-node's default. Only the in-cluster case goes without client-node.
 */
export async function loadClusterConfig(
  opts: { path?: string; env?: NodeJS.ProcessEnv; serviceAccountDir?: string } = {},
): Promise<ClusterConfig> {
  const env = opts.env ?? process.env;
  const home = env.HOME || homedir();
  const kubeconfigFile = opts.path || env.KUBECONFIG || (home && existsSync(join(home, ".kube", "config")));
  if (!kubeconfigFile) {
    const inCluster = inClusterConfig(env, opts.serviceAccountDir);
    if (inCluster) return inCluster;
  }
  const { loadKubeConfig } = await import("./config.js");
  return loadKubeConfig({ path: opts.path });
}
