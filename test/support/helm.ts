// The helm binary the chart tests run: built from helm's own Go module (`go install
// helm.sh/helm/v3/cmd/helm@<version>`, nothing downloaded but Go modules), cached in .local/bin.
// The ldflags make `helm version` print the full version and make the offline commands
// (`helm template`, `helm lint`) assume the Kubernetes minor of our control plane; against a live
// apiserver helm asks the server instead.
import { spawn, spawnSync, type SpawnSyncReturns } from "node:child_process";
import { goInstalledBinary } from "./go-install.js";
import { readlinkSync, rmSync, symlinkSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { parseAllDocuments } from "yaml";
import { KUBE_VERSION, REPO_ROOT } from "./controlplane.js";

export const HELM_VERSION = "v3.18.6";
export const CHART_DIR = join(REPO_ROOT, "deploy/helm");

const K8S_MAJOR = KUBE_VERSION.replace(/^v/, "").split(".")[0]!;
const K8S_MINOR = KUBE_VERSION.split(".")[1]!;

export function helmBinaryPath(): string {
  return join(REPO_ROOT, ".local/bin", `helm-${HELM_VERSION}`);
}

/**
 * Builds helm once (minutes on a cold Go cache) and returns its path; later calls reuse it. Test
 * files running side by side take a lock, so only one of them compiles while the others wait.
 */
export function helmBinary(log?: (line: string) => void): string {
  const bin = goInstalledBinary(
    {
      name: "helm",
      version: HELM_VERSION,
      bin: helmBinaryPath(),
      pkg: `helm.sh/helm/v3/cmd/helm@${HELM_VERSION}`,
      ldflags: [
        "-s -w",
        `-X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}`,
        `-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=${K8S_MAJOR}`,
        `-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${K8S_MINOR}`,
        `-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=${K8S_MAJOR}`,
        `-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${K8S_MINOR}`,
      ],
    },
    log,
  );
  linkAsHelm(bin);
  return bin;
}

/**
 * `.local/bin/helm`, the name the docs' commands use: a link to the built version, so that
 * `.local/env` (which puts `.local/bin` on PATH) gives a shell `helm`.
 */
function linkAsHelm(bin: string): void {
  const link = join(dirname(bin), "helm");
  try {
    if (readlinkSync(link) === basename(bin)) return;
    rmSync(link, { force: true });
  } catch {
    /* no link yet */
  }
  try {
    symlinkSync(basename(bin), link);
  } catch (err) {
    // Another test file linked it meanwhile.
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
}

export interface HelmResult {
  status: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs helm with the given arguments. `kubeconfig` points it at a cluster; HELM_* state
 * directories are kept inside .local so tests never touch the user's helm configuration.
 */
export function helm(args: string[], opts: { kubeconfig?: string; timeoutMs?: number } = {}): HelmResult {
  const res: SpawnSyncReturns<string> = spawnSync(helmBinary(), args, {
    cwd: REPO_ROOT,
    encoding: "utf8",
    timeout: opts.timeoutMs ?? 120_000,
    env: helmEnv(opts.kubeconfig),
    maxBuffer: 64 * 1024 * 1024,
  });
  if (res.error) throw res.error;
  return { status: res.status ?? -1, stdout: res.stdout, stderr: res.stderr };
}

/**
 * `helm` without blocking the event loop, for commands that wait on something this process does
 * meanwhile (hook Jobs and test Pods run by test/helm/hook-pods.ts).
 */
export function helmAsync(
  args: string[],
  opts: { kubeconfig?: string; timeoutMs?: number } = {},
): Promise<HelmResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(helmBinary(), args, {
      cwd: REPO_ROOT,
      env: helmEnv(opts.kubeconfig),
      timeout: opts.timeoutMs ?? 120_000,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ status: code ?? -1, stdout, stderr }));
  });
}

/** The environment helm runs with: its state inside .local, the given cluster or none. */
export function helmEnv(kubeconfig?: string): NodeJS.ProcessEnv {
  const home = join(REPO_ROOT, ".local/helm");
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    HELM_CACHE_HOME: join(home, "cache"),
    HELM_CONFIG_HOME: join(home, "config"),
    HELM_DATA_HOME: join(home, "data"),
    KUBECONFIG: kubeconfig ?? "/nonexistent",
  };
}

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [k: string]: unknown;
}

/** `helm template` of the chart, parsed; throws with helm's message when rendering fails. */
export function helmTemplate(release: string, namespace: string, args: string[] = []): Manifest[] {
  const res = helm(["template", release, CHART_DIR, "--namespace", namespace, ...args]);
  if (res.status !== 0) throw new Error(`helm template failed (${res.status}): ${res.stderr}`);
  return parseAllDocuments(res.stdout)
    .map((d) => d.toJS() as Manifest | null)
    .filter((m): m is Manifest => m !== null);
}

/** The path of a values file of the chart (values.yaml, values-dev.yaml, ...). */
export const valuesFile = (name: string): string => join(CHART_DIR, name);

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

const G = "media-orchestrator.io";

/**
 * The RBAC the chart must grant in the watched namespace, no more, no less: what src/controller
 * and src/webhooks call (docs/helm.md explains each line). Both test files compare against it.
 */
export const EXPECTED_RULES: PolicyRule[] = [
  { apiGroups: [G], resources: ["mediajobs"], verbs: ["get", "list", "watch", "create", "patch"] },
  { apiGroups: [G], resources: ["mediajobs/status"], verbs: ["update"] },
  { apiGroups: [G], resources: ["gpuendpoints"], verbs: ["list", "watch"] },
  { apiGroups: [G], resources: ["gpuendpoints/status"], verbs: ["update"] },
  { apiGroups: [G], resources: ["billingaccounts"], verbs: ["get", "list", "watch", "create"] },
  { apiGroups: [G], resources: ["billingaccounts/status"], verbs: ["update"] },
  { apiGroups: [G], resources: ["paymentevents"], verbs: ["get", "list", "watch", "create", "delete"] },
  { apiGroups: [G], resources: ["paymentevents/status"], verbs: ["update"] },
  { apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
];

/** The Lease of a watched namespace (or of the whole cluster): shared by every release watching it. */
export const leaseName = (watched: string | undefined): string =>
  watched ? `media-orchestrator-ns-${watched}` : "media-orchestrator-cluster";

/** The leader-election Role, in the Lease's namespace: its one Lease. */
export const expectedLeaseRules = (leaseName: string): PolicyRule[] => [
  { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create"] },
  {
    apiGroups: ["coordination.k8s.io"],
    resources: ["leases"],
    resourceNames: [leaseName],
    verbs: ["get", "update"],
  },
];
