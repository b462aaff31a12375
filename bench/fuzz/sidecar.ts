// The sidecar as the image runs it, for the fuzz and the attacks: the compiled dist/src/main.js
// with the image's Node flags and malloc settings (Dockerfile, bench/lib.ts), else (no build) the
// sources through tsx with the same flags. Its memory limit is the chart's (values.yaml), and so
// is its heap bound: the NODE_OPTIONS the rendered chart gives the webhooks container.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import { freePort } from "../../scripts/devstack-lib.js";
import { REPO_ROOT } from "../../test/support/controlplane.js";
import { helm } from "../../test/support/helm.js";
import { RUNTIME_ENV, RUNTIME_FLAGS, rssMiB, waitHttp } from "../lib.js";

export interface Sidecar {
  child: ChildProcess;
  base: string;
  /** "dist" (compiled, as in the image) or "tsx" (the sources). */
  how: "dist" | "tsx";
}

const DIST_MAIN = join(REPO_ROOT, "dist/src/main.js");

/** Starts `media-orchestrator webhooks` with `env` on a free loopback port; resolves once ready. */
export async function startSidecar(name: string, env: Record<string, string>): Promise<Sidecar> {
  const port = await freePort();
  const logs = join(REPO_ROOT, ".local/logs/bench");
  mkdirSync(logs, { recursive: true });
  const out = openSync(join(logs, `${name}.log`), "w");
  const how = existsSync(DIST_MAIN) ? "dist" : "tsx";
  const args =
    how === "dist"
      ? [...RUNTIME_FLAGS, DIST_MAIN, "webhooks"]
      : ["--import", "tsx", ...RUNTIME_FLAGS, "src/main.ts", "webhooks"];
  const child = spawn(process.execPath, args, {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      ...RUNTIME_ENV,
      WEBHOOKS_HOST: "127.0.0.1",
      WEBHOOKS_PORT: String(port),
      LEADER_ELECTION: "false",
      LOG_LEVEL: "warn",
      ...chartNodeOptions(),
      ...env,
    },
    stdio: ["ignore", out, out],
  });
  const base = `http://127.0.0.1:${port}`;
  await waitHttp(`${base}/readyz`);
  return { child, base, how };
}

/** The chart's memory limit of the sidecar container (resources.webhooks.limits.memory), in MiB. */
export function chartMemoryLimitMiB(): number {
  const values = parse(readFileSync(join(REPO_ROOT, "deploy/helm/values.yaml"), "utf8")) as {
    resources?: { webhooks?: { limits?: { memory?: string } } };
  };
  const text = values.resources?.webhooks?.limits?.memory ?? "";
  const m = /^(\d+(?:\.\d+)?)(Mi|Gi|M|G)$/.exec(text);
  if (!m) throw new Error(`values.yaml: resources.webhooks.limits.memory is not a size: ${text}`);
  const n = Number(m[1]);
  return { Mi: n, Gi: n * 1024, M: (n * 1e6) / 2 ** 20, G: (n * 1e9) / 2 ** 20 }[m[2] as "Mi"];
}

/** Samples a process's RSS every 50 ms until stopped; the peak in MiB. */
export function rssPeak(pid: number): { stop: () => number; now: () => number } {
  let peak = 0;
  const sample = () => {
    try {
      peak = Math.max(peak, rssMiB(pid));
    } catch {
      /* the process is gone */
    }
  };
  sample();
  const timer = setInterval(sample, 50);
  return {
    now: () => peak,
    stop: () => {
      clearInterval(timer);
      sample();
      return peak;
    },
  };
}

let rendered: Record<string, string> | undefined;

/** NODE_OPTIONS of the webhooks container in the chart rendered with its defaults ({} if none). */
function chartNodeOptions(): Record<string, string> {
  if (rendered) return rendered;
  const res = helm(["template", "fuzz", "deploy/helm"]);
  if (res.status !== 0) throw new Error(`helm template failed: ${res.stderr}`);
  type Container = { name: string; env?: Array<{ name: string; value?: string }> };
  const containers = parseAllDocuments(res.stdout)
    .map((d) => d.toJS() as { kind?: string; spec?: { template?: { spec?: { containers?: Container[] } } } })
    .filter((o) => o?.kind === "Deployment")
    .flatMap((o) => o.spec?.template?.spec?.containers ?? []);
  const value = containers
    .find((c) => c.name === "webhooks")
    ?.env?.find((e) => e.name === "NODE_OPTIONS")?.value;
  rendered = value ? { NODE_OPTIONS: value } : {};
  return rendered;
}
