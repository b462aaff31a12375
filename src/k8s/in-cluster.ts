// The configuration of a pod's own service account, as client-go's rest.InClusterConfig reads it
// (https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/): the apiserver at
// KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT, the CA and the token from the files the kubelet
// projects into the pod. Both files are rotated in place: the kubelet refreshes the token well
// before it expires, and a CA rotation rewrites ca.crt. So they are read again at each call of
// applyToHTTPSOptions; the clients cache the result for seconds (src/k8s/http.ts: 10 s,
// src/webhooks/kubejson.ts: 30 s, both under client-go's one minute), read again at once after a
// 401, and rebuild their connection pool when the CA they read changes.
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import type { RequestOptions } from "node:https";
import { isIPv6 } from "node:net";
import { join } from "node:path";
import type { ClusterConfig } from "./cluster-config.js";

/** Where the kubelet mounts the service account's token, CA and namespace. */
const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

export class InClusterConfig implements ClusterConfig {
  readonly tokenFile: string;
  readonly caFile: string;
  readonly #cluster: { name: string; server: string };

  constructor(server: string, dir = SERVICE_ACCOUNT_DIR) {
    this.#cluster = { name: "inCluster", server };
    this.tokenFile = join(dir, "token");
    this.caFile = join(dir, "ca.crt");
  }

  getCurrentCluster(): { name: string; server: string } {
    return this.#cluster;
  }

  getCurrentUser(): { name: string } {
    return { name: "inClusterUser" };
  }

  async applyToHTTPSOptions(opts: RequestOptions): Promise<void> {
    const [token, ca] = await Promise.all([readFile(this.tokenFile, "utf8"), readFile(this.caFile)]);
    opts.ca = ca;
    // client-go trims the file's content too: a trailing newline is not part of the token.
    opts.headers = { ...opts.headers, Authorization: `Bearer ${token.trim()}` };
  }
}

/**
 * The in-cluster configuration, or undefined outside a cluster (no service host, or no token
 * file: a pod with automountServiceAccountToken false is not configured in-cluster either).
 */
export function inClusterConfig(
  env: NodeJS.ProcessEnv = process.env,
  dir = SERVICE_ACCOUNT_DIR,
): InClusterConfig | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port || !existsSync(join(dir, "token"))) return undefined;
  // As client-node's loadFromCluster: plain HTTP on the ports an apiserver serves it on.
  const scheme = ["80", "8080", "8001"].includes(port) ? "http" : "https";
  return new InClusterConfig(`${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`, dir);
}
