// make bench BENCH_ARGS="--only fairness": fair share at the provider (docs/design.md, "Fair
// share"). One endpoint whose simulated workers take real time; account A creates a burst at once,
// account C (weight 2) a burst right after, and account B one job every 500 ms meanwhile (as many
// as fit in the time the endpoint needs for the bursts). The same
// scenario runs twice in the same run: with the in-flight window (the product) and without it
// (FAIR_SHARE_WINDOW=false: every job submitted at once, the provider's queue first in, first out).
//
// Reported (all from the simulator's own record of each job: when it was submitted, started and
// ended at the provider):
//  - B's start latency: from the job's creation to the provider starting it, p50 and p99;
//  - the shares of worker time A and C got while both had work waiting, against 1:2: shareError is
//    the largest relative deviation of a share from its weight's;
//  - utilisation: the endpoint's busy worker time over workersMax × the span at the provider
//    (first start to last end), and the makespan (first creation to the last end, B's included:
//    B creates the same number of jobs in both runs, as many as the bursts' time holds);
//  - the provider's 429s to the controller, and the Kubernetes writes of MediaJobs per job (the
//    apiserver's request counts: creates, updates, status updates, patches; refused ones too).
import { API_VERSION } from "../src/crds/index.js";
import type { KubeApi, KubeObject } from "../src/k8s/api.js";
import { startSimulator, type Simulator } from "../tools/simulator/server.js";
import { activateAccount, burstJobs, type BurstJob } from "./bursts.js";
import { metricValue, percentile, pool, round } from "./lib.js";

export interface FairnessOptions {
  /** Jobs of account A's burst (issue: 5,000) and of account C's (2,000). */
  aJobs: number;
  cJobs: number;
  /** B creates one job this often, real ms (500). */
  bIntervalMs: number;
  /** One job's run at the provider, real seconds. */
  jobSeconds: number;
  workersMax: number;
  /** The controller's FAIR_SHARE_TICK_SECONDS. */
  tickSeconds: number;
}

export interface FairnessDeps {
  api: KubeApi;
  namespace(name: string): Promise<string>;
  /** Starts the controller and the sidecar on the simulator, with these settings; resolves when ready. */
  startStack(
    ns: string,
    simUrl: string,
    env: Record<string, string>,
  ): Promise<{ controllerMetricsUrl: string; stop(): Promise<void> }>;
  log(s: string): void;
  /** The apiserver's request counts so far, by `VERB resource[/subresource]` (lib.ts). */
  apiserverCounts(): Promise<Map<string, number>>;
}

/** Successful and refused writes of MediaJobs (objects and status), from two readings. */
function mediaJobWrites(before: Map<string, number>, after: Map<string, number>): number {
  let n = 0;
  for (const [key, v] of after) {
    const [verb, resource] = key.split(" ");
    if (["POST", "PUT", "PATCH", "DELETE"].includes(verb!) && resource?.startsWith("mediajobs"))
      n += v - (before.get(key) ?? 0);
  }
  return n;
}

interface RunResult {
  window: boolean;
  smallAccountStartP50Ms: number;
  smallAccountStartP99Ms: number;
  smallAccountJobs: number;
  /** Worker seconds of A and of C while both had work waiting. */
  workerSecondsA: number;
  workerSecondsC: number;
  shareA: number;
  shareC: number;
  shareError: number;
  utilisation: number;
  makespanSeconds: number;
  /** Most workers up at once (the provider's scaler at work). */
  peakWorkers: number;
  provider429: number;
  kubernetesWritesPerJob: number;
}

/** Simulated ms per real ms: 0.1 runs the provider's clock 10x faster than the wall clock. */
const TIME_SCALE = 0.1;

/** An account's burst: `count` jobs named `<prefix>-<i>`, each a long asr job. */
const accountBurst = (account: string, prefix: string, count: number) =>
  burstJobs(account, count, (i) => {
    const name = `${prefix}-${i}`;
    return {
      name,
      spec: { workload: "asr", id: name, input: { audio: `s3://bench/${name}.wav` }, timeoutSeconds: 3600 },
    };
  });

async function runOnce(d: FairnessDeps, o: FairnessOptions, window: boolean): Promise<RunResult> {
  const ns = await d.namespace(`bench-fairness-${window ? "on" : "off"}-${Date.now() % 100_000}`);
  // The simulator's clock starts within a few ms of this reading: its job times are converted with it.
  const simEpoch = Date.now();
  const sim: Simulator = await startSimulator({
    timeScale: TIME_SCALE,
    statusRetentionMs: 1e9,
    coldStartMs: 2_000,
    executionMs: (o.jobSeconds * 1000) / TIME_SCALE,
    endpoints: [
      {
        name: "media-asr-bench",
        workload: "asr",
        workersMin: 0,
        workersMax: o.workersMax,
        scalerType: "QUEUE_DELAY",
        scalerValue: 4,
      },
    ],
  });
  const realOf = (simMs: number) => simEpoch + simMs * TIME_SCALE;
  const stack = await d.startStack(ns, sim.url, {
    FAIR_SHARE_WINDOW: String(window),
    FAIR_SHARE_JOB_SECONDS: String(Math.max(1, Math.round(o.jobSeconds))),
    FAIR_SHARE_TICK_SECONDS: String(o.tickSeconds),
    FAIR_SHARE_WEIGHTS: "C=2",
  });
  try {
    for (const a of ["A", "B", "C"]) await activateAccount(d.api, ns, a);
    await d.api.create("gpuendpoints", ns, {
      apiVersion: API_VERSION,
      kind: "GpuEndpoint",
      metadata: { name: "asr" },
      spec: { workload: "asr", minWorkers: 0, maxWorkers: o.workersMax, idleTimeoutSeconds: 5 },
    } as KubeObject);
    for (;;) {
      const ep = await d.api.get<
        KubeObject & { status?: { conditions?: Array<{ type: string; status: string }> } }
      >("gpuendpoints", ns, "asr");
      if (ep?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True")) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const endpointId = (sim.listEndpoints() as Array<{ id?: string }>)[0]!.id!;
    const countsBefore = await d.apiserverCounts();
    let peakWorkers = 0;
    const sampler = setInterval(() => {
      const w = sim.getEndpoint(endpointId)?.health?.workers;
      if (w) peakWorkers = Math.max(peakWorkers, w.idle + w.running + (w.initializing ?? 0));
    }, 100);

    const createdAt = new Map<string, number>();
    const create = async (j: BurstJob) => {
      const t = Date.now();
      await d.api.create("mediajobs", ns, j.body);
      createdAt.set(j.name, t);
    };
    const aJobs = accountBurst("A", "a", o.aJobs);
    const cJobs = accountBurst("C", "c", o.cJobs);
    const aNames = aJobs.map((j) => j.name);
    const cNames = cJobs.map((j) => j.name);
    const burstStart = Date.now();
    // B's trickle: as many jobs as fit, one per interval, in the time the endpoint needs for the
    // bursts, the same count in both runs, so both runs do the same work.
    const bCount = Math.ceil(((o.aJobs + o.cJobs) * o.jobSeconds * 1000) / o.workersMax / o.bIntervalMs);
    const bJobs = accountBurst("B", "b", bCount);
    const bNames = bJobs.map((j) => j.name);
    const trickle = (async () => {
      const creating: Array<Promise<void>> = [];
      for (const j of bJobs) {
        creating.push(create(j));
        await new Promise((r) => setTimeout(r, o.bIntervalMs));
      }
      await Promise.all(creating);
    })();
    await pool(aJobs, 16, create);
    await pool(cJobs, 16, create);
    d.log(
      `    ${window ? "window on" : "window off"}: created the bursts in ${round((Date.now() - burstStart) / 1000)} s`,
    );
    const burst = [...aNames, ...cNames];
    const started = (name: string) => sim.getJob(name)?.timeline.started !== undefined;
    const ended = (name: string) => sim.getJob(name)?.timeline.ended !== undefined;
    const deadline = Date.now() + 60 * 60_000;
    while (!burst.every(started)) {
      if (Date.now() > deadline) throw new Error("the burst did not start within an hour");
      await new Promise((r) => setTimeout(r, 250));
    }
    await trickle;
    while (![...burst, ...bNames].every(ended)) {
      if (Date.now() > deadline) throw new Error("the burst did not end within an hour");
      await new Promise((r) => setTimeout(r, 250));
    }
    clearInterval(sampler);
    // Writes land after the provider's end (the callback's, the finalizer's removal): a moment more.
    await new Promise((r) => setTimeout(r, 5_000));
    const writes = mediaJobWrites(countsBefore, await d.apiserverCounts());
    const metrics = await (await fetch(stack.controllerMetricsUrl)).text();

    const times = (name: string) => {
      const t = sim.getJob(name)!.timeline;
      return { start: realOf(t.started!), end: realOf(t.ended!) };
    };
    // B: creation to the provider starting it.
    const bWaits = bNames.filter((n) => createdAt.has(n)).map((n) => times(n).start - createdAt.get(n)!);
    // While both A and C had work waiting: from the first job of C (A's came first) until the
    // first of them had every job started. A job counts with all its worker time when it started
    // in that span: what the dispatcher gave out then (the jobs A had running before C came are
    // not C's loss).
    const lastStart = (names: string[]) => Math.max(...names.map((n) => times(n).start));
    const bothFrom = Math.max(createdAt.get(aNames[0]!)!, Math.min(...cNames.map((n) => createdAt.get(n)!)));
    const bothUntil = Math.min(lastStart(aNames), lastStart(cNames));
    const startedWithin = (names: string[]) =>
      names.reduce((sum, n) => {
        const { start, end } = times(n);
        return start >= bothFrom && start < bothUntil ? sum + (end - start) : sum;
      }, 0) / 1000;
    const workerSecondsA = startedWithin(aNames);
    const workerSecondsC = startedWithin(cNames);
    const total = workerSecondsA + workerSecondsC;
    const shareA = total > 0 ? workerSecondsA / total : 0;
    const shareC = total > 0 ? workerSecondsC / total : 0;
    const shareError = Math.max(Math.abs(shareA - 1 / 3) / (1 / 3), Math.abs(shareC - 2 / 3) / (2 / 3));
    // Utilisation over the burst's span at the provider, every job (B's included) counted.
    const all = [...burst, ...bNames].map(times);
    const firstStart = Math.min(...all.map((t) => t.start));
    const lastEnd = Math.max(...all.map((t) => t.end));
    const busy = all.reduce((s, t) => s + Math.max(0, Math.min(t.end, lastEnd) - t.start), 0);
    const utilisation = busy / (o.workersMax * (lastEnd - firstStart));
    const jobs = burst.length + bNames.length;
    return {
      window,
      smallAccountStartP50Ms: Math.round(percentile(bWaits, 50)),
      smallAccountStartP99Ms: Math.round(percentile(bWaits, 99)),
      smallAccountJobs: bWaits.length,
      workerSecondsA: round(workerSecondsA),
      workerSecondsC: round(workerSecondsC),
      shareA: round(shareA, 3),
      shareC: round(shareC, 3),
      shareError: round(shareError, 3),
      utilisation: round(utilisation, 3),
      makespanSeconds: round((lastEnd - burstStart) / 1000),
      peakWorkers,
      provider429: metricValue(metrics, "media_orchestrator_provider_rate_limited_total"),
      kubernetesWritesPerJob: round(writes / jobs, 2),
    };
  } finally {
    await stack.stop();
    await sim.close();
  }
}

export async function fairness(d: FairnessDeps, o: FairnessOptions) {
  d.log(
    `  A ${o.aJobs} jobs at once, C (weight 2) ${o.cJobs}, B one every ${o.bIntervalMs} ms; ` +
      `${o.workersMax} workers, ${o.jobSeconds} s per job`,
  );
  const on = await runOnce(d, o, true);
  d.log(`    window on: ${JSON.stringify(on)}`);
  const off = await runOnce(d, o, false);
  d.log(`    window off: ${JSON.stringify(off)}`);
  return {
    smallAccountStartP50Ms: on.smallAccountStartP50Ms,
    smallAccountStartP99Ms: on.smallAccountStartP99Ms,
    smallAccountStartP99MsWindowOff: off.smallAccountStartP99Ms,
    jobSeconds: o.jobSeconds,
    tickSeconds: o.tickSeconds,
    shareError: on.shareError,
    utilisation: on.utilisation,
    makespanRatio: round(on.makespanSeconds / off.makespanSeconds, 3),
    provider429: on.provider429,
    scenario: {
      aJobs: o.aJobs,
      cJobs: o.cJobs,
      bIntervalMs: o.bIntervalMs,
      workersMax: o.workersMax,
      weights: { A: 1, B: 1, C: 2 },
    },
    windowOn: on,
    windowOff: off,
  };
}
