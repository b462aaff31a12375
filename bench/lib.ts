// Small measuring tools for the benchmarks: percentiles, process RSS/CPU from /proc, processes
// of the product started the way `make run` starts them.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request, type RequestOptions } from "node:https";
import { join } from "node:path";
import { Watch, type KubeConfig } from "@kubernetes/client-node";
import { KubeApi } from "../src/k8s/api.js";
import { REPO_ROOT } from "../test/support/controlplane.js";

export function percentile(values: number[], p: number): number {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export const round = (n: number, digits = 1): number => Math.round(n * 10 ** digits) / 10 ** digits;

/** Resident memory in MiB, from /proc. */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** User+system CPU seconds consumed so far, from /proc. */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100 Hz)
}

/**
 * The Node flags the image runs the product with (Dockerfile, ENTRYPOINT): a young generation of
 * at most 2 x 16 MiB, `gc` exposed for the controller's collection once a burst of work is over
 * (src/runtime/idle-compaction.ts). TurboFan stays V8's top tier: without it the controller's
 * CPU per job nearly doubled (docs/benchmarks.md, "Runtime flags measured").
 */
export const RUNTIME_FLAGS = ["--max-semi-space-size=16", "--expose-gc"];

/**
 * The environment the image sets for the runtime (Dockerfile, ENV): one malloc arena, without which
 * the threads' own arenas kept 4 to 30 MiB of freed memory resident, differently at each start;
 * fixed mmap and trim thresholds, without which glibc raised both after the first large free and
 * kept another 5 to 15 MiB resident, again differently at each start; at 32 KiB, where at 128 KiB
 * the freed blocks between the two stayed resident in the main arena (3 to 5 MiB of the
 * controller's idle RSS).
 */
export const RUNTIME_ENV: Record<string, string> = {
  MALLOC_ARENA_MAX: "1",
  MALLOC_MMAP_THRESHOLD_: "32768",
  MALLOC_TRIM_THRESHOLD_: "32768",
};

export function startProcess(
  name: string,
  mode: "controller" | "webhooks",
  env: Record<string, string>,
  nodeArgs: string[] = [],
): ChildProcess {
  const logs = join(REPO_ROOT, ".local/logs/bench");
  mkdirSync(logs, { recursive: true });
  const out = openSync(join(logs, `${name}.log`), "w");
  return spawn(process.execPath, ["--import", "tsx", ...RUNTIME_FLAGS, ...nodeArgs, "src/main.ts", mode], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...RUNTIME_ENV, ...env },
    stdio: ["ignore", out, out],
  });
}

/** Node arguments that let retainedMemory() measure a process started with them. */
export function gcProbeArgs(): { nodeArgs: string[]; env: Record<string, string>; file: string } {
  const file = join(REPO_ROOT, ".local/logs/bench", `gc-probe-${process.pid}-${Date.now()}.json`);
  return {
    nodeArgs: ["--expose-gc", "--import", "./bench/gc-probe.ts"],
    env: { BENCH_GC_PROBE_FILE: file },
    file,
  };
}

/** Heap and RSS in MiB after a full garbage collection in the child (see bench/gc-probe.ts). */
export async function retainedMemory(
  child: ChildProcess,
  file: string,
): Promise<{
  heapUsedMiB: number;
  rssMiB: number;
  /** V8's committed heap: used plus the free space it keeps (what RSS holds beyond the used heap). */
  heapTotalMiB: number;
  /** Memory outside the V8 heap that V8 knows of (Buffers, ArrayBuffers). */
  externalMiB: number;
}> {
  rmSync(file, { force: true });
  child.kill("SIGUSR2");
  const deadline = Date.now() + 30_000;
  while (!existsSync(file)) {
    if (Date.now() > deadline) throw new Error("the process did not answer the memory probe");
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 100)); // the write is small, but let it finish
  const m = JSON.parse(readFileSync(file, "utf8")) as NodeJS.MemoryUsage;
  return {
    heapUsedMiB: m.heapUsed / 2 ** 20,
    rssMiB: m.rss / 2 ** 20,
    heapTotalMiB: m.heapTotal / 2 ** 20,
    externalMiB: m.external / 2 ** 20,
  };
}

export async function waitHttp(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url, { signal: AbortSignal.timeout(2000) })).ok) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} not ready in ${timeoutMs} ms`);
}

export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill("SIGTERM");
  await Promise.race([new Promise((r) => child.once("exit", r)), new Promise((r) => setTimeout(r, 10_000))]);
  if (child.exitCode === null) child.kill("SIGKILL");
}

/** Runs `fn` over `items` with at most `concurrency` in flight. */
export async function pool<T>(
  items: T[],
  concurrency: number,
  fn: (item: T, i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        await fn(items[i]!, i);
      }
    }),
  );
}

/**
 * Reads one counter or gauge (summed over labels) from a Prometheus text page; with `label`
 * (e.g. `controller="mediajob"`), only the series that carry it.
 */
export function metricValue(page: string, name: string, label?: string): number {
  let sum = 0;
  for (const line of page.split("\n")) {
    if (
      (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) &&
      (label === undefined || line.slice(0, line.lastIndexOf(" ")).includes(label))
    )
      sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}

/**
 * Counts every change the apiserver reports on these collection paths from now on (ADDED,
 * MODIFIED, DELETED: each one a write), by watching them from their current resourceVersion.
 */
export async function watchWrites(
  kc: KubeConfig,
  paths: string[],
): Promise<{ writes: () => Map<string, number>; stop: () => void }> {
  const counts = new Map<string, number>();
  const api = new KubeApi(kc);
  const controllers = await Promise.all(
    paths.map(async (path) => {
      const rv = (
        (await api.rawJson("GET", `${path}?limit=1`)) as { metadata?: { resourceVersion?: string } }
      ).metadata?.resourceVersion;
      return new Watch(kc).watch(
        path,
        { resourceVersion: rv },
        (type: string, obj: { kind?: string }) => {
          if (type === "BOOKMARK") return;
          const key = `${type} ${obj.kind ?? path}`;
          counts.set(key, (counts.get(key) ?? 0) + 1);
        },
        () => {},
      );
    }),
  );
  return { writes: () => new Map(counts), stop: () => controllers.forEach((c) => c.abort()) };
}

/** The apiserver's own /metrics page (Prometheus text), read with the kubeconfig's credentials. */
export async function apiserverMetrics(kc: KubeConfig): Promise<string> {
  const opts: RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const url = new URL(`${kc.getCurrentCluster()!.server.replace(/\/+$/, "")}/metrics`);
  return new Promise((resolve, reject) => {
    const req = request(url, { ...opts, method: "GET" }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => resolve(text));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

/**
 * The control plane's Go CPU profile over the next `seconds` (its /debug/pprof/profile), written to
 * `file` for `go tool pprof`: where the apiserver's and etcd's CPU went while a run was under way.
 */
export async function controlPlaneProfile(kc: KubeConfig, seconds: number, file: string): Promise<void> {
  const opts: RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const url = new URL(
    `${kc.getCurrentCluster()!.server.replace(/\/+$/, "")}/debug/pprof/profile?seconds=${seconds}`,
  );
  const body = await new Promise<Buffer>((resolve, reject) => {
    const req = request(url, { ...opts, method: "GET" }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve(Buffer.concat(chunks)));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
  writeFileSync(file, body);
}

/**
 * Requests the apiserver served, by verb and resource (`PUT mediajobs/status`), from its
 * apiserver_request_total counter, and the ones of them it refused with 409 (`409 Conflict`);
 * watches are counted as the events they sent (apiserver_watch_events_total, `WATCH-EVENT <kind>`).
 */
export function apiserverRequestCounts(page: string): Map<string, number> {
  const counts = new Map<string, number>();
  const add = (key: string, v: number) => counts.set(key, (counts.get(key) ?? 0) + v);
  for (const line of page.split("\n")) {
    if (line.startsWith("apiserver_request_total{")) {
      const label = (name: string) => new RegExp(`[{,]${name}="([^"]*)"`).exec(line)?.[1] ?? "";
      const verb = label("verb");
      if (verb === "WATCH") continue;
      const sub = label("subresource");
      const n = Number(line.slice(line.lastIndexOf(" ") + 1));
      add(`${verb} ${label("resource")}${sub ? `/${sub}` : ""}`, n);
      if (label("code") === "409") add("409 Conflict", n);
    } else if (line.startsWith("apiserver_watch_events_total{")) {
      const kind = /kind="([^"]*)"/.exec(line)?.[1] ?? "";
      add(`WATCH-EVENT ${kind}`, Number(line.slice(line.lastIndexOf(" ") + 1)));
    }
  }
  return counts;
}

/**
 * The Kubernetes writes between two readings of apiserverRequestCounts: creates, updates, patches
 * and deletes of every resource (Events included), less the ones the apiserver refused with 409
 * (a conflict changes nothing; the write made after it is counted).
 */
export function writesBetween(before: Map<string, number>, after: Map<string, number>): number {
  let writes = 0;
  for (const [key, v] of after)
    if (/^(POST|PUT|PATCH|DELETE) /.test(key) || key === "409 Conflict")
      writes += (key === "409 Conflict" ? -1 : 1) * (v - (before.get(key) ?? 0));
  return writes;
}

/** Per job, the requests served between two readings of apiserverRequestCounts (rare ones left out). */
export function requestsPerJob(
  before: Map<string, number>,
  after: Map<string, number>,
  jobs: number,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, v] of [...after].sort(([a], [b]) => a.localeCompare(b))) {
    const perJob = round((v - (before.get(key) ?? 0)) / jobs, 2);
    if (perJob >= 0.01) out[key] = perJob;
  }
  return out;
}
