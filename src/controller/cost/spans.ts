// The execution spans the cost loop allocates by: each attempt's [end − executionTime, end) on its
// endpoint, for its account, taken from every MediaJob the informer reads before the cache trims a
// finished job (manager.ts), and kept after the job is deleted until its time is settled: a job
// removed by its TTL was still billed by the provider. Compact, as every cached job may have some:
// per job one flat array of numbers (account and endpoint as indexes into shared lists).
import type { MediaJob } from "../../crds/mediajob.js";
import type { ExecutionSpan } from "../../billing/cost-allocation.js";

/** Numbers per span in a job's array: account index, endpoint index, start ms, end ms. */
const FIELDS = 4;

export class CostSpans {
  /** By job uid: its attempts' spans, FIELDS numbers each. */
  readonly #byJob = new Map<string, number[]>();
  readonly #names: string[] = [];
  readonly #index = new Map<string, number>();

  #id(s: string): number {
    let i = this.#index.get(s);
    if (i === undefined) {
      i = this.#names.push(s) - 1;
      this.#index.set(s, i);
    }
    return i;
  }

  /** A job as the apiserver sent it: its ended attempts' spans replace those kept for it. */
  observe(job: MediaJob): void {
    const uid = job.metadata.uid;
    const usage = job.status?.usage;
    if (uid === undefined || usage === undefined) return;
    const packed: number[] = [];
    for (const a of usage.attempts) {
      const end = Date.parse(a.endedAt);
      const ms = a.executionTimeMs ?? 0;
      if (a.endpointId === undefined || ms <= 0 || Number.isNaN(end)) continue;
      // A job that bills no account still ran on the worker: its share is nobody's (unallocated).
      packed.push(this.#id(usage.account ?? ""), this.#id(a.endpointId), end - ms, end);
    }
    if (packed.length > 0) this.#byJob.set(uid, packed);
  }

  /** Forgets the jobs whose spans all ended before `ms` (settled for every account). */
  prune(ms: number): void {
    for (const [uid, packed] of this.#byJob) {
      let last = -Infinity;
      for (let i = 3; i < packed.length; i += FIELDS) last = Math.max(last, packed[i]!);
      if (last < ms) this.#byJob.delete(uid);
    }
  }

  list(): ExecutionSpan[] {
    const out: ExecutionSpan[] = [];
    for (const packed of this.#byJob.values())
      for (let i = 0; i < packed.length; i += FIELDS)
        out.push({
          account: this.#names[packed[i]!]!,
          endpointId: this.#names[packed[i + 1]!]!,
          startMs: packed[i + 2]!,
          endMs: packed[i + 3]!,
        });
    return out;
  }
}
