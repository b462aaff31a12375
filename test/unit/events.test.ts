// The background Event recorder: a reconcile never waits for an Event, Events keep their order,
// at most `concurrency` are in flight, a full buffer drops (and counts) instead of growing, and
// flush waits for what is buffered (graceful shutdown).
import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { KubeApi } from "../../src/k8s/api.js";
import {
  BackgroundEventRecorder,
  EventRecorder,
  eventName,
  SERIES_WINDOW_MS,
  type EventSink,
} from "../../src/k8s/events.js";

const target = { metadata: { name: "j", namespace: "ns" } };

/** A sink whose writes finish only when the test releases them. */
function gatedSink() {
  const started: string[] = [];
  const done: string[] = [];
  const gates: Array<() => void> = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const sink: EventSink = {
    record: (_t, _type, reason) => {
      started.push(reason);
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      return new Promise<void>((resolve) =>
        gates.push(() => {
          inFlight--;
          done.push(reason);
          resolve();
        }),
      );
    },
  };
  const releaseAll = async () => {
    while (gates.length) {
      gates.shift()!();
      await new Promise((r) => setImmediate(r));
    }
  };
  return { sink, started, done, releaseAll, maxInFlight: () => maxInFlight };
}

describe("BackgroundEventRecorder", () => {
  it("returns before the Event is written, sends in order, with bounded concurrency", async () => {
    const g = gatedSink();
    const rec = new BackgroundEventRecorder(g.sink, pino({ level: "silent" }), { concurrency: 2 });
    for (let i = 0; i < 5; i++) await rec.record(target, "Normal", `e${i}`, "m");
    // Every record() has resolved, yet nothing is written: the writes are gated.
    expect(g.done).toEqual([]);
    expect(g.started).toEqual(["e0", "e1"]);
    const flushed = rec.flush(10_000);
    await g.releaseAll();
    await flushed;
    expect(g.done).toEqual(["e0", "e1", "e2", "e3", "e4"]);
    expect(g.maxInFlight()).toBe(2);
  });

  it("drops and counts Events beyond the buffer instead of growing", async () => {
    const g = gatedSink();
    let onDrop = 0;
    const rec = new BackgroundEventRecorder(g.sink, pino({ level: "silent" }), {
      concurrency: 1,
      buffer: 2,
      onDrop: () => onDrop++,
    });
    for (let i = 0; i < 6; i++) await rec.record(target, "Warning", `e${i}`, "m");
    // One in flight, two buffered, three dropped, each one told (the controller's metric).
    expect(rec.dropped).toBe(3);
    expect(onDrop).toBe(3);
    const flushed = rec.flush(10_000);
    await g.releaseAll();
    await flushed;
    expect(g.done).toEqual(["e0", "e1", "e2"]);
  });

  it("keeps sending after a sink that rejects", async () => {
    const sent: string[] = [];
    const rec = new BackgroundEventRecorder(
      {
        record: async (_t, _type, reason) => {
          if (reason === "bad") throw new Error("events API down");
          sent.push(reason);
        },
      },
      pino({ level: "silent" }),
      { concurrency: 1 },
    );
    await rec.record(target, "Normal", "bad", "m");
    await rec.record(target, "Normal", "good", "m");
    await rec.flush(10_000);
    expect(sent).toEqual(["good"]);
  });

  it("flush gives up after its timeout when a write hangs", async () => {
    const rec = new BackgroundEventRecorder(
      { record: () => new Promise<void>(() => {}) },
      pino({ level: "silent" }),
    );
    await rec.record(target, "Normal", "hangs", "m");
    const t = Date.now();
    await rec.flush(50);
    expect(Date.now() - t).toBeGreaterThanOrEqual(45);
  });
});

/** An API that only records the Event writes it is asked for: "POST" or "PATCH <series count>". */
function eventsApi() {
  const writes: string[] = [];
  const api = {
    rawJson: (method: string, _path: string, body: { series?: { count: number } }) => {
      writes.push(method === "PATCH" ? `PATCH ${body.series?.count}` : method);
      return Promise.resolve({});
    },
  } as unknown as KubeApi;
  return { api, writes };
}

const MINUTE = 60_000;

describe("EventRecorder series", () => {
  afterEach(() => vi.useRealTimers());

  it("counts a repeat within the window, and forgets each series once its window is over", async () => {
    const { api, writes } = eventsApi();
    let t = Date.parse("2026-11-25T10:00:00Z");
    const rec = new EventRecorder(api, "controller", pino({ level: "silent" }), () => new Date(t));
    const jobX = { metadata: { name: "x", namespace: "ns", uid: "uid-x" } };
    const jobY = { metadata: { name: "y", namespace: "ns", uid: "uid-y" } };
    const jobZ = { metadata: { name: "z", namespace: "ns", uid: "uid-z" } };

    await rec.record(jobX, "Warning", "StatusCheckFailed", "the provider is down");
    t += MINUTE;
    await rec.record(jobY, "Normal", "Submitted", "submitted as p-1");
    t += 4 * MINUTE;
    await rec.record(jobX, "Warning", "StatusCheckFailed", "the provider is down");
    // Y's window is over, X's repeat keeps X's open though X's series is older than Y's.
    t += 2 * MINUTE;
    await rec.record(jobZ, "Normal", "Submitted", "submitted as p-2");
    expect(rec.remembered).toBe(2);
    await rec.record(jobX, "Warning", "StatusCheckFailed", "the provider is down");
    // Long after: nothing of the burst is kept, and X again is a new Event.
    t += SERIES_WINDOW_MS;
    await rec.record(jobX, "Warning", "StatusCheckFailed", "the provider is down");
    expect(rec.remembered).toBe(1);
    expect(writes).toEqual(["POST", "POST", "PATCH 2", "POST", "PATCH 3", "POST"]);
  });

  it("forgets its series without another Event once their window is over", async () => {
    vi.useFakeTimers();
    const { api, writes } = eventsApi();
    const rec = new EventRecorder(api, "controller", pino({ level: "silent" }));
    for (let i = 0; i < 100; i++)
      await rec.record(
        { metadata: { name: `j-${i}`, namespace: "ns", uid: `u-${i}` } },
        "Normal",
        "Submitted",
        "ok",
      );
    expect(rec.remembered).toBe(100);
    await vi.advanceTimersByTimeAsync(SERIES_WINDOW_MS - 1_000);
    expect(rec.remembered).toBe(100);
    await vi.advanceTimersByTimeAsync(SERIES_WINDOW_MS + 1_000);
    expect(rec.remembered).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    expect(writes).toHaveLength(100);
  });
});

describe("Event names", () => {
  it("stay within 253 characters and valid for an object of the longest name", () => {
    const longest = `${"a".repeat(240)}-${"b".repeat(12)}`; // 253 characters
    const name = eventName(longest, new Date("2026-11-23T06:00:00Z"));
    expect(name.length).toBeLessThanOrEqual(253);
    expect(name).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
    expect(eventName("job", new Date())).toMatch(/^job\.[0-9a-f]+$/);
  });
});
