// The in-flight window of a GPU endpoint: how many of our jobs may be submitted to the provider
// and not yet finished. Jobs past it wait in Kubernetes, where fair share can still order them;
// a job sent to RunPod joins a first-in-first-out queue nobody can reorder.
//
// The window has two parts:
// - a ceiling from the endpoint's capacity as the provider reports it (or spec.maxInFlight), big
//   enough that the endpoint's workers stay busy and its autoscaler still sees the queue it reads
//   to scale to workersMax, small enough that no job sits long in the provider's queue;
// - a congestion limit under it that halves on a 429 and grows back by one per window of accepted
//   submissions (additive increase, multiplicative decrease) for as long as the backoff period
//   after the last 429 lasts; past it the window is the ceiling again. So the controller backs off
//   when the provider pushes back, and the window follows the ceiling whenever it rises (workersMax
//   raised, another scaler, capacity seen) instead of creeping up to it one slot at a time.
//
// No window is built before the endpoint's scaler is known (scalerOf): sized for another scaler,
// a REQUEST_COUNT endpoint would run a fraction of its workers.
//
// Pure functions over plain values: the caller keeps a WindowState per endpoint in memory and
// rebuilds it (initialWindow) after a restart or leader change.

/** RunPod's autoscalers (https://docs.runpod.io/serverless/endpoints/endpoint-configurations). */
export type Scaler =
  | { type: "QUEUE_DELAY"; /** seconds a job may wait before a worker is added */ seconds: number }
  | { type: "REQUEST_COUNT"; /** jobs (queued plus in progress) per worker */ perWorker: number };

/**
 * The scaler as the provider reports it (scalerType, scalerValue), or undefined when it is not
 * known: absent, a type this controller does not know, or a value that is not a positive number.
 * The caller tells it (a condition) and builds no window from a guess.
 */
export function scalerOf(type: unknown, value: unknown): Scaler | undefined {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) return undefined;
  if (type === "QUEUE_DELAY") return { type, seconds: value };
  if (type === "REQUEST_COUNT") return { type, perWorker: value };
  return undefined;
}

/**
 * How long after a 429 the congestion limit holds the window under its ceiling: three of RunPod's
 * 10-second rate-limit periods (https://docs.runpod.io/serverless/endpoints/send-requests#rate-limits).
 */
export const WINDOW_BACKOFF_MS = 30_000;

/**
 * What the provider reports of an endpoint: its settings and its /health queue counts. The running
 * workers never lower the ceiling: while fewer than workersMax run, the jobs past them are what
 * makes either scaler add the missing workers. They only say when no more need adding.
 */
export interface EndpointCapacity {
  workersMax: number;
  scaler: Scaler;
  /** /health jobs.inQueue and jobs.inProgress: every client's jobs, not only ours. */
  inQueue: number;
  inProgress: number;
  /** /health workers.idle plus workers.running; absent: not known (taken as fewer than workersMax). */
  workersUp?: number;
}

export interface CeilingInput {
  capacity: EndpointCapacity;
  /** Our jobs submitted and not finished on this endpoint. */
  ownInFlight: number;
  /** A job's typical run, seconds (the provider's executionTime, or an estimate): its queue wait excluded. */
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
 *   workersMax when workersMax jobs are at the provider and those past the running workers wait
 *   past the threshold. On top of workersMax, a headroom of the jobs that finish during one
 *   controller tick (workersMax × tick / jobSeconds, at least 1) keeps a freed worker from idling
 *   until the controller's next submission: those jobs wait about one tick at the provider. While
 *   fewer than workersMax workers are up, the headroom covers the longer of the tick and the
 *   scaler's threshold, so the job at the head of the provider's queue waits past the threshold
 *   (k workers take the queued jobs one every jobSeconds / k): else a scaler that adds one worker
 *   per threshold period (RunPod's earlier reading) stops short of workersMax once jobs are
 *   shorter than the threshold. Once workersMax are up nothing needs to wait that long.
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
    const scaling = capacity.workersUp === undefined || capacity.workersUp < workers;
    const span = scaling ? Math.max(input.tickSeconds, capacity.scaler.seconds) : input.tickSeconds;
    const headroom = input.jobSeconds > 0 ? (workers * span) / input.jobSeconds : workers;
    own = workers + Math.max(1, Math.ceil(headroom));
  }
  const foreign = Math.max(0, capacity.inQueue + capacity.inProgress - input.ownInFlight);
  return Math.max(1, own - foreign);
}

/** The congestion part of the window, kept per endpoint in memory. */
export interface WindowState {
  /** The congestion limit after a 429; fractional while it grows back. Infinity: none yet. */
  limit: number;
  /** No submission before this time (ms since the epoch): a 429's Retry-After. */
  notBefore: number;
  /** When the last 429 came (ms since the epoch); absent: none. */
  throttledAt?: number;
}

/** A fresh window (start, restart, new leader): the ceiling, whatever it is, no hold. */
export function initialWindow(): WindowState {
  return { limit: Infinity, notBefore: 0 };
}

/** Whether a 429 came within the backoff period: only then does the congestion limit count. */
const backingOff = (state: WindowState, nowMs: number, backoffMs: number): boolean =>
  state.throttledAt !== undefined && nowMs - state.throttledAt < backoffMs;

/**
 * The provider answered a submission 429: halve the window in force (at least 1), start the
 * backoff period, and hold submissions for Retry-After when it came with one.
 */
export function onThrottled(
  state: WindowState,
  ceil: number,
  nowMs: number,
  retryAfterMs?: number,
  backoffMs = WINDOW_BACKOFF_MS,
): WindowState {
  const inForce = Math.max(1, limitNow(state, ceil, nowMs, backoffMs));
  const hold = retryAfterMs !== undefined && retryAfterMs > 0 ? nowMs + retryAfterMs : 0;
  return {
    limit: Math.max(1, Math.floor(inForce / 2)),
    notBefore: Math.max(state.notBefore, hold),
    throttledAt: nowMs,
  };
}

/**
 * The provider accepted a submission: the limit grows by 1 / limit, so by one per window's worth
 * of accepted submissions, up to the ceiling.
 */
export function onAccepted(state: WindowState, ceil: number): WindowState {
  if (!Number.isFinite(state.limit)) return state;
  const cap = Math.max(1, ceil);
  return { ...state, limit: Math.min(cap, state.limit + 1 / Math.max(1, state.limit)) };
}

/** The limit in force: the ceiling, or under it the congestion limit while backing off after a 429. */
function limitNow(state: WindowState, ceil: number, nowMs: number, backoffMs: number): number {
  const c = Math.max(0, Math.floor(ceil));
  return backingOff(state, nowMs, backoffMs) ? Math.min(c, Math.floor(state.limit)) : c;
}

/**
 * The window now: the ceiling, or the smaller of it and the congestion limit within the backoff
 * period after a 429; 0 while held for a 429's Retry-After.
 */
export function windowSize(
  state: WindowState,
  ceil: number,
  nowMs: number,
  backoffMs = WINDOW_BACKOFF_MS,
): number {
  if (nowMs < state.notBefore) return 0;
  return limitNow(state, ceil, nowMs, backoffMs);
}

/** How many more jobs may be submitted now. */
export function freeSlots(
  state: WindowState,
  ceil: number,
  ownInFlight: number,
  nowMs: number,
  backoffMs = WINDOW_BACKOFF_MS,
): number {
  return Math.max(0, windowSize(state, ceil, nowMs, backoffMs) - ownInFlight);
}

/** What bounds the window places low-priority jobs may take on an endpoint. */
export interface LowPriorityInput {
  /** /health workers.idle and workers.running: the workers the endpoint has up now. */
  workersIdle: number;
  workersRunning: number;
  /** Our normal and high priority jobs submitted and not finished on this endpoint. */
  normalInFlight: number;
  /** Other clients' jobs at the endpoint (what /health counts beyond our own). */
  foreign: number;
}

/**
 * How many low-priority jobs of ours the endpoint may hold at once. RunPod sends them with
 * policy.lowPriority, which "won't trigger worker scaling"
 * (https://docs.runpod.io/serverless/endpoints/send-requests#execution-policies): a low job that
 * no worker up now will take waits in the provider's queue, first in first out, ahead of the normal
 * jobs sent after it, and holds a window place that a normal job would have used to make the
 * endpoint scale. So low jobs take only workers that are up and not taken by our normal jobs or
 * other clients' jobs: on an endpoint scaled to zero they wait in Kubernetes (Queued,
 * LowPriority), and a normal job sent later finds no low job queued ahead of it at the provider.
 */
export function lowPriorityRoom(input: LowPriorityInput): number {
  const up = Math.max(0, Math.floor(input.workersIdle)) + Math.max(0, Math.floor(input.workersRunning));
  return Math.max(0, up - Math.max(0, input.normalInFlight) - Math.max(0, input.foreign));
}
