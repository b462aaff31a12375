// Which payment events are finished, in memory, per replica: a replay of one is answered without
// any Kubernetes call. Filled from the records this replica writes or reads, and from a watch of
// the namespace's PaymentEvents, so a replay that lands on the other replica is answered from
// memory too. Bounded (least recently used out first): a miss is never wrong, only slower, since
// the Kubernetes record stays the authority (see payments.ts).
import type { FastifyBaseLogger } from "fastify";
import type { PaymentEvent } from "../crds/index.js";
import { describeError } from "../k8s/errors.js";
import type { KubeJson } from "./kubejson.js";
import { isFinished, recordedOutcome } from "./paymentrecord.js";

const DEFAULT_FINISHED_CAPACITY = 100_000;

export class FinishedEvents {
  readonly #ids = new Map<string, true>();

  constructor(readonly capacity = DEFAULT_FINISHED_CAPACITY) {}

  get size(): number {
    return this.#ids.size;
  }

  has(eventId: string): boolean {
    return this.#ids.has(eventId);
  }

  add(eventId: string): void {
    if (this.capacity <= 0) return;
    this.#ids.delete(eventId); // re-inserted last: most recently used
    this.#ids.set(eventId, true);
    if (this.#ids.size > this.capacity) {
      const oldest = this.#ids.keys().next().value;
      if (oldest !== undefined) this.#ids.delete(oldest);
    }
  }

  delete(eventId: string): void {
    this.#ids.delete(eventId);
  }

  /** Keeps memory in line with a record read or written. */
  observe(rec: PaymentEvent): void {
    if (isFinished(recordedOutcome(rec))) this.add(rec.spec.eventId);
    else this.delete(rec.spec.eventId);
  }
}

/**
 * Watches the namespace's PaymentEvents from now on and keeps `finished` up to date; restarts after
 * errors (with backoff) and after 410 Gone (from a fresh resourceVersion: what a gap misses is
 * only a slower replay, never a wrong answer). Stop with the returned function.
 */
export function watchFinishedEvents(
  kube: KubeJson,
  namespace: string,
  finished: FinishedEvents,
  log: FastifyBaseLogger,
): { stop(): Promise<void> } {
  const abort = new AbortController();
  const loop = (async () => {
    let rv: string | undefined;
    let backoffMs = 500;
    while (!abort.signal.aborted) {
      try {
        if (rv === undefined) {
          const page = await kube.listPage<PaymentEvent>("paymentevents", namespace, { limit: 1 });
          rv = page.metadata.resourceVersion ?? "";
        }
        const how = await kube.watch<PaymentEvent>(
          "paymentevents",
          namespace,
          rv,
          (e) => {
            const meta = e.object.metadata;
            if (meta?.resourceVersion) rv = meta.resourceVersion;
            if (e.type === "BOOKMARK" || !e.object.spec) return;
            if (e.type === "DELETED") finished.delete(e.object.spec.eventId);
            else finished.observe(e.object);
          },
          { signal: abort.signal },
        );
        if (how === "expired") rv = undefined;
        backoffMs = 500;
      } catch (err) {
        if (abort.signal.aborted) break;
        log.warn({ error: describeError(err).slice(0, 300) }, "PaymentEvent watch failed; restarting");
        rv = undefined;
        await new Promise((r) => setTimeout(r, backoffMs).unref());
        backoffMs = Math.min(30_000, backoffMs * 2);
      }
    }
  })();
  return {
    stop: async () => {
      abort.abort();
      await loop;
    },
  };
}
