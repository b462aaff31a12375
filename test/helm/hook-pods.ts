// The local control plane has no kubelet and no Job controller, so nothing runs the pods of the
// chart's hooks and `helm install` (which waits for its hook Jobs) and `helm test` (which waits
// for its test Pod) would wait forever. This plays those two parts for the chart's own hook pods
// only: it runs the container's command (`node -e <script>`, as the image would) on this machine
// with the environment of the pod spec, with a real token of the pod's ServiceAccount (TokenRequest)
// and the API server's CA where the kubelet mounts them, and then writes the outcome into the
// Job's or the Pod's status, as the Job controller and the kubelet would. The scripts therefore
// run with exactly the RBAC the chart gives them.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  BatchV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Container,
  type V1PodSpec,
} from "@kubernetes/client-node";
import { KubeApi } from "../../src/k8s/api.js";
import type { RunningControlPlane } from "../support/controlplane.js";

export interface HookRun {
  kind: "Job" | "Pod";
  namespace: string;
  name: string;
  exitCode: number;
  output: string;
}

export interface HookPodRunner {
  runs: HookRun[];
  stop(): Promise<void>;
}

/**
 * Runs every callback-secret-init Job and every `helm test` Pod of the chart that appears, until
 * stopped. `env` may replace variables of the pod (the test pod's Service URLs, which resolve only
 * inside a cluster).
 */
export function runHookPods(
  cp: RunningControlPlane,
  kc: KubeConfig,
  opts: { env?: (namespace: string, vars: Record<string, string>) => Record<string, string> } = {},
): HookPodRunner {
  const api = new KubeApi(kc);
  const batch = kc.makeApiClient(BatchV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const seen = new Set<string>();
  const runs: HookRun[] = [];
  let stopped = false;

  async function execute(namespace: string, pod: V1PodSpec): Promise<{ exitCode: number; output: string }> {
    const c: V1Container = pod.containers[0]!;
    const vars: Record<string, string> = {};
    for (const e of c.env ?? []) if (e.value !== undefined) vars[e.name] = e.value;
    const saDir = mkdtempSync(join(tmpdir(), "mo-hook-sa-"));
    if (pod.automountServiceAccountToken !== false) {
      const token = await core.createNamespacedServiceAccountToken({
        namespace,
        name: pod.serviceAccountName ?? "default",
        body: { spec: { audiences: [], expirationSeconds: 600 } },
      });
      writeFileSync(join(saDir, "token"), token.status?.token ?? "");
      // The API server's self-signed certificate (with its CA) is what the pod would trust.
      writeFileSync(join(saDir, "ca.crt"), readFileSync(join(cp.dataDir, "pki/apiserver.crt")));
    }
    const url = new URL(cp.url);
    const env = {
      PATH: process.env.PATH,
      ...(opts.env ? opts.env(namespace, vars) : vars),
      KUBERNETES_SERVICE_HOST: url.hostname,
      KUBERNETES_SERVICE_PORT: url.port,
      SERVICE_ACCOUNT_DIR: saDir,
    };
    const [cmd, ...args] = [...(c.command ?? []), ...(c.args ?? [])];
    return new Promise((resolve, reject) => {
      const child = spawn(cmd!, args, { env, stdio: ["ignore", "pipe", "pipe"] });
      let output = "";
      child.stdout.on("data", (d: Buffer) => (output += d.toString()));
      child.stderr.on("data", (d: Buffer) => (output += d.toString()));
      child.on("error", reject);
      child.on("close", (code) => resolve({ exitCode: code ?? -1, output }));
    });
  }

  async function pass(): Promise<void> {
    const jobs = await batch.listJobForAllNamespaces({
      labelSelector: "app.kubernetes.io/component=callback-secret-init",
    });
    for (const job of jobs.items) {
      const { namespace, name, uid } = job.metadata!;
      if (seen.has(uid!) || job.status?.conditions?.length) continue;
      seen.add(uid!);
      const result = await execute(namespace!, job.spec!.template.spec!);
      runs.push({ kind: "Job", namespace: namespace!, name: name!, ...result });
      const now = new Date().toISOString();
      const ok = result.exitCode === 0;
      const cond = (type: string) => ({ type, status: "True", lastTransitionTime: now, lastProbeTime: now });
      await api.rawJson(
        "PATCH",
        `/apis/batch/v1/namespaces/${namespace}/jobs/${name}/status`,
        {
          status: ok
            ? {
                startTime: now,
                completionTime: now,
                succeeded: 1,
                conditions: [cond("SuccessCriteriaMet"), cond("Complete")],
              }
            : {
                startTime: now,
                failed: 1,
                conditions: [
                  { ...cond("FailureTarget"), reason: "BackoffLimitExceeded" },
                  { ...cond("Failed"), reason: "BackoffLimitExceeded" },
                ],
              },
        },
        "application/merge-patch+json",
      );
    }
    const pods = await core.listPodForAllNamespaces({ labelSelector: "app.kubernetes.io/component=test" });
    for (const pod of pods.items) {
      const { namespace, name, uid } = pod.metadata!;
      if (seen.has(uid!) || pod.metadata?.annotations?.["helm.sh/hook"] !== "test") continue;
      if (pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed") continue;
      seen.add(uid!);
      const result = await execute(namespace!, pod.spec!);
      runs.push({ kind: "Pod", namespace: namespace!, name: name!, ...result });
      await api.rawJson(
        "PATCH",
        `/api/v1/namespaces/${namespace}/pods/${name}/status`,
        { status: { phase: result.exitCode === 0 ? "Succeeded" : "Failed" } },
        "application/merge-patch+json",
      );
    }
  }

  const loop = (async () => {
    while (!stopped) {
      await pass().catch(() => undefined); // the next pass retries (e.g. a namespace just created)
      await new Promise((r) => setTimeout(r, 200));
    }
  })();

  return {
    runs,
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}
