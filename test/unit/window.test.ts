import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ceiling,
  freeSlots,
  initialWindow,
  onAccepted,
  onThrottled,
  windowSize,
  type CeilingInput,
  type EndpointCapacity,
} from "../../src/mediajob/window.js";
import { scale } from "../../tools/simulator/scaler.js";

// The in-flight window of an endpoint: its ceiling from the provider's capacity, and the
// congestion limit that halves on a 429 and grows back.

const qd = (seconds = 4) => ({ type: "QUEUE_DELAY" as const, seconds });
const rc = (perWorker = 4) => ({ type: "REQUEST_COUNT" as const, perWorker });

function input(capacity: Partial<EndpointCapacity>, rest: Partial<CeilingInput> = {}): CeilingInput {
  return {
    capacity: { workersMax: 10, scaler: qd(), inQueue: 0, inProgress: 0, ...capacity },
    ownInFlight: 0,
    jobSeconds: 30,
    tickSeconds: 1,
    ...rest,
  };
}

describe("ceiling", () => {
  it.each([
    ["QUEUE_DELAY: workersMax plus one tick's completions (at least 1)", input({}), 11],
    ["QUEUE_DELAY, short jobs: 10 workers finish 5 jobs in a 1 s tick", input({}, { jobSeconds: 2 }), 15],
    ["REQUEST_COUNT 4: workersMax x 4", input({ scaler: rc(4) }), 40],
    ["REQUEST_COUNT 1: one job per worker", input({ scaler: rc(1) }), 10],
    ["workersMax 0: nothing runs, nothing is sent", input({ workersMax: 0 }), 0],
    ["spec.maxInFlight overrides the capacity rule", input({}, { maxInFlight: 3 }), 3],
    ["spec.maxInFlight 0 holds every job", input({}, { maxInFlight: 0 }), 0],
    [
      "other clients' jobs at the endpoint come off it",
      input({ inQueue: 6, inProgress: 4 }, { ownInFlight: 5 }),
      6,
    ],
    ["but it stays at least 1 while workers may run", input({ inQueue: 500, inProgress: 10 }), 1],
    [
      "our own jobs at the provider are not foreign",
      input({ inQueue: 1, inProgress: 10 }, { ownInFlight: 11 }),
      11,
    ],
  ])("%s", (_name, i, expected) => {
    expect(ceiling(i)).toBe(expected);
  });

  it("REQUEST_COUNT: a full window makes RunPod's formula run workersMax workers", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 1, max: 50 }),
        (workersMax, perWorker) => {
          const c = ceiling(input({ workersMax, scaler: rc(perWorker) }));
          expect(Math.ceil(c / perWorker)).toBe(workersMax);
          // And the simulator's scaler, which follows the same documented formula, agrees.
          const d = scale({
            type: "REQUEST_COUNT",
            value: perWorker,
            workersMin: 0,
            workersMax,
            initializing: 0,
            idle: 0,
            running: 0,
            queued: Array.from({ length: c }, () => ({ waitedMs: 0, lowPriority: false })),
          });
          expect(d.target).toBe(workersMax);
        },
      ),
    );
  });

  it("QUEUE_DELAY: a full window leaves jobs waiting past the running workers, so the scaler reaches workersMax; the provider's queue stays within one tick of work", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 1, max: 600 }),
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 0, max: 200 }),
        (workersMax, jobSeconds, tickSeconds, running) => {
          const runningWorkers = Math.min(running, workersMax);
          const c = ceiling(input({ workersMax }, { jobSeconds, tickSeconds }));
          const queued = c - runningWorkers;
          // Jobs wait whenever fewer than workersMax workers run, so the scaler adds workers...
          expect(c).toBeGreaterThan(workersMax);
          const d = scale({
            type: "QUEUE_DELAY",
            value: 4,
            workersMin: 0,
            workersMax,
            initializing: 0,
            idle: 0,
            running: runningWorkers,
            queued: Array.from({ length: queued }, () => ({ waitedMs: 4_001, lowPriority: false })),
          });
          expect(d.target).toBe(workersMax);
          // ...and once all run, what waits at the provider is what finishes in one tick (or 1).
          expect(c - workersMax).toBe(Math.max(1, Math.ceil((workersMax * tickSeconds) / jobSeconds)));
        },
      ),
    );
  });
});

describe("congestion limit (AIMD)", () => {
  it("a 429 halves the window and holds submissions for Retry-After; acceptances grow it back to the ceiling", () => {
    const ceil = 16;
    let w = initialWindow(ceil);
    expect(windowSize(w, ceil, 0)).toBe(16);
    w = onThrottled(w, ceil, 1_000, 2_000);
    expect(windowSize(w, ceil, 1_500)).toBe(0);
    expect(freeSlots(w, ceil, 0, 2_999)).toBe(0);
    expect(windowSize(w, ceil, 3_000)).toBe(8);
    expect(freeSlots(w, ceil, 5, 3_000)).toBe(3);
    // About one window's worth of accepted submissions (8 at 1/8 each, a little more as it grows): 8 -> 9.
    for (let i = 0; i < 8; i++) w = onAccepted(w, ceil);
    expect(windowSize(w, ceil, 3_000)).toBe(8);
    w = onAccepted(w, ceil);
    expect(windowSize(w, ceil, 3_000)).toBe(9);
    for (let i = 0; i < 200; i++) w = onAccepted(w, ceil);
    expect(windowSize(w, ceil, 3_000)).toBe(16);
  });

  it("without Retry-After a 429 shrinks the window but holds nothing", () => {
    const w = onThrottled(initialWindow(10), 10, 1_000);
    expect(windowSize(w, 10, 1_000)).toBe(5);
  });

  it("halves what is in force when the ceiling fell below the limit", () => {
    const w = onThrottled(initialWindow(100), 10, 0);
    expect(windowSize(w, 10, 0)).toBe(5);
  });

  it("properties: never above the ceiling, never below 1 after a 429, at most half after one, back to the ceiling within ceiling² accepts", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }),
        fc.array(fc.oneof(fc.constant("429" as const), fc.constant("ok" as const)), { maxLength: 300 }),
        (ceil, events) => {
          let w = initialWindow(ceil);
          for (const e of events) {
            const before = windowSize(w, ceil, 0);
            w = e === "429" ? onThrottled(w, ceil, 0) : onAccepted(w, ceil);
            const after = windowSize(w, ceil, 0);
            expect(after).toBeLessThanOrEqual(ceil);
            expect(after).toBeGreaterThanOrEqual(1);
            if (e === "429") expect(after).toBeLessThanOrEqual(Math.max(1, Math.floor(before / 2)));
            else expect(after).toBeGreaterThanOrEqual(before);
          }
          for (let i = 0; i < ceil * ceil; i++) w = onAccepted(w, ceil);
          expect(windowSize(w, ceil, 0)).toBe(ceil);
        },
      ),
    );
  });
});
