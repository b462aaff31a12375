import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { WorkQueue } from "../../src/runtime/workqueue.js";

// Logical time: delays, backoffs and requeue timers fire when the test advances the clock, so a
// stalled machine cannot reorder them.
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** A reconcile that takes `ms` of logical time. */
const work = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Moves logical time on by `ms`, running every timer and promise due meanwhile. */
const advance = (ms = 0) => vi.advanceTimersByTimeAsync(ms);

describe("WorkQueue", () => {
  it("collapses duplicates added before processing", async () => {
    const q = new WorkQueue();
    for (let i = 0; i < 5; i++) q.add("a");
    q.add("b");
    expect(q.length).toBe(2);
    expect(await q.get()).toBe("a");
    expect(await q.get()).toBe("b");
  });

  it("never hands out a key that is being processed; re-adds it after done()", async () => {
    const q = new WorkQueue();
    q.add("a");
    const key = await q.get();
    q.add("a"); // while processing
    expect(q.length).toBe(0);
    q.done(key!);
    expect(q.length).toBe(1);
    expect(await q.get()).toBe("a");
  });

  it("hands out an urgent key before the queued ones, once, and a queued key it jumped once", async () => {
    const q = new WorkQueue();
    for (const k of ["a", "b", "c"]) q.add(k);
    q.addUrgent("c"); // already queued: moved ahead
    q.addUrgent("d"); // new: ahead too
    const got: string[] = [];
    for (let i = 0; i < 4; i++) {
      const k = (await q.get())!;
      got.push(k);
      q.done(k);
    }
    expect(got).toEqual(["c", "d", "a", "b"]);
    // Nothing left: c's first queue entry was stale.
    q.add("e");
    expect(await q.get()).toBe("e");
  });

  it("an urgent key being processed runs again after done(), not twice at once", async () => {
    const q = new WorkQueue();
    q.add("a");
    q.add("b");
    const a = await q.get();
    q.addUrgent("a");
    expect(await q.get()).toBe("b");
    q.done(a!);
    expect(await q.get()).toBe("a");
  });

  it("runs a key on one worker at a time, even under many workers and re-adds", async () => {
    const q = new WorkQueue();
    let running = 0;
    let maxRunning = 0;
    let runs = 0;
    const reconcile = async () => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      runs++;
      await work(5);
      running--;
    };
    const done = q.run(8, reconcile);
    for (let i = 0; i < 50; i++) {
      q.add("same");
      await advance(1);
    }
    await advance(30);
    q.shutdown();
    await done;
    expect(maxRunning).toBe(1);
    expect(runs).toBeGreaterThan(1);
    expect(runs).toBeLessThan(50);
  });

  it("backs off per key exponentially on errors and forgets on success", async () => {
    const q = new WorkQueue({ baseDelayMs: 10, maxDelayMs: 40 });
    expect(q.addRateLimited("a")).toBe(10);
    expect(q.addRateLimited("a")).toBe(20);
    expect(q.addRateLimited("a")).toBe(40);
    expect(q.addRateLimited("a")).toBe(40);
    expect(q.addRateLimited("b")).toBe(10);
    q.forget("a");
    expect(q.failuresOf("a")).toBe(0);
    q.shutdown();
  });

  it("a resync add leaves a key on its backoff; a plain add (an event) does not", async () => {
    const q = new WorkQueue({ baseDelayMs: 60_000 });
    q.addRateLimited("failing");
    expect(q.isBackingOff("failing")).toBe(true);
    q.addUnlessBackingOff("failing");
    q.addUnlessBackingOff("healthy");
    expect(q.length).toBe(1);
    expect(await q.get()).toBe("healthy");
    q.add("failing"); // the object changed: look at it now
    expect(await q.get()).toBe("failing");
    q.shutdown();
  });

  it("requeues after an error and after requeueAfterMs, keeping the earliest timer", async () => {
    const q = new WorkQueue({ baseDelayMs: 5 });
    const seen: string[] = [];
    let failOnce = true;
    const done = q.run(2, async (key) => {
      seen.push(key);
      if (key === "err" && failOnce) {
        failOnce = false;
        throw new Error("boom");
      }
      if (key === "poll" && seen.filter((k) => k === "poll").length === 1)
        return { result: { requeueAfterMs: 20 } };
    });
    q.add("err");
    q.add("poll");
    q.addAfter("late", 1000);
    q.addAfter("late", 10); // earlier timer wins
    await advance(80);
    q.shutdown();
    await done;
    expect(seen.filter((k) => k === "err")).toHaveLength(2);
    expect(seen.filter((k) => k === "poll")).toHaveLength(2);
    expect(seen).toContain("late");
  });

  it("acts on a reconcile's (result, error) as controller-runtime does: a terminal error is not retried", async () => {
    const outcomes: string[] = [];
    const terminal: string[] = [];
    const q = new WorkQueue({
      baseDelayMs: 5,
      onDone: (key, _ms, outcome) => outcomes.push(`${key} ${outcome}`),
      onTerminalError: (key, err) => terminal.push(`${key}: ${err.message}`),
    });
    const seen: string[] = [];
    const done = q.run(1, async (key) => {
      seen.push(key);
      if (key === "impossible") return { error: { terminal: true, message: "name taken" } };
      if (key === "flaky" && seen.filter((k) => k === "flaky").length === 1)
        return { error: { terminal: false, message: "try again" } };
      if (key === "expiring")
        return { result: { requeueAfterMs: 1_000 }, error: { terminal: true, message: "x" } };
    });
    q.add("impossible");
    q.add("flaky");
    q.add("expiring");
    await advance(100);
    expect(seen.filter((k) => k === "impossible")).toHaveLength(1); // never retried
    expect(q.failuresOf("impossible")).toBe(0);
    expect(seen.filter((k) => k === "flaky")).toHaveLength(2); // retried with backoff, then forgotten
    expect(q.failuresOf("flaky")).toBe(0);
    expect(terminal).toEqual(["impossible: name taken", "expiring: x"]);
    // A terminal error ends the retries, not the object's timers.
    await advance(1_000);
    expect(seen.filter((k) => k === "expiring")).toHaveLength(2);
    q.shutdown();
    await done;
    expect(outcomes.slice(0, 5)).toEqual([
      "impossible terminal_error",
      "flaky error",
      "expiring terminal_error",
      "flaky success",
      "expiring terminal_error",
    ]);
  });

  it("lets in-flight work finish on shutdown and hands out nothing more", async () => {
    const q = new WorkQueue();
    let finished = 0;
    const done = q.run(1, async () => {
      await work(20);
      finished++;
    });
    q.add("a");
    q.add("b");
    await advance(5);
    q.shutdown();
    await advance(20);
    await done;
    expect(finished).toBe(1);
  });
});

describe("the delaying queue (one timer for every waiting key)", () => {
  it("hands out waiting keys in order of their time, each once, an earlier time replacing a later one", async () => {
    const q = new WorkQueue();
    q.addAfter("c", 30);
    q.addAfter("a", 40);
    q.addAfter("b", 20);
    q.addAfter("a", 10); // earlier: replaces 40
    q.addAfter("b", 50); // later: ignored, 20 stays
    expect(q.length).toBe(0);
    await advance(10);
    expect(q.length).toBe(1);
    await advance(10);
    expect(q.length).toBe(2);
    await advance(10);
    const got: string[] = [];
    while (q.length) {
      const key = (await q.get())!;
      got.push(key);
      q.done(key);
    }
    expect(got).toEqual(["a", "b", "c"]);
    // The superseded times of "a" (40) and "b" (50) add nothing when they come up.
    await advance(30);
    expect(q.length).toBe(0);
    q.shutdown();
  });
});
