// The dispatch benchmark's harness (bench/dispatch*.ts), small: each scenario of issue 39 replayed
// on the virtual clock with the product's Dispatcher and the simulator's engine, window on and off,
// under both QUEUE_DELAY readings. What is asserted is what a user relies on, not timings: every job
// ends once, none lost or stuck; low-priority jobs never hold normal ones back; the window keeps
// the provider's queue short yet reaches workersMax; a crash loop ends each job one way or the other.
import { describe, expect, it } from "vitest";
import { dispatchBench, SETUP } from "../../bench/dispatch.js";
import { replay, type ReplayMeasures } from "../../bench/dispatch-replay.js";
import { scenarios, type Scenario } from "../../bench/dispatch-scenarios.js";

const READINGS = ["perOverdueJob", "onePerDelay"] as const;
// 100 jobs where the issue has 2,000 (15 where it has 300); the low-priority scenario at full size.
const small = scenarios(0.05);
const full = scenarios(1);
const named = (list: Scenario[], prefix: string) => list.find((s) => s.name.startsWith(prefix))!;

const run = (s: Scenario, reading: (typeof READINGS)[number], window: boolean): ReplayMeasures =>
  replay(s, { ...SETUP, reading, seed: 7, window });

const clean = (m: ReplayMeasures) => ({ stuck: m.stuck, lost: m.lost, ranTwice: m.ranTwice });

describe.each(READINGS)("dispatch replays, QUEUE_DELAY read as %s", (reading) => {
  it.each(["scale from zero", "scale from zero, 2 s jobs", "workersMax raised"])(
    "%s: every job completes once with the window on and off; the window keeps the provider's queue short and still reaches workersMax",
    (prefix) => {
      const s = named(small, prefix);
      const on = run(s, reading, true);
      const off = run(s, reading, false);
      for (const m of [on, off]) {
        expect(m.completed).toBe(m.of);
        expect(clean(m)).toEqual({ stuck: 0, lost: 0, ranTwice: 0 });
      }
      // Without the window every job is at the provider at once; with it, the window's ceiling.
      expect(off.peakProviderQueue).toBe(off.of);
      expect(on.peakProviderQueue).toBeLessThan(on.of);
      expect(on.waits.WindowFull).toBeGreaterThan(0);
      if (off.secondsToWorkersMax !== null) expect(on.secondsToWorkersMax).not.toBeNull();
    },
  );

  it("REQUEST_COUNT with a backlog at leader start: the jobs wait for the scaler to be read, then all complete, the provider holding workersMax × 4 at most", () => {
    const s = named(full, "REQUEST_COUNT");
    const sized = { ...s, batches: [{ ...s.batches[0]!, count: 200 }] };
    const on = run(sized, reading, true);
    expect(on.waits.ScalerUnknown).toBeGreaterThan(0);
    expect(on.completed).toBe(200);
    expect(clean(on)).toEqual({ stuck: 0, lost: 0, ranTwice: 0 });
    expect(on.peakProviderQueue).toBeLessThanOrEqual(s.workersMax * s.scaler.value);
    // Sized for the REQUEST_COUNT scaler (120 jobs at the provider), the endpoint reaches workersMax.
    expect(on.secondsToWorkersMax).not.toBeNull();
  });

  it("100 low-priority jobs then 10 normal on 0 workers: the normal jobs are not held behind the low ones, and the low ones still finish", () => {
    const s = named(full, "100 low-priority");
    const on = run(s, reading, true);
    const off = run(s, reading, false);
    expect(on.completed).toBe(110);
    expect(clean(on)).toEqual({ stuck: 0, lost: 0, ranTwice: 0 });
    // Without the window the normal jobs queue at the provider behind all 100 low ones.
    expect(on.normalJobsDoneSeconds!).toBeLessThan(off.normalJobsDoneSeconds!);
    expect(on.normalJobsDoneSeconds!).toBeLessThanOrEqual(
      off.normalJobsDoneSeconds! + 2 * (s.coldStartSeconds + s.jobSeconds),
    );
    expect(on.waits.LowPriority).toBeGreaterThan(0);
    // No low job waits at the provider for a worker that will not come.
    expect(on.peakProviderQueue).toBeLessThanOrEqual(10);
  });

  it.each(["crash-looping workers, then recovery", "crash-looping workers past the start deadline"])(
    "%s: each job completes or ends StartDeadlineExceeded, none lost, stuck or run twice",
    (name) => {
      const s = named(full, name);
      const sized = { ...s, batches: [{ ...s.batches[0]!, count: 100 }] };
      for (const window of [true, false]) {
        const m = run(sized, reading, window);
        expect(m.completed + m.startDeadlineExceeded).toBe(100);
        expect(m.otherEnds).toBe(0);
        expect(clean(m)).toEqual({ stuck: 0, lost: 0, ranTwice: 0 });
      }
      const on = run(sized, reading, true);
      // The window keeps the jobs that wait in Kubernetes from using up their start deadline.
      expect(on.completed).toBeGreaterThan(0);
      if (name.includes("past")) expect(on.startDeadlineExceeded).toBeGreaterThan(0);
    },
  );
});

describe("the recorded section", () => {
  it("one row per scenario and reading, with the fields latest.json carries and a verdict per target", () => {
    const lines: string[] = [];
    const r = dispatchBench({ scale: 0.02, seed: 3, log: (l) => lines.push(l) });
    expect(r.scenarios).toHaveLength(scenarios().length * 2);
    for (const row of r.scenarios) {
      expect(Object.keys(row)).toEqual(
        expect.arrayContaining([
          "name",
          "reading",
          "drainSecondsOn",
          "drainSecondsOff",
          "ratio",
          "secondsToWorkersMax",
          "normalJobsDoneSeconds",
          "completed",
          "startDeadlineExceeded",
          "of",
        ]),
      );
      expect(row.targets.length).toBeGreaterThan(0);
    }
    // Each result is printed beside its target.
    expect(lines.join("\n")).toMatch(/drain on ≤ 1\.05 × off: (met|MISSED)/);
  });
});
