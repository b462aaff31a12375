// Which payment events are finished, in memory, per replica: a replay of one is answered without
// any Kubernetes call. Filled from the records this replica writes or reads, and from a watch of
// the namespace's PaymentEvents, so a replay that lands on the other replica is answered from
// memory too. Bounded (least recently used out first): a miss is never wrong, only slower, since
// the Kubernetes record stays the authority (see payments.ts).
import type { FastifyBaseLogger } from "fastify";
import type { PaymentEvent } from "../crds/index.js";
import type { KubeApi } from "../k8s/api.js";
import { describeError, isGone } from "../k8s/errors.js";
import type { WatchObject } from "../k8s/http.js";
import { KubeTimeoutError } from "../k8s/transport.js";
import { isFinished, recordedOutcome } from "./paymentrecord.js";

export const DEFAULT_FINISHED_CAPACITY = 100_000;

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

/** How a watch of the finished-events memory ended: renewed from the same resourceVersion, or not. */
type WatchEnd = "ended" | "expired";

export interface FinishedWatchOptions {
  /** Server-side watch timeout; the watch is renewed after it (default 300 s). */
  timeoutSeconds?: number;
  /** Renew a watch that sent nothing, not even a bookmark, for this long (default timeout + 30 s). */
  silenceMs?: number;
}

/**
 * Watches the namespace's PaymentEvents from now on and keeps `finished` up to date; restarts after
 * errors (with backoff) and after 410 Gone (from a fresh resourceVersion: what a gap misses is
 * only a slower replay, never a wrong answer). The watch streams over the controller's client
 * (src/k8s/http.ts: UTF-8 decoded across chunks, credentials and TLS material re-read). Stop with
 * the returned function.
 */
export function watchFinishedEvents(
  api: KubeApi,
  namespace: string,
  finished: FinishedEvents,
  log: FastifyBaseLogger,
  opts: FinishedWatchOptions = {},
): { stop(): Promise<void> } {
  const abort = new AbortController();
  const path = api.objectPath("paymentevents", namespace);
  const onEvent = (type: string, obj: WatchObject) => {
    const ev = obj as unknown as PaymentEvent;
    if (type === "BOOKMARK" || !ev.spec) return;
    if (type === "DELETED") finished.delete(ev.spec.eventId);
    else finished.observe(ev);
  };
  const loop = (async () => {
    let rv: string | undefined;
    let backoffMs = 500;
    while (!abort.signal.aborted) {
      try {
        if (rv === undefined) {
          // Only the list's resourceVersion is wanted: a page of one.
          const page = await api.rawJson<{ metadata?: { resourceVersion?: string } }>(
            "GET",
            `${path}?limit=1`,
          );
          rv = page.metadata?.resourceVersion ?? "";
        }
        const from: string = rv;
        const how = await watchOnce(
          api,
          path,
          from,
          (type, obj) => {
            const seen = obj.metadata?.resourceVersion;
            if (seen) rv = seen;
            onEvent(type, obj);
          },
          abort.signal,
          opts,
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

/**
 * One watch from `resourceVersion`, until the server ends it, `stop` aborts it, or it goes silent
 * (a dead TCP stream sends nothing and never ends; bookmarks keep a healthy idle one talking).
 * Until the apiserver answers, the client's deadline applies, as to every other call.
 */
function watchOnce(
  api: KubeApi,
  path: string,
  resourceVersion: string,
  onEvent: (type: string, obj: WatchObject) => void,
  stop: AbortSignal,
  opts: FinishedWatchOptions,
): Promise<WatchEnd> {
  const timeoutSeconds = opts.timeoutSeconds ?? 300;
  const silenceMs = opts.silenceMs ?? (timeoutSeconds + 30) * 1000;
  const cut = new AbortController();
  const signal = AbortSignal.any([stop, cut.signal]);
  return new Promise<WatchEnd>((resolve, reject) => {
    let settled = false;
    const finish = (how: WatchEnd, err?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      cut.abort();
      if (err !== undefined && !stop.aborted) reject(err);
      else resolve(how);
    };
    let deadlineHit: KubeTimeoutError | undefined;
    let timer = setTimeout(() => {
      deadlineHit = new KubeTimeoutError("GET", path, api.timeoutMs);
      finish("ended", deadlineHit);
    }, api.timeoutMs);
    const quiet = () => finish("ended");
    const alive = () => {
      clearTimeout(timer);
      timer = setTimeout(quiet, silenceMs);
    };
    api
      .watch(
        path,
        { resourceVersion, allowWatchBookmarks: true, timeoutSeconds },
        (type, obj) => {
          if (settled) return;
          alive();
          if (type === "ERROR") {
            // 410 Gone in the stream: the resourceVersion is too old; anything else is a failure.
            if (obj.code === 410) finish("expired");
            else finish("ended", Object.assign(new Error("PaymentEvent watch error event"), { body: obj }));
            return;
          }
          onEvent(type, obj);
        },
        (err?: unknown) => {
          if (err === undefined) finish("ended");
          else if (isGone(err)) finish("expired");
          else finish("ended", err);
        },
        signal,
        silenceMs,
      )
      .then(
        () => {
          if (!settled) alive(); // answered: from now on the silence window applies
        },
        (err: unknown) => {
          if (isGone(err)) finish("expired");
          else finish("ended", deadlineHit ?? err);
        },
      );
  });
}
