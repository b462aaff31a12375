// What the GPU provider bills: worker time, not job time. RunPod bills a serverless worker "from
// when a worker starts until it fully stops, rounded up to the nearest second": its start (cold
// start), the jobs it executes and the idle timeout after the last one; active (min) workers run,
// and are billed, around the clock (https://docs.runpod.io/serverless/pricing). The ledger keeps
// one run per worker start, from spawn to termination, in simulated ms (Clock.simNow), with the
// per-second price of the endpoint's GPU type when the worker started. Money is integer micro-units
// of USD throughout; the billing history route (provider-billing.ts) converts to USD only in its
// answer.

/** One worker's life, spawn to stop: what the provider bills as one run. */
export interface WorkerRun {
  workerId: string;
  endpointId: string;
  /** The GPU type the run was priced at (the first of the endpoint's pools). */
  gpuType: string;
  gpuCount: number;
  /** Price of one second of this run (all its GPUs), micro-units of USD. */
  pricePerSecondMicros: number;
  /** Simulated ms (Clock.simNow) when the worker started (its cold start began). */
  startedAt: number;
  /** Simulated ms when it fully stopped; undefined while it runs. */
  stoppedAt?: number;
  /** Whether the worker was one of the endpoint's active (min) workers when it started. */
  active: boolean;
  /** Jobs it started. */
  jobs: number;
}

/**
 * Per-second prices of the GPU pools RunPod's endpoint configuration names (gpuIds / gpu.pools),
 * micro-USD per second of one GPU on a flex worker. Defaults of the simulator, of the order of
 * https://www.runpod.io/pricing (serverless, flex); a test or a benchmark sets its own.
 */
export const DEFAULT_GPU_PRICES_MICROS: Readonly<Record<string, number>> = {
  AMPERE_16: 160,
  AMPERE_24: 190,
  ADA_24: 310,
  AMPERE_48: 340,
  ADA_48_PRO: 530,
  AMPERE_80: 760,
  ADA_80_PRO: 1160,
};
/** A pool the table does not know is priced as the smallest GPU: never free. */
const FALLBACK_GPU = "AMPERE_16";

/** The GPU type and per-second price of a worker started under this endpoint configuration. */
export function priceFor(
  settings: Record<string, unknown>,
  prices: Readonly<Record<string, number>>,
): { gpuType: string; gpuCount: number; pricePerSecondMicros: number } {
  const pools = typeof settings.gpuIds === "string" ? settings.gpuIds.split(",").map((s) => s.trim()) : [];
  // RunPod takes the pools in order of preference; the simulator always gets its first choice.
  const gpuType = pools.find((p) => p !== "") ?? FALLBACK_GPU;
  const gpuCount =
    typeof settings.gpuCount === "number" && Number.isInteger(settings.gpuCount) && settings.gpuCount > 0
      ? settings.gpuCount
      : 1;
  const unit = prices[gpuType] ?? prices[FALLBACK_GPU] ?? DEFAULT_GPU_PRICES_MICROS[FALLBACK_GPU] ?? 0;
  return { gpuType, gpuCount, pricePerSecondMicros: unit * gpuCount };
}

/**
 * Billed seconds of a run from its start to `t` (simulated ms), rounded up: the whole run's
 * seconds when `t` is its stop. Rounding is per run, as RunPod's "rounded up to the nearest second"
 * applies to a worker's time, not to each job on it.
 */
function billedSecondsUntil(run: WorkerRun, t: number): number {
  const end = Math.min(t, run.stoppedAt ?? t);
  return end <= run.startedAt ? 0 : Math.ceil((end - run.startedAt) / 1000);
}

/** Billed seconds of a run up to `now` (a running worker: so far). */
export function billedSeconds(run: WorkerRun, now: number): number {
  return billedSecondsUntil(run, run.stoppedAt ?? now);
}

/**
 * The billed seconds of a run that fall in [from, to) (simulated ms). The run's seconds are cut
 * at bucket edges by the rounded-up count up to each edge, so the pieces of one run always add up
 * to its whole billed seconds and the round-up lands in the bucket where the run's last part is.
 */
export function billedSecondsIn(run: WorkerRun, from: number, to: number, now: number): number {
  const stop = run.stoppedAt ?? now;
  if (to <= run.startedAt || from >= stop) return 0;
  const lo = Math.max(from, run.startedAt);
  const hi = Math.min(to, stop);
  return billedSecondsUntil(run, hi) - billedSecondsUntil(run, lo);
}

export class WorkerLedger {
  readonly #runs: WorkerRun[] = [];
  readonly #open = new Map<string, WorkerRun>();

  start(run: Omit<WorkerRun, "stoppedAt" | "jobs">): void {
    const r: WorkerRun = { ...run, jobs: 0 };
    this.#runs.push(r);
    this.#open.set(run.workerId, r);
  }

  jobStarted(workerId: string): void {
    const r = this.#open.get(workerId);
    if (r !== undefined) r.jobs++;
  }

  stop(workerId: string, at: number): void {
    const r = this.#open.get(workerId);
    if (r === undefined) return;
    r.stoppedAt = Math.max(at, r.startedAt);
    this.#open.delete(workerId);
  }

  /** Every run, oldest first (copies); `endpointId` narrows to one endpoint. */
  runs(endpointId?: string): WorkerRun[] {
    return this.#runs
      .filter((r) => endpointId === undefined || r.endpointId === endpointId)
      .map((r) => ({ ...r }));
  }

  /** The endpoints that had a worker overlapping [from, to). */
  endpointsIn(from: number, to: number, now: number): string[] {
    const ids = new Set<string>();
    for (const r of this.#runs) if (r.startedAt < to && (r.stoppedAt ?? now) > from) ids.add(r.endpointId);
    return [...ids].sort();
  }

  /** One endpoint's billed seconds and amount in [from, to), simulated ms. */
  billedIn(endpointId: string, from: number, to: number, now: number): { seconds: number; micros: number } {
    let seconds = 0;
    let micros = 0;
    for (const r of this.#runs) {
      if (r.endpointId !== endpointId) continue;
      const s = billedSecondsIn(r, from, to, now);
      seconds += s;
      micros += s * r.pricePerSecondMicros;
    }
    return { seconds, micros };
  }
}
