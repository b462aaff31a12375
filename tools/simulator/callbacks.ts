import type { Logger } from "pino";
import { request, type Dispatcher } from "undici";
import type { Clock, TimerHandle } from "./clock.js";
import { statusView, type Job } from "./engine.js";
import type { Faults, ResolvedOptions } from "./options.js";
import { chance } from "./random.js";

// Job webhooks as RunPod sends them: on a terminal state, POST the status object (plus the echoed
// `input` and `webhook`) as JSON to the webhook URL exactly as given. No signature. A non-2xx
// answer or a network failure is retried: 3 attempts in all, 10 s apart
// (https://docs.runpod.io/serverless/endpoints/send-requests, Webhooks). Faults
// (drop, duplicate, delay, reorder, failed attempts) are decided per job from the seed.

export interface DeliveryRecord {
  /** The provider's job id. */
  jobId: string;
  /** Our job id, from the webhook URL (what executions are counted by). */
  key: string;
  url: string;
  /** The job status the callback carried. */
  status: string;
  attempt: number;
  /** 0 for the first copy, 1 for the duplicate injected by duplicateCallback. */
  copy: number;
  ok: boolean;
  /** Real time the attempt started, ms since the epoch. */
  at: number;
  httpStatus?: number;
  error?: string;
}

interface Callback {
  jobId: string;
  key: string;
  url: string;
  status: string;
  body: string;
  /** Per job id: notifications so far, so a re-run after forget draws fresh faults. */
  seq: number;
  /** Forgetting a job bumps its generation; stale callbacks then stop. */
  generation: number;
}

// Simulated ms between a callback and its injected duplicate unless the faults say; the reorder
// window, and the gap between the reordered releases (so the receiver sees them in that order).
const DUPLICATE_GAP_MS = 1_000;
const REORDER_WINDOW_MS = 2_000;
const REORDER_GAP_MS = 250;

export interface CallbackDeps {
  clock: Clock;
  opts: ResolvedOptions;
  faults: () => Faults;
  dispatcher: Dispatcher;
  log?: Logger;
}

export class CallbackSender {
  readonly #d: CallbackDeps;
  readonly #deliveries: DeliveryRecord[] = [];
  readonly #dropped: string[] = [];
  readonly #seq = new Map<string, number>();
  readonly #generation = new Map<string, number>();
  readonly #timers = new Map<string, Set<TimerHandle>>();
  readonly #abort = new AbortController();
  readonly #inflight = new Set<Promise<void>>();
  #reorderBuffer: Array<() => void> = [];

  constructor(deps: CallbackDeps) {
    this.#d = deps;
  }

  deliveries(): DeliveryRecord[] {
    return this.#deliveries.map((d) => ({ ...d }));
  }

  /** Job ids whose callback the dropCallback fault swallowed. */
  dropped(): string[] {
    return [...this.#dropped];
  }

  notify(job: Job): void {
    if (job.webhook === undefined) return;
    const f = this.#d.faults();
    const seed = this.#d.opts.seed;
    const seq = (this.#seq.get(job.id) ?? 0) + 1;
    this.#seq.set(job.id, seq);
    if (chance(f.dropCallback, seed, job.id, "drop", seq)) {
      this.#dropped.push(job.key);
      this.#d.log?.debug({ jobId: job.id }, "callback dropped (fault)");
      return;
    }
    const cb: Callback = {
      jobId: job.id,
      key: job.key,
      url: job.webhook,
      status: job.status,
      body: JSON.stringify({ ...statusView(job), input: job.input, webhook: job.webhook }),
      seq,
      generation: this.#generation.get(job.id) ?? 0,
    };
    const copies = chance(f.duplicateCallback, seed, job.id, "duplicate", seq) ? 2 : 1;
    const send = () => {
      for (let copy = 0; copy < copies; copy++) {
        this.#schedule(cb, (f.delayCallbackMs ?? 0) + copy * (f.duplicateGapMs ?? DUPLICATE_GAP_MS), 1, copy);
      }
    };
    if (!f.reorderCallbacks) return send();
    // Reorder: hold callbacks for a window, then release them newest first.
    // The first callback into an empty buffer opens the window.
    if (this.#reorderBuffer.push(send) > 1) return;
    this.#d.clock.after(REORDER_WINDOW_MS, () => {
      const batch = this.#reorderBuffer.reverse();
      this.#reorderBuffer = [];
      batch.forEach((fn, i) => (i === 0 ? fn() : this.#d.clock.after(i * REORDER_GAP_MS, fn)));
    });
  }

  /** The provider lost the job: callbacks not yet sent are abandoned. */
  forget(jobId: string): void {
    this.#generation.set(jobId, (this.#generation.get(jobId) ?? 0) + 1);
    for (const t of this.#timers.get(jobId) ?? []) this.#d.clock.cancel(t);
    this.#timers.delete(jobId);
  }

  async close(): Promise<void> {
    this.#abort.abort();
    await Promise.allSettled([...this.#inflight]);
  }

  #schedule(cb: Callback, delaySimMs: number, attempt: number, copy: number): void {
    const timers = this.#timers.get(cb.jobId) ?? new Set<TimerHandle>();
    this.#timers.set(cb.jobId, timers);
    const handle = this.#d.clock.after(delaySimMs, () => {
      timers.delete(handle);
      const p = this.#attempt(cb, attempt, copy).finally(() => this.#inflight.delete(p));
      this.#inflight.add(p);
    });
    timers.add(handle);
  }

  async #attempt(cb: Callback, attempt: number, copy: number): Promise<void> {
    if ((this.#generation.get(cb.jobId) ?? 0) !== cb.generation || this.#abort.signal.aborted) return;
    const { opts, faults, log } = this.#d;
    const rec: DeliveryRecord = {
      jobId: cb.jobId,
      key: cb.key,
      url: cb.url,
      status: cb.status,
      attempt,
      copy,
      ok: false,
      at: Date.now(),
    };
    if (chance(faults().failCallbackDelivery, opts.seed, cb.jobId, "fail-delivery", cb.seq, copy, attempt)) {
      rec.error = "injected delivery failure";
    } else {
      try {
        const res = await request(cb.url, {
          method: "POST",
          headers: { "content-type": "application/json", "user-agent": "runpod-simulator" },
          body: cb.body,
          signal: AbortSignal.any([this.#abort.signal, AbortSignal.timeout(opts.callbackTimeoutMs)]),
          dispatcher: this.#d.dispatcher,
        });
        await res.body.dump();
        rec.httpStatus = res.statusCode;
        rec.ok = res.statusCode >= 200 && res.statusCode < 300;
      } catch (err) {
        rec.error = errorText(err);
      }
    }
    if (this.#abort.signal.aborted) return;
    this.#deliveries.push(rec);
    log?.debug({ ...rec }, "callback attempt");
    if (!rec.ok && attempt < opts.callbackAttempts)
      this.#schedule(cb, opts.callbackRetryDelayMs, attempt + 1, copy);
  }
}

export function errorText(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === "string") return code;
  return err instanceof Error ? err.name : String(err);
}
