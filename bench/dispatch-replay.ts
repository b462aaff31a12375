// One replay of a dispatch scenario (bench/dispatch-scenarios.ts) on a virtual clock: the
// simulator's real engine (tools/simulator/engine.ts, its scaler and clock) and the product's real
// Dispatcher (through bench/dispatch-driver.ts) run against @sinonjs/fake-timers, which replaces
// setTimeout, setInterval and Date while the replay runs. Nothing here waits on real time, so
// 2,000 jobs of 30 s replay in seconds, and a replay repeats exactly for a seed.
import FakeTimers from "@sinonjs/fake-timers";
import { Clock } from "../tools/simulator/clock.js";
import { Engine } from "../tools/simulator/engine.js";
import { resolveOptions, type Faults } from "../tools/simulator/options.js";
import { Rng } from "../tools/simulator/random.js";
import { ControllerStandIn, endedStartDeadlineExceeded } from "./dispatch-driver.js";
import type { Scenario } from "./dispatch-scenarios.js";

export type QueueDelayReading = "perOverdueJob" | "onePerDelay";

export interface ReplayOptions {
  window: boolean;
  reading: QueueDelayReading;
  seed: number;
  /** RESYNC_INTERVAL_SECONDS: the controller's tick (the product's default is 30). */
  resyncSeconds: number;
  /** FAIR_SHARE_TICK_SECONDS and FAIR_SHARE_JOB_SECONDS (the product's defaults: 2 and 30). */
  fairShareTickSeconds: number;
  fairShareJobSeconds: number;
  /** Virtual seconds after which a replay stops and counts the jobs not ended as stuck. */
  capSeconds: number;
}

export interface ReplayMeasures {
  /** From the scenario's start to the last job's end; null when some job never ended. */
  drainSeconds: number | null;
  /** From the start (or the raise of workersMax) until workersMax workers were up; null: never. */
  secondsToWorkersMax: number | null;
  /** From the measured batch's creation until its last job ended; null: no such batch, or not all ended. */
  normalJobsDoneSeconds: number | null;
  of: number;
  completed: number;
  startDeadlineExceeded: number;
  /** Jobs that ended Failed or Cancelled for another reason. */
  otherEnds: number;
  /** Jobs not ended when the replay stopped. */
  stuck: number;
  /** Jobs the provider forgot (its ttl, a loss). */
  lost: number;
  /** Jobs a worker ran more than once. */
  ranTwice: number;
  /** The most jobs waiting in the provider's queue at once. */
  peakProviderQueue: number;
  /** How many times the window's gate answered each wait reason. */
  waits: Record<string, number>;
}

const ENDPOINT_ID = "bench-endpoint";
/** How often the endpoint's workers are sampled for secondsToWorkersMax (virtual ms). */
const SAMPLE_MS = 500;
/** The virtual clock starts at a fixed date, so timestamps in a replay repeat. */
const START = Date.parse("2026-01-01T00:00:00.000Z");

export function replay(s: Scenario, o: ReplayOptions): ReplayMeasures {
  const clock = FakeTimers.withGlobal(globalThis).install({
    now: START,
    toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "Date"],
  });
  try {
    return run(s, o, clock);
  } finally {
    clock.uninstall();
  }
}

function run(s: Scenario, o: ReplayOptions, clock: ReturnType<typeof FakeTimers.install>): ReplayMeasures {
  const faults: Faults = s.crashLoopUntilSeconds !== undefined ? { crashLoopWorkers: true } : {};
  // The driver exists before the engine ends any job; the engine's callbacks reach it through this.
  const ends: { to?: ControllerStandIn } = {};
  const engine = new Engine({
    clock: new Clock(1),
    rng: new Rng(o.seed),
    opts: resolveOptions({
      seed: o.seed,
      coldStartMs: s.coldStartSeconds * 1000,
      executionMs: s.jobSeconds * 1000,
      queueDelayReading: o.reading,
    }),
    faults: () => faults,
    onTerminal: (job) => ends.to?.onProviderEnd(job),
    onForget: () => ends.to && ends.to.lost++,
  });
  const config = {
    id: ENDPOINT_ID,
    name: "bench",
    workload: "asr" as const,
    workersMin: s.workersMin,
    workersMax: s.workersMax,
    idleTimeout: 5,
    executionTimeoutMs: 600_000,
    settings: { scalerType: s.scaler.type, scalerValue: s.scaler.value },
  };
  engine.upsertEndpoint(config);
  const driver = new ControllerStandIn({
    engine,
    endpointId: ENDPOINT_ID,
    window: o.window,
    fairShareTickSeconds: o.fairShareTickSeconds,
    fairShareJobSeconds: o.fairShareJobSeconds,
    scalerInStatus: !s.backlogAtLeaderStart,
    ...(s.startDeadlineSeconds !== undefined && { startDeadlineSeconds: s.startDeadlineSeconds }),
  });
  ends.to = driver;
  const t0 = Date.now();

  // The endpoint's workers, sampled: when workersMax were first up, the provider's longest queue.
  let target = s.workersMax;
  let since = t0;
  let reachedAt: number | undefined;
  let peakProviderQueue = 0;
  setInterval(() => {
    const h = engine.health(ENDPOINT_ID)!;
    peakProviderQueue = Math.max(peakProviderQueue, h.jobs.inQueue);
    if (reachedAt === undefined && h.workers.idle + h.workers.running >= target) reachedAt = Date.now();
  }, SAMPLE_MS);

  // The jobs: each batch created at once, at its time.
  const total = s.batches.reduce((n, b) => n + b.count, 0);
  let created = 0;
  const measured: string[] = [];
  let measuredFrom: number | undefined;
  const createBatch = (b: Scenario["batches"][number]) => {
    for (let i = 0; i < b.count; i++) {
      const key = driver.create(b.account, b.priority ?? "normal");
      if (b.measured) measured.push(key);
    }
    if (b.measured) measuredFrom = Date.now();
    created += b.count;
  };
  if (s.backlogAtLeaderStart) {
    // The backlog is in the cache before this replica leads, and the endpoint's status does not
    // say its scaler yet: the window waits for the leader's first look (ScalerUnknown meanwhile).
    for (const b of s.batches) if (!b.atSeconds) createBatch(b);
    driver.lead();
  } else {
    // The endpoint was looked at before the jobs came: its status records its scaler.
    driver.look();
    driver.lead();
  }
  for (const b of s.batches)
    if (!(s.backlogAtLeaderStart && !b.atSeconds))
      setTimeout(() => createBatch(b), (b.atSeconds ?? 0) * 1000);
  // manager.ts: the tick (RESYNC_INTERVAL_SECONDS) reconciles every object again.
  setInterval(() => driver.resync(), o.resyncSeconds * 1000);
  if (s.crashLoopUntilSeconds !== undefined)
    setTimeout(() => (faults.crashLoopWorkers = false), s.crashLoopUntilSeconds * 1000);
  const raise = s.raiseWorkersMax;
  if (raise)
    setTimeout(() => {
      // spec.maxWorkers raised: the GpuEndpoint reconcile sets the provider's workersMax (done here
      // at once) and looks at the endpoint.
      engine.upsertEndpoint({ ...config, workersMax: raise.to });
      target = raise.to;
      since = Date.now();
      reachedAt = undefined;
      driver.endpointChanged();
    }, raise.atSeconds * 1000);

  const cap = t0 + o.capSeconds * 1000;
  while ((created < total || !driver.settled()) && Date.now() < cap) clock.tick(1000);

  const records = [...driver.jobs.values()];
  const seconds = (ms: number) => Math.round(ms / 100) / 10;
  const ended = records.filter((r) => r.endedAt !== undefined);
  const lastEnd = (rs: typeof records) => Math.max(...rs.map((r) => r.endedAt ?? Infinity));
  const measuredRecords = measured.map((k) => driver.jobs.get(k)!);
  const measuredEnd = measuredRecords.length ? lastEnd(measuredRecords) : Infinity;
  return {
    drainSeconds: ended.length === total ? seconds(lastEnd(records) - t0) : null,
    secondsToWorkersMax: reachedAt === undefined ? null : seconds(reachedAt - since),
    normalJobsDoneSeconds:
      measuredFrom !== undefined && Number.isFinite(measuredEnd) ? seconds(measuredEnd - measuredFrom) : null,
    of: total,
    completed: records.filter((r) => r.job.status?.phase === "Completed").length,
    startDeadlineExceeded: records.filter((r) => endedStartDeadlineExceeded(r.job)).length,
    otherEnds: ended.filter((r) => r.job.status?.phase !== "Completed" && !endedStartDeadlineExceeded(r.job))
      .length,
    stuck: total - ended.length,
    lost: driver.lost,
    ranTwice: [...engine.allExecutions().values()].filter((n) => n > 1).length,
    peakProviderQueue,
    waits: Object.fromEntries(driver.waits),
  };
}
