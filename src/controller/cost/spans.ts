// The execution spans the cost loop allocates by: each attempt's [end − executionTime, end) on its
// endpoint, for its account, taken from every MediaJob the informer reads before the cache trims a
// finished job (manager.ts), and kept after the job is deleted until its time is settled: a job
// removed by its TTL was still billed by the provider. Compact: numbers and shared strings.
import type { MediaJob } from "../../crds/mediajob.js";
import type { ExecutionSpan } from "../../billing/cost-allocation.js";

export class CostSpans {
  /** By job uid: its attempts' spans. */
  readonly #byJob = new Map<string, ExecutionSpan[]>();
  readonly #strings = new Map<string, string>();

  #intern(s: string): string {
    let v = this.#strings.get(s);
    if (v === undefined) this.#strings.set(s, (v = s));
    return v;
  }

  /** A job as the apiserver sent it: its ended attempts' spans replace those kept for it. */
  observe(job: MediaJob): void {
    const uid = job.metadata.uid;
    const usage = job.status?.usage;
    if (uid === undefined || usage === undefined) return;
    const spans: ExecutionSpan[] = [];
    for (const a of usage.attempts) {
      const end = Date.parse(a.endedAt);
      const ms = a.executionTimeMs ?? 0;
      if (a.endpointId === undefined || ms <= 0 || Number.isNaN(end)) continue;
      spans.push({
        // A job that bills no account still ran on the worker: its share is nobody's (unallocated).
        account: this.#intern(usage.account ?? ""),
        endpointId: this.#intern(a.endpointId),
        startMs: end - ms,
        endMs: end,
      });
    }
    if (spans.length > 0) this.#byJob.set(uid, spans);
  }

  /** Forgets spans that ended before `ms` (their buckets are settled for every account). */
  prune(ms: number): void {
    for (const [uid, spans] of this.#byJob) if (spans.every((s) => s.endMs < ms)) this.#byJob.delete(uid);
  }

  list(): ExecutionSpan[] {
    return [...this.#byJob.values()].flat();
  }

  get size(): number {
    return this.#byJob.size;
  }
}
