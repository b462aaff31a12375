// status.cost per account: settled buckets counted once (a deleted job's share stays), open ones
// recomputed, a new period from 0.
import { describe, expect, it } from "vitest";
import {
  costWindowStart,
  planAccountCosts,
  settledFrom,
  type AccountCost,
} from "../../src/billing/account-cost.js";

const H = 3_600_000;
const P = Date.parse("2026-11-01T00:00:00Z");
const b = (hour: number, amountMicros: number) => ({
  endpointId: "ep",
  startMs: P + hour * H,
  endMs: P + (hour + 1) * H,
  amountMicros,
});
const s = (account: string, hour: number, ms: number) => ({
  account,
  endpointId: "ep",
  startMs: P + hour * H,
  endMs: P + hour * H + ms,
});

describe("planAccountCosts", () => {
  const now = P + 5 * H + 10 * 60_000; // 05:10: buckets ending by 04:00 are settled (1 h after)
  const buckets = [b(0, 100), b(3, 90), b(4, 60), b(5, 30)];
  const spans = [s("a", 0, 1_000), s("a", 3, 2_000), s("b", 3, 1_000), s("a", 4, 1_000), s("b", 5, 1_000)];

  it("settles buckets ended an hour ago, and adds the later ones as they stand", () => {
    const plan = planAccountCosts({
      accounts: [
        { account: "a", periodStartMs: P },
        { account: "b", periodStartMs: P },
      ],
      buckets,
      spans,
      nowMs: now,
      settleAfterMs: H,
    });
    expect(plan.get("a")).toEqual({
      periodStart: "2026-11-01T00:00:00.000Z",
      settledUntil: "2026-11-01T04:00:00.000Z",
      settledMicros: 160,
      settledExecutionMs: 3_000,
      allocatedMicros: 220,
      executionMs: 4_000,
    });
    expect(plan.get("b")).toMatchObject({ settledMicros: 30, allocatedMicros: 60 });
  });

  it("never counts a settled bucket twice, and keeps it when its job's spans are gone (deleted)", () => {
    const current: AccountCost = {
      periodStart: "2026-11-01T00:00:00.000Z",
      settledUntil: "2026-11-01T04:00:00.000Z",
      settledMicros: 160,
      settledExecutionMs: 3_000,
      allocatedMicros: 220,
      executionMs: 4_000,
    };
    // The same pass again, the early jobs deleted: the settled figures stand.
    const again = planAccountCosts({
      accounts: [{ account: "a", periodStartMs: P, current }],
      buckets,
      spans: spans.filter((x) => x.startMs >= P + 4 * H),
      nowMs: now,
      settleAfterMs: H,
    });
    expect(again.get("a")).toEqual(current);
    expect(costWindowStart([{ account: "a", periodStartMs: P, current }], now, H)).toBe(P + 4 * H);
  });

  it("starts a new period at 0", () => {
    const old: AccountCost = {
      periodStart: "2026-10-01T00:00:00.000Z",
      settledUntil: "2026-10-31T23:00:00.000Z",
      settledMicros: 9_999,
      settledExecutionMs: 1,
      allocatedMicros: 9_999,
      executionMs: 1,
    };
    const plan = planAccountCosts({
      accounts: [{ account: "a", periodStartMs: P, current: old }],
      buckets: [b(0, 100)],
      spans: [s("a", 0, 1_000)],
      nowMs: P + 30 * 60_000,
      settleAfterMs: H,
    });
    expect(plan.get("a")).toMatchObject({
      periodStart: "2026-11-01T00:00:00.000Z",
      settledMicros: 0,
      allocatedMicros: 100,
    });
  });
});

describe("the worker-cost figure and where settling resumes", () => {
  const current: AccountCost = {
    periodStart: "2026-11-01T00:00:00.000Z",
    settledUntil: "2026-11-01T03:00:00.000Z",
    settledMicros: 100,
    settledExecutionMs: 1_000,
    allocatedMicros: 100,
    executionMs: 1_000,
    workerCostMeteredMicros: 100,
  };
  it("carries what was metered through the period, and starts over with a new one", () => {
    const plan = (periodStartMs: number) =>
      planAccountCosts({
        accounts: [{ account: "a", periodStartMs, current }],
        buckets: [],
        spans: [],
        nowMs: P + 5 * H,
        settleAfterMs: H,
      }).get("a")!;
    expect(plan(P).workerCostMeteredMicros).toBe(100);
    expect(plan(P + 30 * 24 * H).workerCostMeteredMicros).toBeUndefined();
  });
  it("resumes where the settled figures end, or at a new period's start", () => {
    expect(settledFrom({ account: "a", periodStartMs: P, current })).toBe(P + 3 * H);
    expect(settledFrom({ account: "a", periodStartMs: P + 30 * 24 * H, current })).toBe(P + 30 * 24 * H);
  });
});
