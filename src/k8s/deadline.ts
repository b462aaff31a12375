// The deadline every Kubernetes API call carries, and the error of one that missed it. Without
// client-node: the JSON path (./http.ts) uses it in every container; ./transport.ts puts the same
// deadline on client-node's typed path.

/** The deadline of a Kubernetes API call when neither the client nor the call names one. */
export const DEFAULT_KUBE_TIMEOUT_MS = 30_000;

/** Per-call limits, for calls whose deadline differs from the client's (e.g. a lease renewal's). */
export interface CallOptions {
  /** This call's deadline in milliseconds, instead of the client's default. */
  timeoutMs?: number;
  /** Aborts the call early (e.g. on shutdown); the call then fails with the signal's reason. */
  signal?: AbortSignal;
}

/** A call that got no complete answer before its deadline. */
export class KubeTimeoutError extends Error {
  override readonly name = "KubeTimeoutError";
  readonly code = "ETIMEDOUT";
  constructor(
    readonly method: string,
    readonly path: string,
    readonly timeoutMs: number | undefined,
  ) {
    super(
      `${method} ${path}: no complete answer from the Kubernetes API ` +
        (timeoutMs === undefined ? "before the caller's deadline" : `within ${timeoutMs} ms`),
    );
  }
}

/** The deadline each signal of ours carries, to name it in the error. */
const deadlines = new WeakMap<AbortSignal, { timeoutMs: number; timer: AbortSignal }>();

/** A signal that fires at the deadline, or earlier when the caller's signal fires. */
export function deadlineSignal(timeoutMs: number, signal?: AbortSignal): AbortSignal {
  const timer = AbortSignal.timeout(timeoutMs);
  const combined = signal ? AbortSignal.any([signal, timer]) : timer;
  deadlines.set(combined, { timeoutMs, timer });
  return combined;
}

/** The deadline a signal of deadlineSignal() carries, and the timer's own signal. */
export const deadlineOf = (signal: AbortSignal) => deadlines.get(signal);
