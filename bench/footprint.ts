// The containers' footprint, measured on what the image runs: dist/ compiled by tsc, started with
// the image's command (node --max-semi-space-size=16 --expose-gc
// dist/src/main.js controller|webhooks) and environment (NODE_ENV, the malloc settings), inside a
// mount namespace in which the service account's token and CA sit where the kubelet puts them
// (/var/run/secrets/kubernetes.io/serviceaccount) and KUBERNETES_SERVICE_HOST/PORT name the
// apiserver: the in-cluster path, as in a pod. Reported per container: RSS idle after start (the
// controller with 1,000 and with 10,000 jobs cached), and the peak (the kernel's high-water mark,
// VmHWM) under the intake benchmark's load, under a fuzz-shaped load and, for the controller,
// under a burst of 1,000 jobs run end to end; beside them the chart's requests and limits.
// Fails, and says why, when anything cannot be measured.
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { Pool } from "undici";
import { parse as parseYaml } from "yaml";
import { API_VERSION, type MediaJob } from "../src/crds/index.js";
import { callbackUrl } from "../src/callback/token.js";
import type { KubeApi, KubeObject } from "../src/k8s/api.js";
import { withPhaseConditions } from "../src/mediajob/conditions.js";
import { startSimulator } from "../tools/simulator/server.js";
import { signStripePayload } from "../src/webhooks/signature.js";
import { freePort } from "../scripts/devstack-lib.js";
import { REPO_ROOT } from "../test/support/controlplane.js";
import { servingCa } from "../test/support/serving-ca.js";
import { finishedJobStatus } from "./jobs.js";
import {
  cpuSeconds,
  metricValue,
  percentile,
  pool,
  round,
  RUNTIME_ENV,
  RUNTIME_FLAGS,
  rssMiB,
  stopChild,
  waitHttp,
} from "./lib.js";

/** What the benchmark needs of bench/run.ts: its control plane and helpers. */
export interface FootprintContext {
  server: string;
  api: KubeApi;
  namespace(name: string): Promise<string>;
  concurrency: number;
  log(line: string): void;
}

/** The image's command, after `node` (Dockerfile, ENTRYPOINT). */
export const IMAGE_ARGS = [...RUNTIME_FLAGS, "dist/src/main.js"];

/** The packages the containers load, whose import cost is measured one by one. */
export const PACKAGES = [
  "fastify",
  "zod",
  "pino",
  "undici",
  "prom-client",
  "yaml",
  "@kubernetes/client-node",
  "@smithy/signature-v4",
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The kernel's high-water mark of the process's resident memory, in MiB. */
function peakRssMiB(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`footprint: no VmHWM for process ${pid}`);
  return Number(m[1]) / 1024;
}

/**
 * Of the resident memory, what is anonymous (the V8 heap, malloc, stacks) and what is file-backed
 * (mostly the pages of the node binary the process has touched: V8, OpenSSL, ICU; shared with
 * every process that runs the same binary, and given back by the kernel under pressure).
 */
function rssBreakdown(pid: number): { anonymousMiB: number; fileMiB: number } {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN);
  return {
    anonymousMiB: round(kb("Anonymous") / 1024),
    fileMiB: round((kb("Rss") - kb("Anonymous")) / 1024),
  };
}

/** "128Mi", "1Gi", "500M" as MiB. */
function mebibytes(quantity: string | number | undefined): number | undefined {
  if (quantity === undefined) return undefined;
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?$/.exec(String(quantity));
  if (!m) throw new Error(`footprint: cannot read the memory quantity ${quantity}`);
  const n = Number(m[1]);
  const factor = { Ki: 1 / 1024, Mi: 1, Gi: 1024, K: 1e3 / 2 ** 20, M: 1e6 / 2 ** 20, G: 1e9 / 2 ** 20 };
  return round(n * (m[2] ? factor[m[2] as keyof typeof factor] : 1 / 2 ** 20));
}

/** The chart's default memory requests and limits (deploy/helm/values.yaml). */
function chartResources(): Record<"controller" | "webhooks", { requestMiB?: number; limitMiB?: number }> {
  const values = parseYaml(readFileSync(join(REPO_ROOT, "deploy/helm/values.yaml"), "utf8")) as {
    resources?: Record<string, { requests?: { memory?: string }; limits?: { memory?: string } }>;
  };
  const of = (c: string) => ({
    requestMiB: mebibytes(values.resources?.[c]?.requests?.memory),
    limitMiB: mebibytes(values.resources?.[c]?.limits?.memory),
  });
  return { controller: of("controller"), webhooks: of("webhooks") };
}

/** dist/ as the image's build stage makes it. */
function compile(): void {
  const res = spawnSync(
    process.execPath,
    [join(REPO_ROOT, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"],
    {
      cwd: REPO_ROOT,
      encoding: "utf8",
    },
  );
  if (res.status !== 0) throw new Error(`footprint: tsc failed: ${res.stdout}${res.stderr}`);
}

/**
 * The packages (node_modules) a container's code loads, from a process that only imports it: the
 * entry point's own modules (log, config) and the mode's.
 */
function packagesLoaded(mode: "controller" | "webhooks"): string[] {
  const dir = mkdtempSync(join(tmpdir(), "mo-footprint-hook-"));
  const hook = join(dir, "hook.mjs");
  writeFileSync(
    hook,
    `import { registerHooks } from "node:module";
const seen = new Set();
registerHooks({ resolve(s, c, next) { const r = next(s, c); const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(r.url); if (m) seen.add(m[1]); return r; } });
process.on("exit", () => process.stdout.write(JSON.stringify([...seen].sort())));
`,
  );
  try {
    const out = execFileSync(
      process.execPath,
      [
        "--import",
        hook,
        "--input-type=module",
        "-e",
        `for (const m of ["log", "config/env", "${mode}/run"]) await import(\`./dist/src/\${m}.js\`); process.exit(0);`,
      ],
      { cwd: REPO_ROOT, encoding: "utf8", env: { PATH: process.env.PATH ?? "", NODE_ENV: "production" } },
    );
    return JSON.parse(out) as string[];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * What importing one package costs a fresh Node process started as the image starts one: RSS
 * after the import and a memory-reducing collection (what the package keeps, not the young
 * generation its loading grew) less a bare process's, the median of `runs` starts.
 */
export function importCosts(runs = 3): Array<{ package: string; rssMiB: number; ms: number }> {
  const measure = (pkg: string | undefined) => {
    const code = `const t = performance.now(); ${pkg ? `await import(${JSON.stringify(pkg)});` : ""} const ms = performance.now() - t;
globalThis.gc({ type: "major", execution: "sync", flavor: "last-resort" }); await new Promise((r) => setTimeout(r, 100));
process.stdout.write(JSON.stringify({ rss: process.memoryUsage().rss / 2 ** 20, ms }));`;
    const samples = Array.from({ length: runs }, () => {
      const out = execFileSync(process.execPath, [...RUNTIME_FLAGS, "--input-type=module", "-e", code], {
        cwd: REPO_ROOT,
        encoding: "utf8",
        env: { PATH: process.env.PATH ?? "", NODE_ENV: "production", ...RUNTIME_ENV },
      });
      return JSON.parse(out) as { rss: number; ms: number };
    });
    return {
      rss: percentile(
        samples.map((s) => s.rss),
        50,
      ),
      ms: percentile(
        samples.map((s) => s.ms),
        50,
      ),
    };
  };
  const base = measure(undefined);
  return [
    { package: "(node alone)", rssMiB: round(base.rss), ms: 0 },
    ...PACKAGES.map((pkg) => {
      const m = measure(pkg);
      return { package: pkg, rssMiB: round(m.rss - base.rss), ms: Math.round(m.ms) };
    }),
  ];
}

/**
 * A service account's files as the kubelet projects them (token, ca.crt, namespace), for a
 * ServiceAccount bound to cluster-admin: the footprint does not depend on what RBAC allows.
 */
async function serviceAccountFiles(ctx: FootprintContext, ns: string): Promise<string> {
  const name = "media-orchestrator";
  await ctx.api.rawJson("POST", `/api/v1/namespaces/${ns}/serviceaccounts`, { metadata: { name } });
  await ctx.api.rawJson("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
    metadata: { name: `${ns}-footprint` },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
    subjects: [{ kind: "ServiceAccount", name, namespace: ns }],
  });
  const { status } = await ctx.api.rawJson<{ status: { token: string } }>(
    "POST",
    `/api/v1/namespaces/${ns}/serviceaccounts/${name}/token`,
    { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 3 * 3600 } },
  );
  const dir = mkdtempSync(join(tmpdir(), "mo-footprint-sa-"));
  writeFileSync(join(dir, "token"), status.token);
  writeFileSync(join(dir, "ca.crt"), await servingCa(new URL(ctx.server)));
  writeFileSync(join(dir, "namespace"), ns);
  return dir;
}

/**
 * In a new mount namespace (a user namespace too, so no privilege is needed where they are
 * allowed): an empty /run, the service account's files at the kubelet's path, then the command.
 */
const IN_POD = `set -e
sa="$1"; shift
for d in /run /var/run; do [ -L "$d" ] || mount -t tmpfs tmpfs "$d"; done
mkdir -p /var/run/secrets/kubernetes.io
ln -s "$sa" /var/run/secrets/kubernetes.io/serviceaccount
exec "$@"`;

/** Fails now, and says why, when this machine cannot give a process the pod's file layout. */
function checkPodLayout(saDir: string): void {
  const res = spawnSync(
    "unshare",
    [
      "-rm",
      "--",
      "sh",
      "-c",
      IN_POD,
      "sh",
      saDir,
      "cat",
      "/var/run/secrets/kubernetes.io/serviceaccount/namespace",
    ],
    { encoding: "utf8" },
  );
  if (res.status !== 0)
    throw new Error(
      `footprint: cannot place the service account's files at /var/run/secrets/kubernetes.io/serviceaccount ` +
        `in a mount namespace (unshare -rm: ${res.error?.message ?? res.stderr.trim()}); user and mount namespaces are needed`,
    );
}

interface Container {
  child: ChildProcess;
  name: string;
}

/**
 * A variant of the image's runtime settings, to measure what one flag or setting saves: its idle
 * figures (the sidecar, the controller with 1,000 and 10,000 jobs cached) and the burst's peak and
 * CPU per job, not recorded as the image's footprint.
 */
export interface RuntimeVariant {
  flags: string[];
  env: Record<string, string>;
}

export async function footprint(
  ctx: FootprintContext,
  opts: { starts?: number; variant?: RuntimeVariant } = {},
) {
  const starts = opts.starts ?? 3;
  const flags = opts.variant?.flags ?? RUNTIME_FLAGS;
  const runtimeEnv = opts.variant?.env ?? RUNTIME_ENV;
  const imageArgs = [...flags, "dist/src/main.js"];
  const { log, api } = ctx;
  const server = new URL(ctx.server);
  log("  compiling dist/ (tsc -p tsconfig.build.json)...");
  compile();
  const packages = { controller: packagesLoaded("controller"), webhooks: packagesLoaded("webhooks") };
  for (const [mode, list] of Object.entries(packages))
    if (list.includes("@kubernetes/client-node"))
      throw new Error(`footprint: the ${mode} container loads @kubernetes/client-node in-cluster`);
  log(`  packages loaded: ${JSON.stringify(packages)}`);
  const imports = opts.variant ? [] : (log("  import costs (a fresh process per package)..."), importCosts());

  const ns = await ctx.namespace("bench-footprint");
  const saDir = await serviceAccountFiles(ctx, ns);
  checkPodLayout(saDir);
  const home = mkdtempSync(join(tmpdir(), "mo-footprint-home-")); // no ~/.kube/config, as in the image
  const logs = join(REPO_ROOT, ".local/logs/bench");
  mkdirSync(logs, { recursive: true });
  const running: Container[] = [];
  const sim = await startSimulator({
    timeScale: 0.001,
    statusRetentionMs: 1e9,
    coldStartMs: 0,
    executionMs: 250 / 0.001,
    endpoints: [{ name: "media-asr-bench", workload: "asr", workersMin: 50, workersMax: 200 }],
    // The burst measures memory: on a shared machine whose apiserver answers slowly, a callback
    // may take over the simulator's default 5 s, and one given up three times would leave its job
    // to the hourly resync and the benchmark waiting for it.
    callbackTimeoutMs: 30_000,
  });
  const secret = "whsec_footprint";
  const callbackSecret = "footprint-callback-secret-of-at-least-32-bytes";

  /** A container as the image runs it, in the pod's file layout, with the chart's kind of env. */
  const start = (name: string, mode: "controller" | "webhooks", env: Record<string, string>): Container => {
    const out = openSync(join(logs, `footprint-${name}.log`), "w");
    const child = spawn(
      "unshare",
      ["-rm", "--", "sh", "-c", IN_POD, "sh", saDir, process.execPath, ...imageArgs, mode],
      {
        cwd: REPO_ROOT,
        stdio: ["ignore", out, out],
        env: {
          PATH: process.env.PATH ?? "",
          HOME: home,
          NODE_ENV: "production",
          ...runtimeEnv,
          KUBERNETES_SERVICE_HOST: server.hostname,
          KUBERNETES_SERVICE_PORT: server.port,
          GPU_PROVIDER_API_URL: sim.url,
          GPU_PROVIDER_API_KEY: "sim-key",
          MEDIA_ENV: "bench",
          CALLBACK_SECRET: callbackSecret,
          PAYMENT_PROVIDER_WEBHOOK_SECRET: secret,
          WATCH_NAMESPACE: ns,
          POD_NAMESPACE: ns,
          LEADER_ELECTION: "false",
          MAX_CONCURRENT_RECONCILES: String(ctx.concurrency),
          WEBHOOKS_HOST: "127.0.0.1",
          LOG_LEVEL: "warn",
          ...env,
        },
      },
    );
    const c = { child, name };
    running.push(c);
    return c;
  };
  const stop = async (c: Container) => {
    await stopChild(c.child);
    running.splice(running.indexOf(c), 1);
  };
  const alive = (c: Container) => {
    if (c.child.exitCode !== null)
      throw new Error(
        `footprint: ${c.name} exited (${c.child.exitCode}); see .local/logs/bench/footprint-${c.name}.log`,
      );
  };
  /** RSS as `kubectl top` shows it once settled: the median of 5 readings a second apart, 10 s after `from`. */
  const settled = async (c: Container, from: number) => {
    await sleep(Math.max(0, from + 10_000 - Date.now()));
    const samples: number[] = [];
    for (let i = 0; i < 5; i++) {
      if (i) await sleep(1000);
      alive(c);
      samples.push(rssMiB(c.child.pid!));
    }
    breakdowns.set(c.name, rssBreakdown(c.child.pid!));
    return percentile(samples, 50);
  };
  const breakdowns = new Map<string, { anonymousMiB: number; fileMiB: number }>();

  const controller = async (label: string, size: number, callbackBase = "http://127.0.0.1:9") => {
    const port = await freePort();
    const c = start(`controller-${label}`, "controller", {
      CALLBACK_BASE_URL: callbackBase,
      CONTROLLER_METRICS_PORT: String(port),
      RESYNC_INTERVAL_SECONDS: "3600",
    });
    await waitHttp(`http://127.0.0.1:${port}/readyz`, 10 * 60_000).catch((err: unknown) => {
      alive(c);
      throw err;
    });
    let reconciled = -1;
    for (;;) {
      alive(c);
      const page = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const cached = metricValue(page, 'media_orchestrator_cached_objects{resource="mediajobs"}');
      const now = metricValue(page, "media_orchestrator_reconcile_total");
      if (cached >= size && metricValue(page, 'workqueue_depth{name="mediajob"}') === 0 && now === reconciled)
        break;
      reconciled = now;
      await sleep(1000);
    }
    return { c, port };
  };
  const measureController = async (size: number) => {
    const runs: Array<{ rss: number; hwm: number; name: string }> = [];
    for (let i = 0; i < starts; i++) {
      const { c } = await controller(`${size}-${i}`, size);
      try {
        const rss = await settled(c, Date.now());
        runs.push({ rss: round(rss), hwm: peakRssMiB(c.child.pid!), name: c.name });
      } finally {
        await stop(c);
      }
    }
    const rss = runs.map((r) => r.rss);
    const median = [...runs].sort((a, b) => a.rss - b.rss)[Math.floor(runs.length / 2)]!;
    log(`  controller, ${size} jobs cached: RSS ${JSON.stringify(rss)} MiB`);
    return {
      rssMiB: median.rss,
      rssRunsMiB: rss,
      ...breakdowns.get(median.name),
      startupPeakMiB: round(Math.max(...runs.map((r) => r.hwm))),
    };
  };
  const webhooks = async (label: string, extra: Record<string, string> = {}) => {
    const port = await freePort();
    const c = start(`webhooks-${label}`, "webhooks", {
      CALLBACK_BASE_URL: `http://127.0.0.1:${port}`,
      WEBHOOKS_PORT: String(port),
      ...extra,
    });
    const base = `http://127.0.0.1:${port}`;
    await waitHttp(`${base}/readyz`).catch((err: unknown) => {
      alive(c);
      throw err;
    });
    return { c, base };
  };
  const fill = async (from: number, to: number) => {
    const now = new Date().toISOString();
    log(`  filling to ${to} finished MediaJobs...`);
    await pool(
      Array.from({ length: to - from }, (_, i) => `f-${from + i}`),
      ctx.concurrency,
      async (name) => {
        const created = await api.create<MediaJob>("mediajobs", ns, job(name));
        await api.replaceStatus("mediajobs", {
          ...created,
          status: finishedJobStatus(created.metadata.uid!, now),
        });
      },
    );
  };

  try {
    const resources = chartResources();
    // Idle: the sidecar, then the controller with 1,000 and 10,000 finished jobs cached.
    const hooksIdle: number[] = [];
    const hooksBreakdown: Array<{ anonymousMiB: number; fileMiB: number } | undefined> = [];
    for (let i = 0; i < starts; i++) {
      const w = await webhooks(`idle-${i}`);
      try {
        hooksIdle.push(round(await settled(w.c, Date.now())));
        hooksBreakdown.push(breakdowns.get(w.c.name));
      } finally {
        await stop(w.c);
      }
    }
    const hooksMedian = hooksIdle.indexOf(percentile(hooksIdle, 50));
    log(`  webhooks idle: RSS ${JSON.stringify(hooksIdle)} MiB`);
    await fill(0, 1000);
    const jobs1k = await measureController(1000);
    await fill(1000, 10_000);
    const jobs10k = await measureController(10_000);
    // The controller's peak: 1,000 new jobs run end to end beside the 10,000 cached, with the
    // sidecar applying the provider's callbacks.
    log("  a burst of 1,000 jobs run end to end (10,000 cached)...");
    // The simulator's callbacks all come from 127.0.0.1; in a cluster they come from the provider's
    // many workers, each under the per-source connection cap.
    const hooks = await webhooks("burst", {
      WEBHOOKS_RATE_LIMITS: ROOMY_LIMITS,
      WEBHOOKS_MAX_CONNECTIONS_PER_SOURCE: "100000",
    });
    const { c: ctrl } = await controller("burst", 10_000, hooks.base);
    const burst = {
      jobs: 1000,
      seconds: 0,
      controllerPeakMiB: 0,
      webhooksPeakMiB: 0,
      controllerCpuMsPerJob: 0,
      webhooksCpuMsPerJob: 0,
    };
    try {
      await api.create("gpuendpoints", ns, {
        apiVersion: API_VERSION,
        kind: "GpuEndpoint",
        metadata: { name: "asr" },
        spec: { workload: "asr", minWorkers: 50, maxWorkers: 200 },
      });
      const deadline = Date.now() + 10 * 60_000;
      for (;;) {
        const ep = await api.get<
          KubeObject & { status?: { conditions?: Array<{ type: string; status: string }> } }
        >("gpuendpoints", ns, "asr");
        if (ep?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True")) break;
        if (Date.now() > deadline) throw new Error("footprint: the GpuEndpoint never became Ready");
        alive(ctrl);
        await sleep(200);
      }
      const started = Date.now();
      const cpuBefore = { controller: cpuSeconds(ctrl.child.pid!), webhooks: cpuSeconds(hooks.c.child.pid!) };
      await pool(
        Array.from({ length: burst.jobs }, (_, i) => `b-${i}`),
        ctx.concurrency,
        (name) => api.create("mediajobs", ns, job(name)).then(() => undefined),
      );
      for (;;) {
        alive(ctrl);
        alive(hooks.c);
        const deliveries = sim.deliveries();
        if (deliveries.filter((d) => d.ok).length >= burst.jobs) break;
        if (Date.now() > deadline) {
          const answers: Record<string, number> = {};
          for (const d of deliveries) {
            const k = String(d.httpStatus ?? d.error);
            answers[k] = (answers[k] ?? 0) + 1;
          }
          throw new Error(
            `footprint: the burst's callbacks were not all answered in 10 min (answers: ${JSON.stringify(answers)})`,
          );
        }
        await sleep(250);
      }
      burst.seconds = round((Date.now() - started) / 1000);
      // CPU per job, for the sizing table (docs/helm.md): the controller's passes, the sidecar's callbacks.
      burst.controllerCpuMsPerJob = round(
        (1000 * (cpuSeconds(ctrl.child.pid!) - cpuBefore.controller)) / burst.jobs,
        2,
      );
      burst.webhooksCpuMsPerJob = round(
        (1000 * (cpuSeconds(hooks.c.child.pid!) - cpuBefore.webhooks)) / burst.jobs,
        2,
      );
      await sleep(2000);
      burst.controllerPeakMiB = round(peakRssMiB(ctrl.child.pid!));
      burst.webhooksPeakMiB = round(peakRssMiB(hooks.c.child.pid!));
    } finally {
      await stop(ctrl);
      await stop(hooks.c);
    }
    log(`  burst: ${JSON.stringify(burst)}`);

    // A variant of the runtime settings also runs the burst: what a setting saves in memory may
    // cost CPU per job.
    if (opts.variant)
      return {
        command: `node ${imageArgs.join(" ")} controller|webhooks`,
        environment: Object.entries(runtimeEnv)
          .map(([k, v]) => `${k}=${v}`)
          .join(" "),
        controller: {
          jobs1kMiB: jobs1k.rssRunsMiB,
          jobs10kMiB: jobs10k.rssRunsMiB,
          startupPeakMiB: { jobs1k: jobs1k.startupPeakMiB, jobs10k: jobs10k.startupPeakMiB },
          burst: {
            seconds: burst.seconds,
            peakMiB: burst.controllerPeakMiB,
            cpuMsPerJob: burst.controllerCpuMsPerJob,
          },
        },
        webhooks: { idleMiB: hooksIdle, burstCpuMsPerJob: burst.webhooksCpuMsPerJob },
      };

    const intake = await intakeLoad(
      ctx,
      ns,
      secret,
      callbackSecret,
      () => webhooks("intake", { WEBHOOKS_RATE_LIMITS: ROOMY_LIMITS }),
      stop,
    );
    log(`  intake load: ${JSON.stringify(intake)}`);
    const fuzz = await fuzzLoad(secret, () => webhooks("fuzz", { WEBHOOKS_RATE_LIMITS: ROOMY_LIMITS }), stop);
    log(`  fuzz-shaped load: ${JSON.stringify(fuzz)}`);

    const result = {
      controller: {
        idleMiB: jobs1k.rssMiB,
        jobs10kMiB: jobs10k.rssMiB,
        peakMiB: Math.max(burst.controllerPeakMiB, jobs10k.startupPeakMiB, jobs1k.startupPeakMiB),
        requestMiB: resources.controller.requestMiB,
        limitMiB: resources.controller.limitMiB,
      },
      webhooks: {
        idleMiB: percentile(hooksIdle, 50),
        peakMiB: Math.max(intake.peakMiB, fuzz.peakMiB, burst.webhooksPeakMiB),
        requestMiB: resources.webhooks.requestMiB,
        limitMiB: resources.webhooks.limitMiB,
      },
      measured: {
        starts,
        controller: {
          jobs1k,
          jobs10k,
          burst: {
            jobs: burst.jobs,
            seconds: burst.seconds,
            peakMiB: burst.controllerPeakMiB,
            cpuMsPerJob: burst.controllerCpuMsPerJob,
          },
        },
        webhooks: {
          idleRunsMiB: hooksIdle,
          ...hooksBreakdown[hooksMedian],
          burstPeakMiB: burst.webhooksPeakMiB,
          burstCpuMsPerJob: burst.webhooksCpuMsPerJob,
          intake,
          fuzz,
        },
        packages,
        command: `node ${IMAGE_ARGS.join(" ")} controller|webhooks`,
        environment: Object.entries({ NODE_ENV: "production", ...RUNTIME_ENV })
          .map(([k, v]) => `${k}=${v}`)
          .join(" "),
      },
      targets: { idleMiB: 80, controllerJobs10kMiB: 100 },
      importCosts: imports,
    };
    for (const [what, v] of Object.entries({
      ...result.controller,
      ...prefixed("webhooks", result.webhooks),
    }))
      if (typeof v !== "number" || !Number.isFinite(v))
        throw new Error(`footprint: no measurement of ${what}`);
    return result;
  } finally {
    for (const c of [...running]) await stop(c);
    await sim.close();
    rmSync(saDir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  }
}

const prefixed = (p: string, o: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(o).map(([k, v]) => [`${p}.${k}`, v]));

const job = (name: string): KubeObject => ({
  apiVersion: API_VERSION,
  kind: "MediaJob",
  metadata: { name },
  spec: { workload: "asr", input: { audio: `s3://bench/${name}.wav` }, timeoutSeconds: 600 },
});

/** Limits high enough never to shed: the peak is the sidecar's, not its limiter's. */
const ROOMY_LIMITS = ["payment", "callbackGlobal", "callbackPerJob", "failuresPerSource"]
  .map((n) => `${n}=1000000/1000000`)
  .join(",");

type Started = { c: Container; base: string };

/**
 * The intake benchmark's load (bench/run.ts, intake()) on a fresh sidecar: new signed payment
 * events, replays of one event, bad signatures and duplicate callbacks, 20 connections each.
 * The peak is the process's high-water mark at the end; CPU per new event gives the sizing table.
 */
async function intakeLoad(
  ctx: FootprintContext,
  ns: string,
  secret: string,
  callbackSecret: string,
  startSidecar: () => Promise<Started>,
  stop: (c: Container) => Promise<void>,
) {
  const { c, base } = await startSidecar();
  try {
    const pay = `${base}/webhooks/payment_provider`;
    const signed = (body: string) => ({
      "content-type": "application/json",
      "stripe-signature": signStripePayload(body, secret, Math.floor(Date.now() / 1000)),
    });
    let seq = 0;
    const cpuBefore = cpuSeconds(c.child.pid!);
    const fresh = await autocannon({
      url: pay,
      connections: 20,
      duration: 10,
      requests: [
        {
          method: "POST",
          setupRequest: (req) => {
            const body = JSON.stringify({
              id: `evt_footprint_${randomBytes(6).toString("hex")}_${seq++}`,
              object: "event",
              type: "invoice.paid",
              created: Math.floor(Date.now() / 1000),
              data: { object: {} },
            });
            return { ...req, body, headers: signed(body) };
          },
        },
      ],
    });
    const cpuMsPerEvent = (1000 * (cpuSeconds(c.child.pid!) - cpuBefore)) / Math.max(1, fresh.requests.total);
    const afterFresh = peakRssMiB(c.child.pid!);
    const replay = JSON.stringify({
      id: "evt_footprint_replay",
      object: "event",
      type: "invoice.paid",
      created: 1,
      data: { object: {} },
    });
    await autocannon({
      url: pay,
      connections: 20,
      duration: 5,
      method: "POST",
      headers: signed(replay),
      body: replay,
    });
    await autocannon({
      url: pay,
      connections: 20,
      duration: 5,
      method: "POST",
      headers: {
        "content-type": "application/json",
        "stripe-signature": `t=${Math.floor(Date.now() / 1000)},v1=${"0".repeat(64)}`,
      },
      body: replay,
    });
    const created = await ctx.api.create<MediaJob>("mediajobs", ns, job("footprint-cb"));
    const now = new Date().toISOString();
    await ctx.api.replaceStatus("mediajobs", {
      ...created,
      status: withPhaseConditions(
        {
          phase: "Completed",
          jobId: "footprint-cb",
          providerJobId: "footprint-cb",
          attempts: 1,
          completedAt: now,
          output: {},
          submission: { attempt: 1, id: "footprint-submission", startedAt: now, state: "Accepted" },
        },
        1,
        now,
      ),
    });
    const cb = callbackUrl(base, callbackSecret, {
      namespace: ns,
      name: "footprint-cb",
      uid: created.metadata.uid ?? "",
      jobId: "footprint-cb",
      attempt: 1,
      submission: "footprint-submission",
    });
    await autocannon({
      url: cb,
      connections: 20,
      duration: 5,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: "footprint-cb", status: "COMPLETED", output: { text: "dup" } }),
    });
    return {
      newEventsPerSecond: round(fresh.requests.average),
      newEventsNon2xx: fresh.non2xx,
      sidecarCpuMsPerEvent: round(cpuMsPerEvent, 2),
      peakAfterNewEventsMiB: round(afterFresh),
      peakMiB: round(peakRssMiB(c.child.pid!)),
      rssAfterMiB: round(rssMiB(c.child.pid!)),
    };
  } finally {
    await stop(c);
  }
}

/**
 * A fuzz-shaped load on a fresh sidecar: the kinds of request `make fuzz` sends (bench/fuzz.ts),
 * weighted to the ones that cost memory: deeply nested JSON, bodies up to and over the 1 MiB
 * limit, long arrays; 30 % of the payment events validly signed (their bodies are parsed), the
 * rest and the callbacks with bad credentials; some sent slowly; 32 at a time.
 */
async function fuzzLoad(
  secret: string,
  startSidecar: () => Promise<Started>,
  stop: (c: Container) => Promise<void>,
) {
  const TOTAL = 20_000;
  const { c, base } = await startSidecar();
  const pool = new Pool(base, { connections: 32 });
  let seed = 0x5eed;
  const next = () => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  const int = (n: number) => Math.floor(next() * n);
  const HUGE = Buffer.alloc(1024 * 1024 + 4096, "a");
  const body = (): Buffer => {
    switch (int(8)) {
      case 0:
        return Buffer.from("[".repeat(1 + int(20_000)) + "]".repeat(1 + int(20_000)));
      case 1:
        return Buffer.from('{"a":'.repeat(1 + int(5_000)) + "1" + "}".repeat(1 + int(5_000)));
      case 2:
        return next() < 0.05 ? HUGE : Buffer.from(`{"pad":"${"x".repeat(int(64 * 1024))}"}`);
      case 3:
        return Buffer.from(JSON.stringify({ nested: Array.from({ length: int(2000) }, (_, i) => ({ i })) }));
      case 4:
        return Buffer.from([0xff, 0xfe, 0x00, 0x7b, 0x22, 0xc3, 0x28]);
      case 5:
        return Buffer.from('{"__proto__":{"polluted":true},"id":"evt_p","type":"invoice.paid","created":1}');
      default:
        return Buffer.from(
          JSON.stringify({
            id: `evt_${int(1e9)}`,
            object: "event",
            type: "invoice.paid",
            created: int(2e9),
            data: { object: { id: `sub_${int(50)}` } },
          }),
        );
    }
  };
  const send = async (): Promise<number> => {
    const b = body();
    const payment = next() < 0.5;
    const path = payment
      ? "/webhooks/payment_provider"
      : `/reports/gpu_provider?ns=x&name=y&uid=z&job=j&attempt=1&sub=s&token=${"A".repeat(int(100))}`;
    const headers: Record<string, string> = { "content-type": "application/json" };
    // As in the fuzz, 30 % signed with the right secret: their bodies are parsed, not only read.
    if (payment)
      headers["stripe-signature"] =
        next() < 0.3
          ? signStripePayload(b, secret, Math.floor(Date.now() / 1000))
          : `t=${Math.floor(Date.now() / 1000)},v1=${randomBytes(32).toString("hex")}`;
    if (next() < 0.002)
      return new Promise((resolve) => {
        const req = httpRequest(
          `${base}${path}`,
          { method: "POST", headers: { ...headers, "content-length": String(b.length) } },
          (res) => {
            res.resume();
            res.on("end", () => resolve(res.statusCode ?? 0));
          },
        );
        req.on("error", () => resolve(0));
        const third = Math.ceil(b.length / 3) || 1;
        let i = 0;
        const step = () => {
          if (i * third >= b.length) return void req.end();
          req.write(b.subarray(i * third, (i + 1) * third));
          i++;
          setTimeout(step, 30);
        };
        step();
      });
    return pool
      .request({ method: "POST", path, headers, body: b })
      .then(async (res) => {
        await res.body.dump();
        return res.statusCode;
      })
      .catch(() => 0);
  };
  try {
    const started = Date.now();
    let sent = 0;
    let fivexx = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (sent < TOTAL) {
          sent++;
          if ((await send()) >= 500) fivexx++;
        }
      }),
    );
    if (fivexx) throw new Error(`footprint: the sidecar answered ${fivexx} fuzz requests with a 5xx`);
    return {
      requests: TOTAL,
      requestsPerSecond: round(TOTAL / ((Date.now() - started) / 1000)),
      peakMiB: round(peakRssMiB(c.child.pid!)),
      rssAfterMiB: round(rssMiB(c.child.pid!)),
    };
  } finally {
    await pool.close();
    await stop(c);
  }
}
