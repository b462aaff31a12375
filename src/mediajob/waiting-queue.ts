// One account's jobs waiting for a slot of one endpoint, kept in the order slots go to them:
// priority (high, normal, low), then age, then arrival. A grant round reads only the front of each
// account's queue (grant-policy.ts), so a backlog of thousands costs a round what its few free
// slots need, not a scan and a sort of the whole backlog per slot freed.
import { PRIORITY_RANK, type WaitingJob } from "./fair-share.js";

interface Entry {
  job: WaitingJob;
  rank: number;
  /** Arrival: among jobs of one priority created in the same instant, the first to come goes first. */
  seq: number;
}

/** Whether `a` gets a slot before `b`. */
const before = (a: Entry, b: Entry): boolean =>
  a.rank !== b.rank
    ? a.rank < b.rank
    : a.job.createdAt !== b.job.createdAt
      ? a.job.createdAt < b.job.createdAt
      : a.seq < b.seq;

const entryOf = (job: WaitingJob, seq: number): Entry => ({
  job,
  rank: PRIORITY_RANK[job.priority ?? "normal"],
  seq,
});

export class WaitingQueue implements Iterable<WaitingJob> {
  private readonly entries: Entry[] = [];
  private readonly byId = new Map<string, Entry>();
  private arrivals = 0;

  /** The job arrives (again: it leaves its place first). */
  add(job: WaitingJob): void {
    this.delete(job.id);
    const entry = entryOf(job, this.arrivals++);
    this.entries.splice(this.indexOf(entry), 0, entry);
    this.byId.set(job.id, entry);
  }

  delete(id: string): boolean {
    const entry = this.byId.get(id);
    if (!entry) return false;
    this.byId.delete(id);
    // Entries are unique in the order, so the first not before this one is this one.
    this.entries.splice(this.indexOf(entry), 1);
    return true;
  }

  get size(): number {
    return this.entries.length;
  }

  *[Symbol.iterator](): Iterator<WaitingJob> {
    for (const e of this.entries) yield e.job;
  }

  /** The queue in order as if `job` arrived now, read lazily: nothing is copied. */
  *withArriving(job: WaitingJob): Generator<WaitingJob> {
    const arriving = entryOf(job, Number.POSITIVE_INFINITY);
    let placed = false;
    for (const e of this.entries) {
      if (!placed && before(arriving, e)) {
        placed = true;
        yield job;
      }
      yield e.job;
    }
    if (!placed) yield job;
  }

  /** The first index whose entry does not go before `entry`: its place, whether it is there or goes there. */
  private indexOf(entry: Entry): number {
    let [lo, hi] = [0, this.entries.length];
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (before(this.entries[mid]!, entry)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
