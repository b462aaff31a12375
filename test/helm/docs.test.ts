// The install commands of README.md and docs/helm.md, run as written against a fresh control
// plane each (like a new cluster): every shell block marked "run as written by
// test/helm/docs.test.ts" goes to bash with the real helm and kubectl, the provider keys in the
// environment as a user would have them. Then every release is deployed and every Deployment can
// start: each Secret key it needs exists (the GPU key, the callback key).
//
// Lines starting with `docker` or `kind` are skipped (no container engine here); the rest of
// those blocks runs against the control plane in place of the kind cluster. The chart's hook Job
// is run by hook-pods.ts (the control plane has no kubelet).
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AppsV1Api, CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, startControlPlane, type RunningControlPlane } from "../support/controlplane.js";
import { helmBinary, helmEnv } from "../support/helm.js";
import { runHookPods, type HookPodRunner } from "./hook-pods.js";

const MARKER =
  /<!-- run as written by test\/helm\/docs\.test\.ts(, except the docker and kind lines)? -->\n```sh\n([\s\S]*?)```/g;

function blocks(doc: string): Array<{ name: string; script: string }> {
  const text = readFileSync(join(REPO_ROOT, doc), "utf8");
  return [...text.matchAll(MARKER)].map((m, i) => ({
    name: `${doc} block ${i + 1}`,
    script: m[2]!
      .split(/(?<!\\)\n/)
      .filter((cmd) => !/^(docker|kind)\s/.test(cmd))
      .join("\n"),
  }));
}

const DOCUMENTED = [...blocks("README.md"), ...blocks("docs/helm.md")];

let binDir: string;
let cp: RunningControlPlane | undefined;
let hooks: HookPodRunner | undefined;

beforeAll(() => {
  // `helm` on the PATH is the one the tests build; kubectl is the machine's.
  binDir = mkdtempSync(join(tmpdir(), "mo-docs-bin-"));
  symlinkSync(helmBinary(), join(binDir, "helm"));
}, 15 * 60_000);

afterEach(async () => {
  await hooks?.stop();
  await cp?.stop();
  hooks = cp = undefined;
});

function bash(script: string, kubeconfig: string): Promise<{ status: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-euo", "pipefail", "-c", script], {
      cwd: REPO_ROOT,
      env: {
        ...helmEnv(kubeconfig),
        PATH: `${binDir}:${process.env.PATH}`,
        GPU_PROVIDER_API_KEY: "gpu-key-from-the-docs",
        PAYMENT_PROVIDER_API_KEY: "sk_test_docs",
        PAYMENT_PROVIDER_WEBHOOK_SECRET: "whsec_docs",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ status: code ?? -1, output }));
  });
}

describe("documented install commands", () => {
  it("finds the blocks to run", () => {
    expect(DOCUMENTED.map((b) => b.name)).toEqual([
      "README.md block 1",
      "README.md block 2",
      "docs/helm.md block 1",
      "docs/helm.md block 2",
    ]);
  });

  it.each(DOCUMENTED)(
    "$name works as written on a new cluster",
    async ({ script }) => {
      const dir = mkdtempSync(join(tmpdir(), "mo-docs-controlplane-"));
      mkdirSync(dir, { recursive: true });
      cp = await startControlPlane({ dataDir: dir });
      const kc = new KubeConfig();
      kc.loadFromFile(cp.kubeconfig);
      hooks = runHookPods(cp, kc);

      const res = await bash(script, cp.kubeconfig);
      expect(res.status, res.output).toBe(0);

      // Every release deployed.
      const list = await bash("helm list -A -o json", cp.kubeconfig);
      const releases = JSON.parse(list.output) as Array<{ name: string; namespace: string; status: string }>;
      expect(releases.length).toBeGreaterThan(1);
      for (const r of releases) expect(r.status, r.name).toBe("deployed");

      // Every Deployment finds every Secret key it cannot start without.
      const core = kc.makeApiClient(CoreV1Api);
      const deployments = await kc.makeApiClient(AppsV1Api).listDeploymentForAllNamespaces();
      expect(deployments.items.length).toBe(releases.length - 1); // all but the CRD release
      for (const d of deployments.items) {
        const ns = d.metadata!.namespace!;
        const env = d.spec!.template.spec!.containers[0]!.env ?? [];
        for (const key of ["GPU_PROVIDER_API_KEY", "CALLBACK_SECRET"]) {
          const ref = env.find((e) => e.name === key)!.valueFrom!.secretKeyRef!;
          const secret = await core.readNamespacedSecret({ namespace: ns, name: ref.name! });
          expect(secret.data?.[ref.key], `${ns}: ${key} in Secret ${ref.name}`).toBeTruthy();
        }
      }
    },
    300_000,
  );
});
