// A work queue of keys with client-go's semantics:
//  - a key added many times before it is processed is processed once (the `dirty` set);
//  - a key is never processed by two workers at once (the `processing` set): added while being
//    processed, it is processed again afterwards;
//  - failures requeue with per-key exponential backoff; success forgets the backoff;
//  - requeue-after keeps only the earliest time per key; the waiting keys share one timer, set
//    for the earliest of them (client-go's delaying queue keeps a heap and one wait loop), so a
//    key waiting out a Processing job's timeout costs a map entry and a heap slot, not a timer;
//  - a periodic resync adds with addUnlessBackingOff: a key waiting out its failure backoff keeps
//    waiting (a tick must not turn exponential backoff into a retry every tick);
//  - a reconcile returns controller-runtime's `(Result, error)` and the queue acts on it as
//    controller-runtime's reconcileHandler does (pkg/internal/controller/controller.go): an error
//    requeues with backoff, a terminal error is not retried (its key's backoff is forgotten), a
//    requeue-after schedules the key; a thrown exception is an error. Each reconcile's outcome is
//    told to onDone (src/runtime/reconcile-metrics.ts counts them under controller-runtime's names).
// One piece: the dirty and processing sets, the per-key backoff and the one timer are a single
// state machine; each rule above reads and changes the others.

/** controller-runtime's reconcile.Result. */
export interface ReconcileResult {
  /** Reconcile this key again after this many milliseconds (polling an external system). */
  requeueAfterMs?: number;
}

/**
 * A reconcile's error. Terminal: retrying will not mend it (a user's object that asks the
 * impossible; its cause is in the object's conditions), so the key is not retried, as
 * controller-runtime's reconcile.TerminalError. Otherwise retried with backoff.
 */
export interface ReconcileError {
  message: string;
  terminal: boolean;
}

/** What a reconcile returns: controller-runtime's `(Result, error)`. */
interface Reconciled {
  result?: ReconcileResult;
  error?: ReconcileError;
}

export type Reconciler = (key: string) => Promise<Reconciled | void>;

/**
 * What became of one reconcile: controller-runtime's `result` label (success, error,
 * requeue_after), with a terminal error told apart from one that is retried.
 */
export type ReconcileOutcome = "success" | "requeue_after" | "error" | "terminal_error";

export interface WorkQueueOptions {
  baseDelayMs?: number;
  maxDelayMs?: number;
  /**
   * A reconcile failed and is retried in retryInMs: `err` is the ReconcileError it returned, or the
   * exception it threw.
   */
  onError?: (key: string, err: unknown, retryInMs: number) => void;
  /** A reconcile ended on a terminal error: not retried. */
  onTerminalError?: (key: string, err: ReconcileError) => void;
  onDone?: (key: string, durationMs: number, outcome: ReconcileOutcome) => void;
  /** Told what client-go's workqueue metrics count (src/runtime/workqueue-metrics.ts). */
  metrics?: WorkQueueMetricsSink;
}

/** client-go's workqueue MetricsProvider, as calls: adds, time waiting, time worked, retries. */
export interface WorkQueueMetricsSink {
  added(): void;
  /** A key handed to a worker, after waiting this long since it was added. */
  queued(seconds: number): void;
  /** A worker finished a key, after working on it this long. */
  worked(seconds: number): void;
  retried(): void;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private head = 0;
  /**
   * Keys to process before the queue (addUrgent): a job granted a slot of its endpoint's window
   * must not wait behind a tick's worth of waiting jobs. A key may then also sit in `queue`; the
   * entry taken second is stale (no longer dirty) and skipped.
   */
  private readonly urgent: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  /** When each waiting key is due (Date.now() ms), and the same as a min-heap by time. */
  private readonly due = new Map<string, number>();
  private readonly heap = new DueHeap();
  private timer?: NodeJS.Timeout;
  private timerAt = Infinity;
  /** When each waiting key was added, and when each key in processing was handed out (metrics). */
  private readonly addedAt = new Map<string, number>();
  private readonly startedAt = new Map<string, number>();
  private started = false;
  private waiters: Array<() => void> = [];
  private shuttingDown = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(private readonly opts: WorkQueueOptions = {}) {
    this.baseDelayMs = opts.baseDelayMs ?? 5;
    this.maxDelayMs = opts.maxDelayMs ?? 5 * 60_000;
  }

  get length(): number {
    return this.queue.length - this.head + this.urgent.length;
  }

  get inFlight(): number {
    return this.processing.size;
  }

  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.opts.metrics) {
      this.opts.metrics.added();
      this.addedAt.set(key, performance.now());
    }
    if (this.processing.has(key)) return; // picked up again by done()
    this.queue.push(key);
    this.wake();
  }

  /** add(), ahead of every key already queued (a key being processed runs again right after). */
  addUrgent(key: string): void {
    if (this.shuttingDown) return;
    this.add(key);
    if (this.processing.has(key) || this.urgent.includes(key)) return;
    this.urgent.push(key);
    this.wake();
  }

  /** Whether the key failed and waits for its backoff retry. */
  isBackingOff(key: string): boolean {
    return (this.failures.get(key) ?? 0) > 0 && this.due.has(key);
  }

  /** add(), except for a key waiting out its backoff: the periodic resync's add. */
  addUnlessBackingOff(key: string): void {
    if (!this.isBackingOff(key)) this.add(key);
  }

  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) return this.add(key);
    const at = Date.now() + delayMs;
    const existing = this.due.get(key);
    if (existing !== undefined && existing <= at) return;
    // An earlier time for a waiting key: its older heap entry is skipped when it comes up.
    this.due.set(key, at);
    this.heap.push(at, key);
    this.schedule();
  }

  /** One timer, for the earliest waiting key. */
  private schedule(): void {
    const next = this.heap.peekAt();
    if (next === undefined || next >= this.timerAt) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = next;
    // setTimeout takes at most 2^31-1 ms; a later key is looked at again then.
    this.timer = setTimeout(() => this.fire(), Math.min(2 ** 31 - 1, Math.max(0, next - Date.now())));
    this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = Date.now();
    for (let next = this.heap.peekAt(); next !== undefined && next <= now; next = this.heap.peekAt()) {
      const [at, key] = this.heap.pop()!;
      if (this.due.get(key) !== at) continue; // superseded by an earlier time, or already added
      this.due.delete(key);
      this.add(key);
    }
    if (!this.shuttingDown) this.schedule();
  }

  /** Requeues with the key's next backoff delay and returns that delay. */
  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    this.opts.metrics?.retried();
    const delay = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** n);
    this.addAfter(key, delay);
    return delay;
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  failuresOf(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** The next key to process, or undefined once shut down (queued keys are not drained). */
  async get(): Promise<string | undefined> {
    let key: string | undefined;
    for (;;) {
      if (this.shuttingDown) return undefined;
      key = this.next();
      if (key !== undefined) break;
      await new Promise<void>((r) => this.waiters.push(r));
    }
    this.dirty.delete(key);
    this.processing.add(key);
    if (this.opts.metrics) {
      const now = performance.now();
      this.opts.metrics.queued((now - (this.addedAt.get(key) ?? now)) / 1000);
      this.addedAt.delete(key);
      this.startedAt.set(key, now);
    }
    return key;
  }

  /** The next key to hand out, urgent ones first; entries of keys already taken are skipped. */
  private next(): string | undefined {
    const takeable = (k: string) => this.dirty.has(k) && !this.processing.has(k);
    while (this.urgent.length > 0) {
      const k = this.urgent.shift()!;
      if (takeable(k)) return k;
    }
    while (this.head < this.queue.length) {
      const k = this.queue[this.head++]!;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      if (takeable(k)) return k;
    }
    return undefined;
  }

  done(key: string): void {
    this.processing.delete(key);
    const started = this.startedAt.get(key);
    if (started !== undefined) {
      this.startedAt.delete(key);
      this.opts.metrics?.worked((performance.now() - started) / 1000);
    }
    if (this.dirty.has(key)) {
      this.queue.push(key);
      this.wake();
    }
  }

  /**
   * Runs `concurrency` workers until shutdown. Each key goes through `reconcile`, whose answer
   * decides what becomes of the key (outcome()).
   */
  async run(concurrency: number, reconcile: Reconciler): Promise<void> {
    this.started = true;
    const worker = async () => {
      for (;;) {
        const key = await this.get();
        if (key === undefined) return;
        const started = Date.now();
        let outcome: ReconcileOutcome;
        try {
          const answer = await reconcile(key);
          outcome = this.outcome(key, answer?.result, answer?.error);
        } catch (err) {
          outcome = this.retry(key, err);
        } finally {
          this.done(key);
        }
        this.opts.onDone?.(key, Date.now() - started, outcome);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  }

  /**
   * controller-runtime's reconcileHandler: an error is retried with backoff; a terminal error and
   * success forget the key's backoff; a requeue-after schedules the key. Unlike controller-runtime,
   * which ignores the Result beside any error, a terminal error keeps its requeue-after: it ends
   * the retries, not the object's timers (a finished job's expiry).
   */
  private outcome(key: string, result?: ReconcileResult, error?: ReconcileError): ReconcileOutcome {
    if (error && !error.terminal) return this.retry(key, error);
    this.forget(key);
    if (result?.requeueAfterMs !== undefined) this.addAfter(key, result.requeueAfterMs);
    if (error) {
      this.opts.onTerminalError?.(key, error);
      return "terminal_error";
    }
    return result?.requeueAfterMs !== undefined ? "requeue_after" : "success";
  }

  private retry(key: string, err: unknown): ReconcileOutcome {
    const delay = this.addRateLimited(key);
    this.opts.onError?.(key, err, delay);
    return "error";
  }

  /**
   * client-go's depth (keys added and not yet handed out), and its unfinished work: the seconds
   * spent so far on the keys in processing, summed and the longest. Undefined while no worker runs
   * (a replica that does not lead fills the queue from its cache but works on nothing).
   */
  gauges(
    now = performance.now(),
  ): { depth: number; unfinishedSeconds: number; longestSeconds: number } | undefined {
    if (!this.started || this.shuttingDown) return undefined;
    let unfinished = 0;
    let longest = 0;
    for (const at of this.startedAt.values()) {
      const s = (now - at) / 1000;
      unfinished += s;
      longest = Math.max(longest, s);
    }
    return { depth: this.dirty.size, unfinishedSeconds: unfinished, longestSeconds: longest };
  }

  /** Stops handing out keys; workers finish their current key and return. */
  shutdown(): void {
    this.shuttingDown = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.due.clear();
    this.heap.clear();
    this.wake();
  }
}

/** A binary min-heap of (time, key), in two parallel arrays (no object per entry). */
class DueHeap {
  private readonly at: number[] = [];
  private readonly keys: string[] = [];

  peekAt(): number | undefined {
    return this.at[0];
  }

  push(at: number, key: string): void {
    let i = this.at.length;
    this.at.push(at);
    this.keys.push(key);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.at[parent]! <= at) break;
      this.at[i] = this.at[parent]!;
      this.keys[i] = this.keys[parent]!;
      i = parent;
    }
    this.at[i] = at;
    this.keys[i] = key;
  }

  pop(): [number, string] | undefined {
    if (!this.at.length) return undefined;
    const top: [number, string] = [this.at[0]!, this.keys[0]!];
    const lastAt = this.at.pop()!;
    const lastKey = this.keys.pop()!;
    const n = this.at.length;
    if (n) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const c = l + 1 < n && this.at[l + 1]! < this.at[l]! ? l + 1 : l;
        if (this.at[c]! >= lastAt) break;
        this.at[i] = this.at[c]!;
        this.keys[i] = this.keys[c]!;
        i = c;
      }
      this.at[i] = lastAt;
      this.keys[i] = lastKey;
    }
    return top;
  }

  clear(): void {
    this.at.length = 0;
    this.keys.length = 0;
  }
}
