// Builds and runs the real local control plane (test/controlplane: kube-apiserver + embedded
// etcd, from the Kubernetes Go modules). Used by the vitest global setup, `make cluster-up`,
// `make dev-up` and the demo. The binary is cached under .local/bin keyed on a hash of the Go
// module (go.mod, go.sum, main.go), so only the first build compiles.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const MODULE_DIR = join(REPO_ROOT, "test/controlplane");
export const KUBE_VERSION = "v1.33.13";

export function controlPlaneBinary(): string {
  const hash = createHash("sha256");
  for (const f of ["go.mod", "go.sum", "main.go"]) hash.update(readFileSync(join(MODULE_DIR, f)));
  return join(REPO_ROOT, ".local/bin", `controlplane-${hash.digest("hex").slice(0, 16)}`);
}

/** Builds the binary unless the cached one matches the module. Progress goes to stderr. */
export function buildControlPlane(
  log: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
): string {
  const bin = controlPlaneBinary();
  if (existsSync(bin)) return bin;
  mkdirSync(dirname(bin), { recursive: true });
  log(`building the local control plane (kube-apiserver ${KUBE_VERSION} + etcd) into ${bin}`);
  log(
    "the first build downloads the Kubernetes modules and compiles for several minutes; later builds are cached",
  );
  const started = Date.now();
  const ldflags = [
    "-s -w",
    `-X k8s.io/component-base/version.gitVersion=${KUBE_VERSION}`,
    "-X k8s.io/component-base/version.gitMajor=1",
    `-X k8s.io/component-base/version.gitMinor=${KUBE_VERSION.split(".")[1]}`,
  ].join(" ");
  const tmp = `${bin}.tmp`;
  // -v prints each package as it compiles: progress, not silence.
  const res = spawnSync("go", ["build", "-v", "-trimpath", "-ldflags", ldflags, "-o", tmp, "."], {
    cwd: MODULE_DIR,
    env: { ...process.env, GOTOOLCHAIN: "local", GOFLAGS: "-mod=mod" },
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (res.status !== 0) throw new Error(`building the control plane failed: ${goFailure(res)}`);
  renameSync(tmp, bin);
  log(`control plane built in ${Math.round((Date.now() - started) / 1000)} s`);
  return bin;
}

/**
 * Why a `go` command run with spawnSync failed, in its own words: not found on PATH (no exit code
 * then), killed by a signal, or its exit code after the error it printed above.
 */
export function goFailure(res: {
  status: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}): string {
  const code = (res.error as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ENOENT")
    return 'go is not on PATH (Go >= 1.24 is needed; README.md, "Prerequisites", says how to get it)';
  if (res.error) return `go could not be run: ${res.error.message}`;
  if (res.signal) return `go was killed by ${res.signal}`;
  return `go exited with code ${res.status}; its error is printed above`;
}

export interface RunningControlPlane {
  url: string;
  kubeconfig: string;
  dataDir: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts a control plane with its data in `dataDir` and resolves once /readyz answers and the
 * kubeconfig is written. `detached` lets it outlive this process (make cluster-up, dev-up).
 */
export async function startControlPlane(opts: {
  dataDir: string;
  logFile?: string;
  detached?: boolean;
  port?: number;
  timeoutMs?: number;
}): Promise<RunningControlPlane> {
  const bin = buildControlPlane();
  rmSync(opts.dataDir, { recursive: true, force: true });
  mkdirSync(opts.dataDir, { recursive: true });
  const logFile = opts.logFile ?? join(opts.dataDir, "controlplane.log");
  mkdirSync(dirname(logFile), { recursive: true });
  const out = openSync(logFile, "a");
  const args = ["--dir", opts.dataDir, ...(opts.port ? ["--port", String(opts.port)] : [])];
  // All output goes to the log file (a pipe would tie a detached process to this one); the
  // kubeconfig appears only once /readyz answered, so its existence is the readiness signal.
  const child = spawn(bin, args, { stdio: ["ignore", out, out], detached: opts.detached ?? false });
  const kubeconfig = join(opts.dataDir, "kubeconfig");
  let exited: number | null | undefined;
  child.once("exit", (code) => (exited = code));
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  while (!existsSync(kubeconfig)) {
    if (exited !== undefined)
      throw new Error(`control plane exited with code ${exited} before it was ready; see ${logFile}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`control plane not ready in time; see ${logFile}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const url = /server: (\S+)/.exec(readFileSync(kubeconfig, "utf8"))![1]!;
  if (opts.detached) child.unref();
  return {
    url,
    kubeconfig,
    dataDir: opts.dataDir,
    process: child,
    stop: () => stopProcess(child.pid!, opts.dataDir),
  };
}

/** Whether a process with this id exists (signal 0 checks without sending anything). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM, then SIGKILL after a grace period; then the data is removed. */
export async function stopProcess(pid: number, dataDir?: string, graceMs = 10_000): Promise<void> {
  const alive = () => processAlive(pid);
  if (alive()) {
    process.kill(pid, "SIGTERM");
    const deadline = Date.now() + graceMs;
    while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    if (alive()) process.kill(pid, "SIGKILL");
    while (alive()) await new Promise((r) => setTimeout(r, 50));
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
}
