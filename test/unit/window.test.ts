import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ceiling,
  freeSlots,
  initialWindow,
  lowPriorityRoom,
  onAccepted,
  onThrottled,
  scalerOf,
  windowSize,
  WINDOW_BACKOFF_MS,
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
    ["QUEUE_DELAY: workersMax plus the completions of the 4 s threshold (at least 1)", input({}), 12],
    [
      "QUEUE_DELAY, short jobs: 10 workers finish 20 jobs in the 4 s threshold",
      input({}, { jobSeconds: 2 }),
      30,
    ],
    [
      "QUEUE_DELAY, a tick longer than the threshold: its completions",
      input({}, { jobSeconds: 2, tickSeconds: 6 }),
      40,
    ],
    [
      "QUEUE_DELAY, workersMax workers up: a tick's completions",
      input({ workersUp: 10 }, { jobSeconds: 2 }),
      15,
    ],
    ["QUEUE_DELAY, fewer up: the threshold's", input({ workersUp: 9 }, { jobSeconds: 2 }), 30],
    ["REQUEST_COUNT 4: workersMax x 4", input({ scaler: rc(4) }), 40],
    ["REQUEST_COUNT 1: one job per worker", input({ scaler: rc(1) }), 10],
    ["workersMax 0: nothing runs, nothing is sent", input({ workersMax: 0 }), 0],
    ["spec.maxInFlight overrides the capacity rule", input({}, { maxInFlight: 3 }), 3],
    ["spec.maxInFlight 0 holds every job", input({}, { maxInFlight: 0 }), 0],
    [
      "other clients' jobs at the endpoint come off it",
      input({ inQueue: 6, inProgress: 4 }, { ownInFlight: 5 }),
      7,
    ],
    ["but it stays at least 1 while workers may run", input({ inQueue: 500, inProgress: 10 }), 1],
    [
      "our own jobs at the provider are not foreign",
      input({ inQueue: 1, inProgress: 10 }, { ownInFlight: 11 }),
      12,
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

  it("QUEUE_DELAY: a full window leaves jobs waiting past the running workers, so the scaler reaches workersMax; once all are up the provider's queue stays within one tick of work", () => {
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
          // ...and once all are up, what waits at the provider is what finishes in one tick (or 1).
          const up = ceiling(input({ workersMax, workersUp: workersMax }, { jobSeconds, tickSeconds }));
          expect(up - workersMax).toBe(Math.max(1, Math.ceil((workersMax * tickSeconds) / jobSeconds)));
        },
      ),
    );
  });

  it("QUEUE_DELAY: while fewer than workersMax run, the job at the head of the provider's queue waits past the threshold, so a scaler adding one worker per threshold period goes on to workersMax", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 200 }),
        fc.integer({ min: 1, max: 600 }),
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 1, max: 200 }),
        (workersMax, jobSeconds, tickSeconds, threshold, running) => {
          const k = Math.min(running, workersMax - 1);
          const c = ceiling(
            input({ workersMax, scaler: qd(threshold), workersUp: k }, { jobSeconds, tickSeconds }),
          );
          // k workers take the c - k queued jobs first in first out, one every jobSeconds / k: the
          // last one submitted waits that long for all of them before a worker takes it.
          const headWaitSeconds = ((c - k) * jobSeconds) / k;
          expect(headWaitSeconds).toBeGreaterThan(threshold);
          // The simulator's onePerDelay scaler then adds the next worker.
          const d = scale({
            type: "QUEUE_DELAY",
            value: threshold,
            workersMin: 0,
            workersMax,
            initializing: 0,
            idle: 0,
            running: k,
            queued: [{ waitedMs: headWaitSeconds * 1000, lowPriority: false }],
            reading: "onePerDelay",
            sinceLastAddMs: threshold * 1000,
          });
          expect(d.target).toBe(k + 1);
        },
      ),
    );
  });
});

describe("congestion limit (AIMD)", () => {
  it("a 429 halves the window and holds submissions for Retry-After; acceptances grow it back to the ceiling", () => {
    const ceil = 16;
    let w = initialWindow();
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
    const w = onThrottled(initialWindow(), 10, 1_000);
    expect(windowSize(w, 10, 1_000)).toBe(5);
  });

  it("halves what is in force when the ceiling fell below the limit", () => {
    const w = onThrottled(initialWindow(), 10, 0);
    expect(windowSize(w, 10, 0)).toBe(5);
  });

  it("properties: never above the ceiling, never below 1 after a 429, at most half after one, back to the ceiling within ceiling² accepts", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }),
        fc.array(fc.oneof(fc.constant("429" as const), fc.constant("ok" as const)), { maxLength: 300 }),
        (ceil, events) => {
          let w = initialWindow();
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

describe("a window that follows its ceiling", () => {
  it("a fresh window is the ceiling, and follows it when it rises (workersMax 3 -> 30), with no 429", () => {
    const w = initialWindow();
    // Created while the endpoint could take 4 jobs...
    expect(windowSize(w, 4, 0)).toBe(4);
    // ...it takes 31 as soon as workersMax is raised, not one more per window of acceptances.
    expect(windowSize(w, 31, 1_000)).toBe(31);
    expect(freeSlots(w, 31, 4, 1_000)).toBe(27);
    // Accepted submissions change nothing while the provider never pushed back.
    expect(windowSize(onAccepted(w, 31), 31, 1_000)).toBe(31);
  });

  it("after a 429 the congestion limit holds for the backoff period, then the window is the ceiling again", () => {
    let w = initialWindow();
    w = onThrottled(w, 20, 0);
    expect(windowSize(w, 20, 1_000)).toBe(10);
    // The ceiling rises within the backoff: the limit still holds it (the provider pushed back).
    expect(windowSize(w, 40, WINDOW_BACKOFF_MS - 1)).toBe(10);
    // No 429 within the backoff: back to the ceiling, at once.
    expect(windowSize(w, 40, WINDOW_BACKOFF_MS)).toBe(40);
    // A 429 then halves what was in force, the ceiling.
    w = onThrottled(w, 40, WINDOW_BACKOFF_MS + 1);
    expect(windowSize(w, 40, WINDOW_BACKOFF_MS + 2)).toBe(20);
  });

  it("a ceiling that falls takes the window down with it", () => {
    const w = onThrottled(initialWindow(), 30, 0);
    expect(windowSize(w, 6, 1)).toBe(6);
    expect(windowSize(initialWindow(), 0, 1)).toBe(0);
  });

  it("property: without a 429 in the backoff period the window is the ceiling, whatever came before", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ ceil: fc.integer({ min: 0, max: 500 }), throttled: fc.boolean(), dt: fc.nat(20_000) }),
          {
            maxLength: 40,
          },
        ),
        fc.integer({ min: 0, max: 500 }),
        (steps, last) => {
          let w = initialWindow();
          let t = 0;
          let lastThrottle = -Infinity;
          for (const step of steps) {
            t += step.dt;
            if (step.throttled) {
              w = onThrottled(w, step.ceil, t);
              lastThrottle = t;
            } else w = onAccepted(w, step.ceil);
            expect(windowSize(w, step.ceil, t)).toBeLessThanOrEqual(step.ceil);
          }
          const later = Math.max(t, lastThrottle + WINDOW_BACKOFF_MS);
          expect(windowSize(w, last, later)).toBe(last);
        },
      ),
    );
  });
});

describe("the scaler the window is sized from", () => {
  it.each<[string, unknown, unknown, ReturnType<typeof scalerOf>]>([
    ["QUEUE_DELAY 4", "QUEUE_DELAY", 4, { type: "QUEUE_DELAY", seconds: 4 }],
    ["REQUEST_COUNT 2", "REQUEST_COUNT", 2, { type: "REQUEST_COUNT", perWorker: 2 }],
    ["no type reported", undefined, 4, undefined],
    ["no value reported", "REQUEST_COUNT", undefined, undefined],
    ["a type this controller does not know", "GPU_UTILIZATION", 4, undefined],
    ["a value of 0", "QUEUE_DELAY", 0, undefined],
    ["a value that is not a number", "QUEUE_DELAY", "4", undefined],
  ])("%s", (_name, type, value, expected) => {
    expect(scalerOf(type, value)).toEqual(expected);
  });
});

describe("the room of low-priority jobs (they never make the endpoint scale)", () => {
  it.each<[string, Parameters<typeof lowPriorityRoom>[0], number]>([
    [
      "an endpoint scaled to zero: none",
      { workersIdle: 0, workersRunning: 0, normalInFlight: 0, foreign: 0 },
      0,
    ],
    ["two idle workers: two", { workersIdle: 2, workersRunning: 0, normalInFlight: 0, foreign: 0 }, 2],
    [
      "workers busy with our normal jobs: none left",
      { workersIdle: 0, workersRunning: 3, normalInFlight: 3, foreign: 0 },
      0,
    ],
    [
      "normal jobs queued for workers still starting: none (they must not wait behind a low job)",
      { workersIdle: 1, workersRunning: 1, normalInFlight: 5, foreign: 0 },
      0,
    ],
    [
      "other clients' jobs take workers too",
      { workersIdle: 2, workersRunning: 3, normalInFlight: 1, foreign: 2 },
      2,
    ],
  ])("%s", (_name, input, expected) => {
    expect(lowPriorityRoom(input)).toBe(expected);
  });

  it("property: low jobs never outnumber the workers up that no normal or foreign job takes", () => {
    fc.assert(
      fc.property(fc.nat(50), fc.nat(50), fc.nat(100), fc.nat(100), (idle, running, normal, foreign) => {
        const room = lowPriorityRoom({
          workersIdle: idle,
          workersRunning: running,
          normalInFlight: normal,
          foreign,
        });
        expect(room).toBeGreaterThanOrEqual(0);
        expect(room + normal + foreign).toBeLessThanOrEqual(Math.max(idle + running, normal + foreign));
      }),
    );
  });
});
