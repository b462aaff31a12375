// The promtool binary the rule tests run: built from Prometheus's own Go module (`go install
// github.com/prometheus/prometheus/cmd/promtool@<version>`, nothing downloaded but Go modules), as
// test/support/helm.ts builds helm, and cached in .local/bin. The tag remove_all_sd leaves out the
// service-discovery plugins, which promtool's rule commands never use (and one of whose modules the
// Go module proxy does not serve).
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { REPO_ROOT } from "./controlplane.js";
import { goInstalledBinary } from "./go-install.js";

/** Prometheus 3.16's module version (Prometheus tags its Go module v0.<minor><patch>). */
export const PROMTOOL_MODULE_VERSION = "v0.316.0";
const PROMETHEUS_VERSION = "3.16.0";

export function promtoolBinaryPath(): string {
  return join(REPO_ROOT, ".local/bin", `promtool-${PROMTOOL_MODULE_VERSION}`);
}

/** Builds promtool once (minutes on a cold Go cache) and returns its path; test files share a lock. */
export function promtoolBinary(log?: (line: string) => void): string {
  return goInstalledBinary(
    {
      name: "promtool",
      version: PROMETHEUS_VERSION,
      bin: promtoolBinaryPath(),
      pkg: `github.com/prometheus/prometheus/cmd/promtool@${PROMTOOL_MODULE_VERSION}`,
      ldflags: ["-s -w", `-X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION}`],
      tags: "remove_all_sd",
    },
    log,
  );
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
