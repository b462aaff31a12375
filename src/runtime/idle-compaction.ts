// Gives memory back once a burst of work is over. Listing the cache and the pass after it leave
// behind megabytes of garbage per 10,000 jobs (the list pages as text and parsed, the objects the
// schema copies, each reconcile's temporaries), mixed on the same heap pages as the objects that
// stay cached. V8 returns such pages to the system only in a memory-reducing collection: an
// ordinary one keeps the freed pages in a pool for reuse, resident. Its memory reducer is meant to
// run that collection once a process goes idle, but in Node 24 it scores an idle process's
// allocation rate as high (the embedder's rate, which is 0, counts as high), so it waits for its
// watchdog, about 100 s after the last full collection, and reduces once. Measured with
// `--trace-memory-reducer --trace-mutator-utilization` on 10,000 cached Processing jobs.
//
// So the controller asks for that collection itself: when at least `minWork` objects were received
// or reconciled since the last one and nothing has happened for `idleMs`, at most once per
// `minIntervalMs`. It costs a pause of tens of milliseconds while nothing waits. The collector is
// the runtime's `gc`, which the image exposes (`--expose-gc`, Dockerfile); without it nothing runs.

export interface IdleCompactionPolicy {
  /** Objects received and reconciles finished since the last collection that make one worth it. */
  minWork: number;
  /** Quiet time (no work noted) before collecting. */
  idleMs: number;
  /** At most one collection per this long. */
  minIntervalMs: number;
}

const DEFAULT_IDLE_COMPACTION: IdleCompactionPolicy = {
  minWork: 1000,
  idleMs: 5_000,
  minIntervalMs: 60_000,
};

export class IdleCompaction {
  private work = 0;
  private lastWorkAt: number;
  private lastCollectionAt = -Infinity;
  /** Collections run so far. */
  collections = 0;

  constructor(
    private readonly collect: (() => void) | undefined,
    private readonly policy: IdleCompactionPolicy = DEFAULT_IDLE_COMPACTION,
    private readonly now: () => number = Date.now,
  ) {
    this.lastWorkAt = now();
  }

  get enabled(): boolean {
    return this.collect !== undefined;
  }

  /** `units` objects received or reconciled. */
  noteWork(units = 1): void {
    this.work += units;
    this.lastWorkAt = this.now();
  }

  /** Collects if a burst of work is over (see the policy); returns whether it did. */
  check(): boolean {
    if (!this.collect || this.work < this.policy.minWork) return false;
    const now = this.now();
    if (now - this.lastWorkAt < this.policy.idleMs) return false;
    if (now - this.lastCollectionAt < this.policy.minIntervalMs) return false;
    this.work = 0;
    this.lastCollectionAt = now;
    this.collections++;
    this.collect();
    return true;
  }
}

type ExposedGc = (options?: {
  type?: "major" | "minor";
  execution?: "sync" | "async";
  flavor?: string;
}) => void;

/**
 * The runtime's memory-reducing collection (V8's "last resort" flavour: full collections that
 * compact the heap and release pooled pages), or undefined when Node runs without `--expose-gc`.
 */
export function runtimeCollector(): (() => void) | undefined {
  const gc = (globalThis as { gc?: ExposedGc }).gc;
  if (typeof gc !== "function") return undefined;
  return () => gc({ type: "major", execution: "sync", flavor: "last-resort" });
}
