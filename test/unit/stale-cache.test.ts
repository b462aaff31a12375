import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { StaleCacheGuard } from "../../src/runtime/stale-cache.js";

describe("stale-cache guard", () => {
  it("knows no version of a key it was told nothing about", () => {
    const guard = new StaleCacheGuard();
    expect(guard.isStale("ns/a", "1")).toBe(false);
    expect(guard.isStale("ns/a", undefined)).toBe(false);
  });

  it("calls the version written over stale, not the one written", () => {
    const guard = new StaleCacheGuard();
    guard.remember("ns/a", "10", "11");
    expect(guard.isStale("ns/a", "10")).toBe(true);
    expect(guard.isStale("ns/a", "11")).toBe(false);
    expect(guard.isStale("ns/a", undefined)).toBe(false);
    expect(guard.isStale("ns/b", "10")).toBe(false);
  });

  it("keeps every version written over until the key is forgotten", () => {
    const guard = new StaleCacheGuard();
    guard.remember("ns/a", "10", "11");
    guard.remember("ns/a", "11", "12");
    guard.remember("ns/a", "12", "13");
    expect(["10", "11", "12", "13"].map((rv) => guard.isStale("ns/a", rv))).toEqual([
      true,
      true,
      true,
      false,
    ]);
    guard.forget("ns/a");
    expect(["10", "11", "12"].map((rv) => guard.isStale("ns/a", rv))).toEqual([false, false, false]);
  });

  it("ignores a write whose versions are not both known", () => {
    const guard = new StaleCacheGuard();
    guard.remember("ns/a", undefined, "11");
    guard.remember("ns/a", "10", undefined);
    guard.remember("ns/a", "", "11");
    expect(guard.isStale("ns/a", "10")).toBe(false);
    expect(guard.isStale("ns/a", "")).toBe(false);
  });

  it("takes back a version written over once a write returns it again", () => {
    const guard = new StaleCacheGuard();
    guard.remember("ns/a", "10", "11");
    guard.remember("ns/a", "11", "10");
    expect(guard.isStale("ns/a", "10")).toBe(false);
    expect(guard.isStale("ns/a", "11")).toBe(true);
    guard.remember("ns/a", "12", "11");
    expect(guard.isStale("ns/a", "11")).toBe(false);
    expect(guard.isStale("ns/a", "12")).toBe(true);
  });

  it("tells apart versions that are not short decimals, as the opaque strings they are", () => {
    const guard = new StaleCacheGuard();
    guard.remember("ns/a", "0042", "v2");
    guard.remember("ns/a", "12345678901", "v3");
    expect(guard.isStale("ns/a", "0042")).toBe(true);
    expect(guard.isStale("ns/a", "42")).toBe(false);
    expect(guard.isStale("ns/a", "12345678901")).toBe(true);
    expect(guard.isStale("ns/a", "v2")).toBe(false);
    guard.remember("ns/a", "42", "0042");
    expect(guard.isStale("ns/a", "0042")).toBe(false);
    expect(guard.isStale("ns/a", "42")).toBe(true);
  });

  it("answers as a set of versions per key would, over any sequence of writes and forgets", () => {
    const versions = ["1", "2", "3", "7", "10", "010", "x", "99999999999"];
    const keys = ["ns/a", "ns/b", "ns/c"];
    const step = fc.oneof(
      { arbitrary: fc.record({ forget: fc.constantFrom(...keys) }), weight: 1 },
      {
        arbitrary: fc.record({
          key: fc.constantFrom(...keys),
          from: fc.constantFrom(...versions),
          to: fc.constantFrom(...versions),
        }),
        weight: 9,
      },
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 200 }), (steps) => {
        const guard = new StaleCacheGuard();
        const model = new Map<string, Set<string>>();
        for (const s of steps) {
          if ("forget" in s) {
            guard.forget(s.forget);
            model.delete(s.forget);
          } else {
            guard.remember(s.key, s.from, s.to);
            const set = model.get(s.key) ?? new Set<string>();
            set.add(s.from);
            set.delete(s.to);
            model.set(s.key, set);
          }
          for (const k of keys)
            for (const rv of versions) expect(guard.isStale(k, rv)).toBe(model.get(k)?.has(rv) ?? false);
        }
      }),
    );
  });
});
