// The install commands of docs/helm.md and docs/observability.md (and README.md's, if any), run as written
// against a fresh control plane each (like a new cluster): every shell block marked "run as
// written by test/helm/docs.test.ts" goes to bash with the real helm and kubectl, the provider
// keys and the image's digest in the environment as a user would have them. Then every release
// is deployed and every Deployment can start: each Secret key its containers mount exists (the
// GPU key, the callback key).
//
// Lines starting with `docker` or `kind` are skipped (no container engine here); the rest of
// those blocks runs against the control plane in place of the kind cluster. The chart's hook Job
// is run by hook-pods.ts (the control plane has no kubelet), and the `kubernetes` EndpointSlice
// (which a cluster's API server writes for itself) is written here.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AppsV1Api, CoreV1Api, DiscoveryV1Api, KubeConfig } from "@kubernetes/client-node";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, startControlPlane, type RunningControlPlane } from "../support/controlplane.js";
import { helmBinary, helmEnv } from "../support/helm.js";
import { runHookPods, type HookPodRunner } from "./hook-pods.js";

const MARKER =
  /<!-- run as written by test\/helm\/docs\.test\.ts(, except the docker and kind lines)?(, after ([\w./-]+ block \d+))? -->\n```sh\n([\s\S]*?)```/g;

interface Block {
  name: string;
  script: string;
  /** The block this one continues ("after docs/helm.md block 1"): run first, on the same cluster. */
  after?: string;
}

function blocks(doc: string): Block[] {
  const text = readFileSync(join(REPO_ROOT, doc), "utf8");
  return [...text.matchAll(MARKER)].map((m, i) => ({
    name: `${doc} block ${i + 1}`,
    script: m[4]!
      .split(/(?<!\\)\n/)
      .filter((cmd) => !/^(docker|kind)\s/.test(cmd))
      .join("\n"),
    ...(m[3] && { after: m[3] }),
  }));
}

const ALL = [...blocks("README.md"), ...blocks("docs/helm.md"), ...blocks("docs/observability.md")];
const DOCUMENTED = ALL.map((b) => {
  if (!b.after) return b;
  const first = ALL.find((x) => x.name === b.after);
  if (!first) throw new Error(`${b.name}: no ${b.after} to run first`);
  return { ...b, script: `${first.script}\n${b.script}` };
});

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
        // What `docker push` printed for the release's image (prod runs it by digest).
        IMAGE_DIGEST: `sha256:${"d0".repeat(32)}`,
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
      "docs/helm.md block 1",
      "docs/helm.md block 2",
      "docs/helm.md block 3",
      "docs/observability.md block 1",
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
      // What a cluster's API server writes for itself (this one runs without its endpoint
      // reconciler): the EndpointSlice of the `kubernetes` Service, which the docs read the API
      // server's address from for the NetworkPolicy.
      await kc.makeApiClient(DiscoveryV1Api).createNamespacedEndpointSlice({
        namespace: "default",
        body: {
          metadata: { name: "kubernetes", labels: { "kubernetes.io/service-name": "kubernetes" } },
          addressType: "IPv4",
          // A kind cluster's control-plane node (an endpoint may not be a loopback address).
          endpoints: [{ addresses: ["172.18.0.2"] }],
          ports: [{ name: "https", port: 6443, protocol: "TCP" }],
        },
      });

      const res = await bash(script, cp.kubeconfig);
      expect(res.status, res.output).toBe(0);

      // Every release deployed.
      const list = await bash("helm list -A -o json", cp.kubeconfig);
      const releases = JSON.parse(list.output) as Array<{ name: string; namespace: string; status: string }>;
      expect(releases.length).toBeGreaterThan(1);
      for (const r of releases) expect(r.status, r.name).toBe("deployed");

      // Every Deployment finds every Secret key it cannot start without, in the files of each
      // of its containers (a projected volume under SECRETS_DIR).
      const core = kc.makeApiClient(CoreV1Api);
      const deployments = await kc.makeApiClient(AppsV1Api).listDeploymentForAllNamespaces();
      const namespaces = new Set(deployments.items.map((d) => d.metadata!.namespace));
      expect(namespaces.size).toBe(releases.length - 1); // all but the CRD release
      for (const d of deployments.items) {
        const ns = d.metadata!.namespace!;
        const pod = d.spec!.template.spec!;
        for (const c of pod.containers) {
          const dir = c.env?.find((e) => e.name === "SECRETS_DIR")?.value;
          const mount = c.volumeMounts?.find((m) => m.mountPath === dir);
          const volume = pod.volumes?.find((v) => v.name === mount?.name);
          const files = new Map<string, string>();
          for (const src of volume?.projected?.sources ?? []) {
            const secret = await core
              .readNamespacedSecret({ namespace: ns, name: src.secret!.name! })
              .catch(() => undefined);
            for (const item of src.secret!.items ?? [])
              if (secret?.data?.[item.key]) files.set(item.path, `${src.secret!.name}/${item.key}`);
          }
          for (const key of ["GPU_PROVIDER_API_KEY", "CALLBACK_SECRET"])
            expect(files.has(key), `${ns}: ${c.name} has the file ${key}`).toBe(true);
        }
      }
    },
    300_000,
  );
});
