// The promtool binary the rule tests run: built from Prometheus's own Go module (`go install
// github.com/prometheus/prometheus/cmd/promtool@<version>`, nothing downloaded but Go modules), as
// test/support/helm.ts builds helm, and cached in .local/bin. The tag remove_all_sd leaves out the
// service-discovery plugins, which promtool's rule commands never use (and one of whose modules the
// Go module proxy does not serve).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { REPO_ROOT } from "./controlplane.js";

/** Prometheus 3.16's module version (Prometheus tags its Go module v0.<minor><patch>). */
export const PROMTOOL_MODULE_VERSION = "v0.316.0";
const PROMETHEUS_VERSION = "3.16.0";

export function promtoolBinaryPath(): string {
  return join(REPO_ROOT, ".local/bin", `promtool-${PROMTOOL_MODULE_VERSION}`);
}

const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Builds promtool once (minutes on a cold Go cache) and returns its path; test files share a lock. */
export function promtoolBinary(log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): string {
  const bin = promtoolBinaryPath();
  if (existsSync(bin)) return bin;
  mkdirSync(dirname(bin), { recursive: true });
  const lock = `${bin}.lock`;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      break;
    } catch {
      if (existsSync(bin)) return bin;
      let holder = 0;
      try {
        holder = Number(readFileSync(join(lock, "pid"), "utf8"));
      } catch {
        /* the holder is between mkdir and writing its pid */
      }
      if (holder && !alive(holder)) rmSync(lock, { recursive: true, force: true });
      else sleep(1_000);
    }
  }
  try {
    if (existsSync(bin)) return bin;
    return build(bin, log);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function build(bin: string, log: (line: string) => void): string {
  const gobin = `${bin}.build-${process.pid}`;
  mkdirSync(gobin, { recursive: true });
  log(
    `building promtool ${PROMETHEUS_VERSION} from its Go module into ${bin} (first time only; takes minutes)`,
  );
  const started = Date.now();
  const ldflags = ["-s -w", `-X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION}`].join(
    " ",
  );
  try {
    const res = spawnSync(
      "go",
      [
        "install",
        "-v",
        "-trimpath",
        "-tags",
        "remove_all_sd",
        "-ldflags",
        ldflags,
        `github.com/prometheus/prometheus/cmd/promtool@${PROMTOOL_MODULE_VERSION}`,
      ],
      {
        cwd: REPO_ROOT,
        env: { ...process.env, GOTOOLCHAIN: "local", GOBIN: gobin, GOFLAGS: "" },
        stdio: ["ignore", "inherit", "inherit"],
      },
    );
    if (res.status !== 0) throw new Error(`building promtool failed (go install exit ${res.status})`);
    renameSync(join(gobin, "promtool"), bin);
  } finally {
    rmSync(gobin, { recursive: true, force: true });
  }
  log(`promtool built in ${Math.round((Date.now() - started) / 1000)} s`);
  return bin;
}

export interface PromtoolResult {
  status: number;
  stdout: string;
  stderr: string;
}

/** Runs promtool in `cwd` (rule files and their tests are named relative to it). */
export function promtool(args: string[], cwd: string): PromtoolResult {
  const res = spawnSync(promtoolBinary(), args, { cwd, encoding: "utf8", timeout: 120_000 });
  if (res.error) throw res.error;
  return { status: res.status ?? -1, stdout: res.stdout, stderr: res.stderr };
}
