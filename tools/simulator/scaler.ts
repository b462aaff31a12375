// RunPod's two autoscalers for queue endpoints, as its endpoint settings page documents them
// (https://docs.runpod.io/serverless/endpoints/endpoint-configurations, "Auto-scaling type"):
// - QUEUE_DELAY: "Workers are added if requests spend more than X seconds in the queue", X being
//   the scaler value (default 4). Idle workers stop after the idle timeout.
// - REQUEST_COUNT: "Total workers formula: Math.ceil((requestsInQueue + requestsInProgress) / 4)",
//   4 being the scaler value. The page says the idle timeout "is only effective when using queue
//   delay scaling", so surplus idle workers stop at once.
// Both stay between workersMin and workersMax. A job sent with `policy.lowPriority` "won't trigger
// worker scaling" (https://docs.runpod.io/serverless/endpoints/send-requests, Execution policies):
// it is not counted here, though a worker that is up still takes it.
//
// What the pages leave open, decided here: QUEUE_DELAY adds one worker per job waiting past the
// threshold that no starting worker will take ("perOverdueJob", the default); an endpoint with no
// worker at all starts one as soon as a job that may trigger scaling is queued (else the first job
// of an idle endpoint would wait X seconds before its cold start even begins). RunPod's earlier
// pages can be read more sparingly: the first request adds a worker, later ones add workers only
// after waiting past the threshold, one at a time ("onePerDelay": at most one worker per threshold
// period). Results that depend on the reading are checked under both.

export type ScalerType = "QUEUE_DELAY" | "REQUEST_COUNT";

export interface ScalerInput {
  type: ScalerType;
  /** Seconds of queue delay (QUEUE_DELAY) or requests per worker (REQUEST_COUNT); at least 1. */
  value: number;
  workersMin: number;
  workersMax: number;
  /** Workers starting (cold start), idle and busy. */
  initializing: number;
  idle: number;
  running: number;
  /** Each queued job: simulated ms it has waited, and whether it may trigger scaling. */
  queued: ReadonlyArray<{ waitedMs: number; lowPriority: boolean }>;
  /** QUEUE_DELAY's reading (default perOverdueJob). */
  reading?: "perOverdueJob" | "onePerDelay";
  /** onePerDelay: simulated ms since the scaler last added a worker (absent: never). */
  sinceLastAddMs?: number;
}

export interface ScalerDecision {
  /** How many workers the endpoint should have now (initializing, idle and running). */
  target: number;
  /** Whether idle workers above the target stop at once (REQUEST_COUNT) or after the idle timeout. */
  stopSurplusNow: boolean;
  /** Simulated ms until the next queued job crosses the QUEUE_DELAY threshold, if one will. */
  recheckInMs?: number;
}

const clamp = (n: number, min: number, max: number) => Math.max(Math.min(n, max), Math.min(min, max));

export function scale(input: ScalerInput): ScalerDecision {
  const value = Math.max(1, input.value);
  const total = input.initializing + input.idle + input.running;
  const triggering = input.queued.filter((q) => !q.lowPriority);
  if (input.type === "REQUEST_COUNT") {
    const demand = triggering.length + input.running;
    return {
      target: clamp(Math.ceil(demand / value), input.workersMin, input.workersMax),
      stopSurplusNow: true,
    };
  }
  const thresholdMs = value * 1000;
  const overdue = triggering.filter((q) => q.waitedMs > thresholdMs).length;
  const fromZero = total === 0 && triggering.length > 0 ? 1 : 0;
  const waiting = triggering.filter((q) => q.waitedMs <= thresholdMs).map((q) => thresholdMs - q.waitedMs);
  let added = Math.max(fromZero, overdue - input.initializing);
  let next = waiting.length === 0 ? undefined : Math.min(...waiting) + 1;
  if (input.reading === "onePerDelay" && fromZero === 0) {
    // One more worker per threshold period while requests wait past it.
    const since = input.sinceLastAddMs ?? Infinity;
    added = overdue > input.initializing && since >= thresholdMs ? 1 : 0;
    if (overdue > input.initializing + added && Number.isFinite(since)) {
      const again = Math.max(1, thresholdMs - (added ? 0 : since)) + 1;
      next = next === undefined ? again : Math.min(next, again);
    }
  }
  return {
    target: clamp(total + added, input.workersMin, input.workersMax),
    stopSurplusNow: false,
    ...(next !== undefined && { recheckInMs: next }),
  };
}
