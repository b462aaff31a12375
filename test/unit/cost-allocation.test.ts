// The provider's bill allocated to accounts: per bucket by execution time inside it, integers,
// largest remainder, nothing lost (allocated + unallocated is the provider's amount exactly).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  allocate,
  allocateBucket,
  usdToMicros,
  type ExecutionSpan,
} from "../../src/billing/cost-allocation.js";

const H = 3_600_000;
const bucket = (amountMicros: number, startMs = 0, endpointId = "ep1") => ({
  endpointId,
  startMs,
  endMs: startMs + H,
  amountMicros,
});
const span = (account: string, startMs: number, endMs: number, endpointId = "ep1"): ExecutionSpan => ({
  account,
  endpointId,
  startMs,
  endMs,
});

describe("allocateBucket", () => {
  it.each<[string, number, ExecutionSpan[], Record<string, number>, number]>([
    ["one account takes all", 1_000, [span("a", 0, 10_000)], { a: 1_000 }, 0],
    ["in proportion to time", 900, [span("a", 0, 20_000), span("b", 0, 10_000)], { a: 600, b: 300 }, 0],
    // 100 / 3: 33 each and one micro left, to the largest remainder, ties by name.
    [
      "the remainder by name on a tie",
      100,
      [span("b", 0, 1), span("a", 0, 1), span("c", 0, 1)],
      { a: 34, b: 33, c: 33 },
      0,
    ],
    ["the remainder to the largest remainder", 10, [span("a", 0, 1), span("b", 0, 2)], { a: 3, b: 7 }, 0],
    [
      "only the time inside the bucket counts",
      100,
      [span("a", -5_000, 5_000), span("b", H - 5_000, H + 60_000)],
      { a: 50, b: 50 },
      0,
    ],
    ["another endpoint's time is not this one's", 100, [span("a", 0, 1_000, "ep2")], {}, 100],
    ["idle workers with no job: unallocated", 250, [], {}, 250],
  ])("%s", (_n, amount, spans, want, unallocated) => {
    const a = allocateBucket(bucket(amount), spans);
    expect(Object.fromEntries(a.byAccount)).toEqual(want);
    expect(a.unallocatedMicros).toBe(unallocated);
  });

  it("holds exactly for any amount and spans (allocated + unallocated = the provider's amount)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 45 }),
        fc.array(
          fc.record({
            account: fc.constantFrom("a", "b", "c", "d"),
            start: fc.integer({ min: -H, max: 2 * H }),
            len: fc.integer({ min: 0, max: 2 * H }),
          }),
          { maxLength: 30 },
        ),
        (amount, raw) => {
          const a = allocateBucket(
            bucket(amount),
            raw.map((r) => span(r.account, r.start, r.start + r.len)),
          );
          const sum = [...a.byAccount.values()].reduce((x, y) => x + y, 0);
          expect(sum + a.unallocatedMicros).toBe(amount);
          for (const v of a.byAccount.values()) expect(Number.isSafeInteger(v) && v >= 0).toBe(true);
        },
      ),
    );
  });
});

describe("allocate", () => {
  it("sums buckets per account and per endpoint, within the window", () => {
    const buckets = [bucket(100, 0), bucket(60, H), bucket(40, 2 * H), bucket(7, 0, "ep2")];
    const spans = [span("a", 0, 1_000), span("a", H, H + 1_000), span("b", H, H + 2_000)];
    const r = allocate(buckets, spans, undefined, 0, 2 * H);
    expect(Object.fromEntries(r.accounts)).toEqual({
      a: { micros: 120, executionMs: 2_000 },
      b: { micros: 40, executionMs: 2_000 },
    });
    expect(Object.fromEntries(r.unallocated)).toEqual({ ep2: 7 });
  });

  it("leaves the share of a job with no known account unallocated: it ran, and is nobody's to charge", () => {
    const r = allocate([bucket(90)], [span("a", 0, 2_000), span("", 0, 1_000)], new Set(["a"]));
    expect(Object.fromEntries(r.accounts)).toEqual({ a: { micros: 60, executionMs: 2_000 } });
    expect(Object.fromEntries(r.unallocated)).toEqual({ ep1: 30 });
  });

  it("reads RunPod's USD amounts to the micro-USD", () => {
    expect(usdToMicros(0.000123)).toBe(123);
    expect(usdToMicros(12.3456789)).toBe(12_345_679);
  });
});
