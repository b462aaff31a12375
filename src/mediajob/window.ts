// The in-flight window of a GPU endpoint: how many of our jobs may be submitted to the provider
// and not yet finished. Jobs past it wait in Kubernetes, where fair share can still order them;
// a job sent to RunPod joins a first-in-first-out queue nobody can reorder.
//
// The window has two parts:
// - a ceiling from the endpoint's capacity as the provider reports it (or spec.maxInFlight), big
//   enough that the endpoint's workers stay busy and its autoscaler still sees the queue it reads
//   to scale to workersMax, small enough that no job sits long in the provider's queue;
// - a congestion limit under it that halves on a 429 and grows back by one per window of accepted
//   submissions (additive increase, multiplicative decrease), so the controller backs off when the
//   provider pushes back and returns to full speed when it stops.
//
// Pure functions over plain values: the caller keeps a WindowState per endpoint in memory and
// rebuilds it (initialWindow) after a restart or leader change.

/** RunPod's autoscalers (https://docs.runpod.io/serverless/endpoints/endpoint-configurations). */
type Scaler =
  | { type: "QUEUE_DELAY"; /** seconds a job may wait before a worker is added */ seconds: number }
  | { type: "REQUEST_COUNT"; /** jobs (queued plus in progress) per worker */ perWorker: number };

/**
 * What the provider reports of an endpoint: its settings and its /health queue counts. The running
 * workers are left out on purpose: while fewer than workersMax run, the jobs past them are what
 * makes either scaler add the missing workers, so they must not lower the ceiling.
 */
export interface EndpointCapacity {
  workersMax: number;
  scaler: Scaler;
  /** /health jobs.inQueue and jobs.inProgress: every client's jobs, not only ours. */
  inQueue: number;
  inProgress: number;
}

export interface CeilingInput {
  capacity: EndpointCapacity;
  /** Our jobs submitted and not finished on this endpoint. */
  ownInFlight: number;
  /** A job's typical run, seconds (the provider's executionTime, or an estimate). */
  jobSeconds: number;
  /** How often, at worst, the controller notices a finished job and submits the next, seconds. */
  tickSeconds: number;
  /** GpuEndpoint spec.maxInFlight: replaces the capacity rule when set. */
  maxInFlight?: number;
}

/**
 * The most jobs the endpoint should hold for us, from its capacity:
 *
 * - REQUEST_COUNT runs ceil((inQueue + inProgress) / perWorker) workers, so workersMax workers
 *   need workersMax × perWorker jobs at the provider: that many is the ceiling. The queue this
 *   leaves is the scaler's price: each worker has perWorker − 1 jobs waiting behind its own.
 * - QUEUE_DELAY adds a worker for a job that waits longer than its threshold, so a burst scales to
 *   workersMax when workersMax jobs are at the provider and those past the running workers wait.
 *   On top of workersMax, a headroom of the jobs that finish during one controller tick
 *   (workersMax × tick / jobSeconds, at least 1) keeps a freed worker from idling until the
 *   controller's next submission. Those jobs wait about one tick at the provider, no longer.
 *
 * Other clients' jobs at the endpoint (what /health counts beyond our own in flight) use the same
 * workers, so they come off the ceiling. workersMax = 0 runs nothing: the ceiling is 0 and jobs
 * wait in Kubernetes, not at the provider. Otherwise it is at least 1, so an endpoint shared with
 * a flood of foreign jobs still moves.
 */
export function ceiling(input: CeilingInput): number {
  const { capacity, maxInFlight } = input;
  if (maxInFlight !== undefined) return Math.max(0, Math.floor(maxInFlight));
  const workers = Math.max(0, Math.floor(capacity.workersMax));
  if (workers === 0) return 0;
  let own: number;
  if (capacity.scaler.type === "REQUEST_COUNT") {
    own = workers * Math.max(1, Math.floor(capacity.scaler.perWorker));
  } else {
    const perTick = input.jobSeconds > 0 ? (workers * input.tickSeconds) / input.jobSeconds : workers;
    own = workers + Math.max(1, Math.ceil(perTick));
  }
  const foreign = Math.max(0, capacity.inQueue + capacity.inProgress - input.ownInFlight);
  return Math.max(1, own - foreign);
}

/** The congestion part of the window, kept per endpoint in memory. */
export interface WindowState {
  /** The congestion limit; fractional while it grows back. */
  limit: number;
  /** No submission before this time (ms since the epoch): a 429's Retry-After. */
  notBefore: number;
}

/** A fresh window (start, restart, new leader): the full ceiling, no hold. */
export function initialWindow(ceil: number): WindowState {
  return { limit: Math.max(1, ceil), notBefore: 0 };
}

/**
 * The provider answered a submission 429: halve the window in force (at least 1) and hold
 * submissions for Retry-After when it came with one.
 */
export function onThrottled(
  state: WindowState,
  ceil: number,
  nowMs: number,
  retryAfterMs?: number,
): WindowState {
  const inForce = Math.min(state.limit, Math.max(1, ceil));
  const hold = retryAfterMs !== undefined && retryAfterMs > 0 ? nowMs + retryAfterMs : 0;
  return { limit: Math.max(1, Math.floor(inForce / 2)), notBefore: Math.max(state.notBefore, hold) };
}

/**
 * The provider accepted a submission: the limit grows by 1 / limit, so by one per window's worth
 * of accepted submissions, up to the ceiling.
 */
export function onAccepted(state: WindowState, ceil: number): WindowState {
  const cap = Math.max(1, ceil);
  return { ...state, limit: Math.min(cap, state.limit + 1 / Math.max(1, state.limit)) };
}

/** The window now: the smaller of the ceiling and the congestion limit; 0 while held after a 429. */
export function windowSize(state: WindowState, ceil: number, nowMs: number): number {
  if (nowMs < state.notBefore) return 0;
  return Math.max(0, Math.min(Math.floor(ceil), Math.floor(state.limit)));
}

/** How many more jobs may be submitted now. */
export function freeSlots(state: WindowState, ceil: number, ownInFlight: number, nowMs: number): number {
  return Math.max(0, windowSize(state, ceil, nowMs) - ownInFlight);
}
