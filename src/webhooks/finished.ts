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

/** How a watch ended: renewed from its last resourceVersion, or from a fresh list (410 Gone). */
type WatchEnd = "ended" | "expired";

/** Server-side timeout of one watch; it is renewed after it. */
const WATCH_TIMEOUT_SECONDS = 300;
/** A watch that sent nothing, not even a bookmark, for this long is renewed. */
const WATCH_SILENCE_MS = (WATCH_TIMEOUT_SECONDS + 30) * 1000;

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
): { stop(): Promise<void> } {
  const abort = new AbortController();
  const path = api.objectPath("paymentevents", namespace);
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
        const how = await watchOnce(
          api,
          path,
          rv,
          (type, obj) => {
            if (obj.metadata?.resourceVersion) rv = obj.metadata.resourceVersion;
            const ev = obj as unknown as PaymentEvent;
            if (type === "BOOKMARK" || !ev.spec) return;
            if (type === "DELETED") finished.delete(ev.spec.eventId);
            else finished.observe(ev);
          },
          abort.signal,
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
): Promise<WatchEnd> {
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
    let timer = setTimeout(
      () =>
        finish("ended", new Error(`watch ${path}: no answer from the Kubernetes API in ${api.timeoutMs} ms`)),
      api.timeoutMs,
    );
    const alive = () => {
      clearTimeout(timer);
      timer = setTimeout(() => finish("ended"), WATCH_SILENCE_MS);
    };
    api
      .watch(
        path,
        { resourceVersion, allowWatchBookmarks: true, timeoutSeconds: WATCH_TIMEOUT_SECONDS },
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
        WATCH_SILENCE_MS,
      )
      .then(
        () => {
          if (!settled) alive(); // answered: from now on the silence window applies
        },
        (err: unknown) => {
          if (isGone(err)) finish("expired");
          else finish("ended", err);
        },
      );
  });
}
