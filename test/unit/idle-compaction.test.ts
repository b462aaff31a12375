import { afterEach, describe, expect, it, vi } from "vitest";
import { IdleCompaction, runtimeCollector } from "../../src/runtime/idle-compaction.js";

const policy = { minWork: 100, idleMs: 5_000, minIntervalMs: 60_000 };

function setup() {
  let now = 1_000_000;
  const collect = vi.fn();
  const compaction = new IdleCompaction(collect, policy, () => now);
  return { compaction, collect, advance: (ms: number) => (now += ms) };
}

describe("idle compaction", () => {
  it("collects once a burst of work has been quiet for the idle time", () => {
    const { compaction, collect, advance } = setup();
    compaction.noteWork(100);
    advance(4_999);
    expect(compaction.check()).toBe(false);
    advance(1);
    expect(compaction.check()).toBe(true);
    expect(collect).toHaveBeenCalledTimes(1);
    expect(compaction.collections).toBe(1);
  });

  it("does not collect while work goes on, however long", () => {
    const { compaction, collect, advance } = setup();
    for (let i = 0; i < 1000; i++) {
      compaction.noteWork();
      advance(1_000);
      compaction.check();
    }
    expect(collect).not.toHaveBeenCalled();
    advance(5_000);
    expect(compaction.check()).toBe(true);
  });

  it("does not collect after too little work, nor again without new work", () => {
    const { compaction, collect, advance } = setup();
    compaction.noteWork(99);
    advance(10_000);
    expect(compaction.check()).toBe(false);
    compaction.noteWork(1);
    advance(5_000);
    expect(compaction.check()).toBe(true);
    advance(120_000);
    expect(compaction.check()).toBe(false);
    expect(collect).toHaveBeenCalledTimes(1);
  });

  it("collects at most once per interval, and later for the work done in between", () => {
    const { compaction, collect, advance } = setup();
    compaction.noteWork(100);
    advance(5_000);
    expect(compaction.check()).toBe(true);
    compaction.noteWork(100);
    advance(5_000);
    expect(compaction.check()).toBe(false); // 5 s after the last collection
    advance(55_000);
    expect(compaction.check()).toBe(true); // 60 s after it
    expect(collect).toHaveBeenCalledTimes(2);
  });

  it("does nothing without a collector", () => {
    const compaction = new IdleCompaction(undefined, policy);
    compaction.noteWork(1_000);
    expect(compaction.enabled).toBe(false);
    expect(compaction.check()).toBe(false);
  });
});

describe("the runtime's collector", () => {
  const g = globalThis as { gc?: unknown };
  const saved = g.gc;
  afterEach(() => {
    if (saved === undefined) delete g.gc;
    else g.gc = saved;
  });

  it("is absent when Node does not expose gc", () => {
    delete g.gc;
    expect(runtimeCollector()).toBeUndefined();
  });

  it("asks for a full, memory-reducing collection", () => {
    const gc = vi.fn();
    g.gc = gc;
    runtimeCollector()!();
    expect(gc).toHaveBeenCalledWith({ type: "major", execution: "sync", flavor: "last-resort" });
  });
});
