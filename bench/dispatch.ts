// `make bench BENCH_ARGS="--only dispatch"`: issue 39's dispatch scenarios (dispatch-scenarios.ts),
// each replayed with the in-flight window on and off under both readings of RunPod's QUEUE_DELAY
// scaler, on a virtual clock (dispatch-replay.ts): the simulator's engine and the product's
// Dispatcher, no Kubernetes, no real waiting. Each result is printed beside its target.
import {
  replay,
  type QueueDelayReading,
  type ReplayMeasures,
  type ReplayOptions,
} from "./dispatch-replay.js";
import { scenarios, type Scenario } from "./dispatch-scenarios.js";

export interface DispatchBenchOptions {
  /** Multiplies every scenario's job counts (1: as the issue sizes them). */
  scale: number;
  seed: number;
  log: (line: string) => void;
}

/** The controller's settings the replays run with: the product's defaults. */
export const SETUP = {
  resyncSeconds: 30,
  fairShareTickSeconds: 2,
  fairShareJobSeconds: 30,
  /** The endpoint's idle timeout (RunPod's default, 5 s). */
  idleTimeoutSeconds: 5,
  capSeconds: 6 * 3600,
} as const;

const READINGS: QueueDelayReading[] = ["perOverdueJob", "onePerDelay"];

/** What one target says of a row: met or not, and why when the numbers alone do not. */
export interface TargetResult {
  target: string;
  met: boolean;
  note?: string;
}

export interface DispatchRow {
  name: string;
  reading: QueueDelayReading;
  drainSecondsOn: number | null;
  drainSecondsOff: number | null;
  ratio: number | null;
  secondsToWorkersMax: { on: number | null; off: number | null };
  normalJobsDoneSeconds: { on: number | null; off: number | null } | null;
  completed: { on: number; off: number };
  startDeadlineExceeded: { on: number; off: number };
  of: number;
  /** Jobs not ended, lost by the provider, or run twice: 0 everywhere. */
  stuck: { on: number; off: number };
  lost: { on: number; off: number };
  ranTwice: { on: number; off: number };
  peakProviderQueue: { on: number; off: number };
  targets: TargetResult[];
}

export interface DispatchResults {
  setup: typeof SETUP & { seed: number; scale: number };
  scenarios: DispatchRow[];
}

export function dispatchBench(o: DispatchBenchOptions): DispatchResults {
  const rows: DispatchRow[] = [];
  for (const s of scenarios(o.scale))
    for (const reading of READINGS) {
      const base: Omit<ReplayOptions, "window"> = { reading, seed: o.seed, ...SETUP };
      const on = replay(s, { ...base, window: true });
      const off = replay(s, { ...base, window: false });
      const row = dispatchRow(s, reading, on, off);
      rows.push(row);
      o.log(describeRow(row));
    }
  return { setup: { ...SETUP, seed: o.seed, scale: o.scale }, scenarios: rows };
}

const both = <K extends keyof ReplayMeasures>(k: K, on: ReplayMeasures, off: ReplayMeasures) => ({
  on: on[k],
  off: off[k],
});

export function dispatchRow(
  s: Scenario,
  reading: QueueDelayReading,
  on: ReplayMeasures,
  off: ReplayMeasures,
): DispatchRow {
  const ratio =
    on.drainSeconds !== null && off.drainSeconds !== null && off.drainSeconds > 0
      ? Math.round((on.drainSeconds / off.drainSeconds) * 1000) / 1000
      : null;
  const row: DispatchRow = {
    name: s.name,
    reading,
    drainSecondsOn: on.drainSeconds,
    drainSecondsOff: off.drainSeconds,
    ratio,
    secondsToWorkersMax: both("secondsToWorkersMax", on, off),
    normalJobsDoneSeconds: s.batches.some((b) => b.measured) ? both("normalJobsDoneSeconds", on, off) : null,
    completed: both("completed", on, off),
    startDeadlineExceeded: both("startDeadlineExceeded", on, off),
    of: on.of,
    stuck: both("stuck", on, off),
    lost: both("lost", on, off),
    ranTwice: both("ranTwice", on, off),
    peakProviderQueue: both("peakProviderQueue", on, off),
    targets: [],
  };
  row.targets = targetsOf(s, row, on, off);
  return row;
}

/** Issue 39's targets, those that apply to the scenario. */
function targetsOf(s: Scenario, row: DispatchRow, on: ReplayMeasures, off: ReplayMeasures): TargetResult[] {
  const out: TargetResult[] = [];
  const drain: TargetResult = {
    target: "drain on ≤ 1.05 × off",
    met: row.ratio !== null && row.ratio <= 1.05,
  };
  if (!drain.met && off.startDeadlineExceeded > on.startDeadlineExceeded)
    drain.note =
      `the off run ended ${off.startDeadlineExceeded} jobs at their start deadline (the window on: ` +
      `${on.startDeadlineExceeded}), so it finished fewer jobs sooner`;
  else if (!drain.met && row.normalJobsDoneSeconds)
    drain.note =
      `the off run's normal jobs waited behind the low ones at the provider (done after ${row.normalJobsDoneSeconds.off} s, ` +
      `the window on: ${row.normalJobsDoneSeconds.on} s); low jobs never make the endpoint scale (policy.lowPriority)`;
  out.push(drain);
  // workersMax is a target where the scenario's normal jobs can keep workersMax busy.
  if (!row.normalJobsDoneSeconds) {
    const { on: a, off: b } = row.secondsToWorkersMax;
    const note =
      b !== null
        ? undefined
        : a === null
          ? "reached in neither run: the jobs ended first"
          : "the off run's jobs ended first";
    out.push({
      target: `workersMax reached within one tick (${SETUP.resyncSeconds} s) of the off run`,
      met: b === null || (a !== null && a - b <= SETUP.resyncSeconds),
      ...(note && { note }),
    });
  }
  if (row.normalJobsDoneSeconds) {
    const bound = 2 * (s.coldStartSeconds + s.jobSeconds);
    const { on: a, off: b } = row.normalJobsDoneSeconds;
    out.push({
      target: `normal jobs done within 2 × (cold start + job) = ${bound} s of the off run`,
      met: a !== null && b !== null && a - b <= bound,
    });
  }
  const clean = on.stuck === 0 && on.lost === 0 && on.ranTwice === 0;
  if (s.startDeadlineSeconds === undefined)
    out.push({ target: "every job completes, once", met: clean && on.completed === on.of });
  else
    out.push({
      target: "each job completes or ends StartDeadlineExceeded, none lost or stuck",
      met: clean && on.otherEnds === 0 && on.completed + on.startDeadlineExceeded === on.of,
    });
  return out;
}

const secs = (x: number | null) => (x === null ? "never" : `${x} s`);

/** One line per row: each result beside its target. */
export function describeRow(r: DispatchRow): string {
  const verdict = (t: TargetResult) =>
    `${t.target}: ${t.met ? "met" : "MISSED"}${t.note ? ` (${t.note})` : ""}`;
  const parts = [
    `drain on ${secs(r.drainSecondsOn)} / off ${secs(r.drainSecondsOff)} (ratio ${r.ratio ?? "n/a"})`,
    `workersMax after on ${secs(r.secondsToWorkersMax.on)} / off ${secs(r.secondsToWorkersMax.off)}`,
    ...(r.normalJobsDoneSeconds
      ? [`normal jobs done on ${secs(r.normalJobsDoneSeconds.on)} / off ${secs(r.normalJobsDoneSeconds.off)}`]
      : []),
    `completed on ${r.completed.on} / off ${r.completed.off} of ${r.of}` +
      ` (StartDeadlineExceeded ${r.startDeadlineExceeded.on} / ${r.startDeadlineExceeded.off},` +
      ` stuck ${r.stuck.on} / ${r.stuck.off}, lost ${r.lost.on} / ${r.lost.off}, ran twice ${r.ranTwice.on} / ${r.ranTwice.off})`,
    `provider queue at most ${r.peakProviderQueue.on} / ${r.peakProviderQueue.off}`,
  ];
  return [
    `  ${r.name} [${r.reading}]: ${parts.join("; ")}`,
    ...r.targets.map((t) => `    ${verdict(t)}`),
  ].join("\n");
}
