// Kubernetes Events, written as client-go's events recorder writes them (k8s.io/client-go/tools/
// events): events.k8s.io/v1 objects, and the same Event on the same object again within a few
// minutes is not a new object but one more count of its `series` (a PATCH), so a condition that
// keeps recurring costs one Event, not one per occurrence. `kubectl describe` and `kubectl get
// events` show them as usual. Recording an Event must never fail a reconcile: errors are logged
// and dropped.
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { KubeApi } from "./api.js";

export interface EventTarget {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export type EventType = "Normal" | "Warning";

/** client-go's window: an isomorphic Event within it joins the series of the first. */
export const SERIES_WINDOW_MS = 6 * 60_000;
/**
 * Series remembered at most, however many Events came within one window (the oldest are forgotten:
 * a later repeat then starts a new Event). Older ones are forgotten once their window is over.
 */
const SERIES_MEMORY = 10_000;

interface Series {
  namespace: string;
  name: string;
  count: number;
  lastSeen: number;
}

/** metav1.MicroTime wants six fractional digits. */
const microTime = (d: Date): string => d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");

export class EventRecorder {
  /**
   * Series by key, in the order of their last Event (a repeat moves its series to the end), so
   * the ones whose window is over are always at the front. Every submission records an Event of
   * its own: without forgetting them, a burst of 10,000 jobs would stay in memory for good.
   */
  private readonly series = new Map<string, Series>();
  private readonly instance: string;
  private sweep?: NodeJS.Timeout;

  constructor(
    private readonly api: KubeApi,
    private readonly component: string,
    private readonly log: Logger,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.instance = `${component}-${process.env.POD_NAME ?? process.env.HOSTNAME ?? "local"}`.slice(0, 128);
  }

  async record(target: EventTarget, type: EventType, reason: string, message: string): Promise<void> {
    const namespace = target.metadata.namespace ?? "default";
    const now = this.now();
    const note = message.slice(0, 1024);
    const key = [namespace, target.metadata.uid ?? target.metadata.name, type, reason, note].join("\u0000");
    this.forgetExpired(now.getTime());
    const known = this.series.get(key);
    try {
      if (known && now.getTime() - known.lastSeen < SERIES_WINDOW_MS) {
        known.count++;
        known.lastSeen = now.getTime();
        this.series.delete(key);
        this.series.set(key, known);
        await this.api.rawJson(
          "PATCH",
          `/apis/events.k8s.io/v1/namespaces/${known.namespace}/events/${known.name}`,
          { series: { count: known.count, lastObservedTime: microTime(now) } },
          "application/merge-patch+json",
        );
        return;
      }
      const name = eventName(target.metadata.name, now);
      await this.api.rawJson("POST", `/apis/events.k8s.io/v1/namespaces/${namespace}/events`, {
        apiVersion: "events.k8s.io/v1",
        kind: "Event",
        metadata: { name, namespace },
        eventTime: microTime(now),
        reportingController: `media-orchestrator.io/${this.component}`,
        reportingInstance: this.instance,
        action: reason,
        reason,
        regarding: {
          apiVersion: target.apiVersion,
          kind: target.kind,
          name: target.metadata.name,
          namespace,
          uid: target.metadata.uid,
        },
        note,
        type,
      });
      this.remember(key, { namespace, name, count: 1, lastSeen: now.getTime() });
    } catch (err) {
      // A series whose Event is gone (expired, deleted) starts again next time.
      if (known) this.series.delete(key);
      this.log.warn({ err: (err as Error).message, reason }, "could not record event");
    }
  }

  /** Series remembered now (each one Event whose window is not over). */
  get remembered(): number {
    return this.series.size;
  }

  private remember(key: string, s: Series): void {
    if (this.series.size >= SERIES_MEMORY) {
      const oldest = this.series.keys().next().value;
      if (oldest !== undefined) this.series.delete(oldest);
    }
    this.series.set(key, s);
    this.armSweep();
  }

  private forgetExpired(at: number): void {
    for (const [key, s] of this.series) {
      if (at - s.lastSeen < SERIES_WINDOW_MS) break;
      this.series.delete(key);
    }
  }

  /**
   * A process that stops recording still forgets its series, at most one window after theirs is
   * over: one timer per window while any is remembered, none once all are forgotten, never
   * keeping the process alive.
   */
  private armSweep(): void {
    if (this.sweep) return;
    this.sweep = setTimeout(() => {
      this.sweep = undefined;
      this.forgetExpired(this.now().getTime());
      if (this.series.size > 0) this.armSweep();
    }, SERIES_WINDOW_MS);
    this.sweep.unref();
  }
}

/** Where reconcilers send Events. */
export interface EventSink {
  record(target: EventTarget, type: EventType, reason: string, message: string): Promise<void>;
}

export interface BackgroundEventsOptions {
  /**
   * Events written at once (default 16). Every submission writes one: with 4 writers and the
   * apiserver answering in ~100 ms under load, Events kept up with 40 jobs a second, and a burst
   * of 10,000 jobs at 80 a second dropped thousands once 1,000 waited.
   */
  concurrency?: number;
  /** Events waiting at most; beyond it new ones are dropped. */
  buffer?: number;
  /** Called for each Event dropped (a metric). */
  onDrop?: () => void;
}

/**
 * Records Events off the reconcile's critical path, as client-go's event broadcaster does:
 * `record` returns at once and a few senders write the Events in order of arrival. A reconcile
 * never waits a round trip per Event, and a slow or failing events API never slows the
 * work. When the buffer is full, new Events are dropped and counted: an Event is a note for
 * humans, never state the product reads back.
 */
export class BackgroundEventRecorder implements EventSink {
  private readonly pending: Array<Parameters<EventSink["record"]>> = [];
  private active = 0;
  private readonly idleWaiters: Array<() => void> = [];
  private readonly concurrency: number;
  private readonly buffer: number;
  /** Events dropped because the buffer was full. */
  dropped = 0;

  constructor(
    private readonly sink: EventSink,
    private readonly log: Logger,
    private readonly opts: BackgroundEventsOptions = {},
  ) {
    this.concurrency = opts.concurrency ?? 16;
    this.buffer = opts.buffer ?? 1000;
  }

  record(target: EventTarget, type: EventType, reason: string, message: string): Promise<void> {
    if (this.pending.length >= this.buffer) {
      this.opts.onDrop?.();
      // Log the first drop of each burst, not every one.
      if (this.dropped++ === 0 || this.dropped % 1000 === 0)
        this.log.warn({ dropped: this.dropped, reason }, "event buffer full; dropping events");
      return Promise.resolve();
    }
    this.pending.push([target, type, reason, message]);
    this.pump();
    return Promise.resolve();
  }

  /** Resolves once every buffered Event has been sent, or after timeoutMs (graceful shutdown). */
  async flush(timeoutMs = 5_000): Promise<void> {
    if (this.active === 0 && this.pending.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolve) => this.idleWaiters.push(resolve)),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
  }

  private pump(): void {
    while (this.active < this.concurrency && this.pending.length > 0) {
      const args = this.pending.shift()!;
      this.active++;
      // The sink never rejects (EventRecorder logs and drops); the catch is for other sinks.
      void this.sink
        .record(...args)
        .catch((err: unknown) => this.log.warn({ err: (err as Error).message }, "could not record event"))
        .finally(() => {
          this.active--;
          this.pump();
          if (this.active === 0 && this.pending.length === 0)
            for (const resolve of this.idleWaiters.splice(0)) resolve();
        });
    }
  }
}

/**
 * An Event's name: the object's name and a unique suffix, as client-go names them, within the 253
 * characters of a name however long the object's own name is (a suffix of 18 characters).
 */
export function eventName(objectName: string, now: Date): string {
  const suffix = `${now.getTime().toString(16)}${randomBytes(3).toString("hex")}`;
  const max = 253 - 1 - suffix.length;
  const base = objectName.length <= max ? objectName : objectName.slice(0, max).replace(/[^a-z0-9]+$/, "");
  return `${base}.${suffix}`;
}
