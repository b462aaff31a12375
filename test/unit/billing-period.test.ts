// A BillingAccount's period usage kept from its jobs' attempts: each attempt's seconds added once,
// whatever the order of the two writes and however often a pass repeats; a period that ended
// starts over.
import { describe, expect, it } from "vitest";
import { calendarPeriod, countedUsage, type UncountedAttempt } from "../../src/billing/period.js";

const NOW = new Date("2026-11-25T12:00:00.000Z");
const used = (id: string, seconds: number, endedAt = "2026-11-25T11:00:00.000Z"): UncountedAttempt => ({
  id,
  kind: "used",
  seconds,
  endedAt,
});
const reported = (id: string, seconds: number): UncountedAttempt => ({
  ...used(`${id}+reported`, seconds),
  kind: "reported",
});

describe("countedUsage", () => {
  it("starts the calendar month when the account has no period, and adds each attempt once", () => {
    const first = countedUsage({
      current: undefined,
      uncounted: [used("a", 3), used("b", 4)],
      live: new Set(["a", "b"]),
      now: NOW,
    });
    expect(first).toEqual({
      ...calendarPeriod(NOW),
      periodStart: "2026-11-01T00:00:00.000Z",
      periodEnd: "2026-12-01T00:00:00.000Z",
      usedSeconds: 7,
      reportedSeconds: 0,
      counting: ["a", "b"],
    });
    // The controller died before marking the jobs: the same attempts again add nothing.
    const again = countedUsage({
      current: first,
      uncounted: [used("a", 3), used("b", 4)],
      live: new Set(["a", "b"]),
      now: NOW,
    });
    expect(again).toEqual(first);
    // The jobs are marked (no longer live): the list empties, the seconds stay.
    const done = countedUsage({ current: again, uncounted: [], live: new Set(), now: NOW });
    expect(done).toEqual({ ...calendarPeriod(NOW), usedSeconds: 7, reportedSeconds: 0 });
  });

  it("reported seconds count apart from used ones, once", () => {
    const u = countedUsage({ current: undefined, uncounted: [used("a", 3)], live: new Set(["a"]), now: NOW });
    const r = countedUsage({
      current: u,
      uncounted: [reported("a", 3)],
      live: new Set(["a", "a+reported"]),
      now: NOW,
    });
    expect(r).toMatchObject({ usedSeconds: 3, reportedSeconds: 3, counting: ["a", "a+reported"] });
    expect(
      countedUsage({ current: r, uncounted: [reported("a", 3)], live: new Set(["a+reported"]), now: NOW }),
    ).toMatchObject({
      usedSeconds: 3,
      reportedSeconds: 3,
      counting: ["a+reported"],
    });
  });

  it("an attempt that ended before the period is marked but not added; an ended period starts over", () => {
    const current = { ...calendarPeriod(NOW), usedSeconds: 10, reportedSeconds: 10, limitSeconds: 100 };
    const old = countedUsage({
      current,
      uncounted: [used("late", 5, "2026-10-31T23:59:59.000Z")],
      live: new Set(["late"]),
      now: NOW,
    });
    expect(old).toMatchObject({ usedSeconds: 10, counting: ["late"] });
    const december = new Date("2026-12-02T00:00:00.000Z");
    expect(
      countedUsage({
        current,
        uncounted: [used("d", 2, "2026-12-01T10:00:00.000Z")],
        live: new Set(["d"]),
        now: december,
      }),
    ).toEqual({
      periodStart: "2026-12-01T00:00:00.000Z",
      periodEnd: "2027-01-01T00:00:00.000Z",
      usedSeconds: 2,
      reportedSeconds: 0,
      limitSeconds: 100,
      counting: ["d"],
    });
  });
});
