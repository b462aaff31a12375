// A BillingAccount's period usage kept from its jobs' attempts: each attempt's seconds added once,
// whatever the order of the two writes and however often a pass repeats; a period that ended
// starts over.
import { describe, expect, it } from "vitest";
import { calendarPeriod, countedUsage, periodAt, type UncountedAttempt } from "../../src/billing/period.js";

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

describe("countedUsage on the subscription's own period", () => {
  // A subscription anchored on the 15th: its period is Nov 15 – Dec 15, not the calendar month.
  const sub = { start: "2026-11-15T08:00:00.000Z", end: "2026-12-15T08:00:00.000Z" };

  it("counts into the subscription's period, and starts it over from the calendar month's figures", () => {
    const calendar = countedUsage({
      current: undefined,
      uncounted: [used("a", 3)],
      live: new Set(["a"]),
      now: NOW,
    });
    expect(calendar.periodStart).toBe("2026-11-01T00:00:00.000Z");
    // The first event with the period arrives: figures of another period start over on it.
    const own = countedUsage({
      current: calendar,
      uncounted: [used("b", 4)],
      live: new Set(["b"]),
      now: NOW,
      subscriptionPeriod: sub,
    });
    expect(own).toEqual({
      periodStart: sub.start,
      periodEnd: sub.end,
      usedSeconds: 4,
      reportedSeconds: 0,
      counting: ["b"],
    });
    // Dec 1 is no new period for it: a calendar month would have reset the cap here (up to 2x a
    // period's seconds on one invoice).
    const dec = countedUsage({
      current: own,
      uncounted: [used("c", 5, "2026-12-01T10:00:00.000Z")],
      live: new Set(["b", "c"]),
      now: new Date("2026-12-02T00:00:00.000Z"),
      subscriptionPeriod: sub,
    });
    expect(dec).toMatchObject({ periodStart: sub.start, usedSeconds: 9 });
  });

  it("rolls over at the subscription's renewal even before the renewal's event arrives", () => {
    const after = new Date("2026-12-16T00:00:00.000Z");
    expect(periodAt(after, sub)).toEqual({
      periodStart: "2026-12-15T08:00:00.000Z",
      periodEnd: "2027-01-15T08:00:00.000Z",
    });
  });
});

describe("periodAt", () => {
  const at = (iso: string) => new Date(iso);
  it.each<[string, { start: string; end: string } | undefined, string, [string, string]]>([
    [
      "no subscription period: the calendar month",
      undefined,
      "2026-02-10T00:00:00Z",
      ["2026-02-01", "2026-03-01"],
    ],
    [
      "inside the subscription's period",
      { start: "2026-01-15", end: "2026-02-15" },
      "2026-02-10",
      ["2026-01-15", "2026-02-15"],
    ],
    [
      "months later: whole months from its start",
      { start: "2026-01-15", end: "2026-02-15" },
      "2026-05-20",
      ["2026-05-15", "2026-06-15"],
    ],
    // Stripe's anchor on the 31st bills to the last day of shorter months.
    [
      "anchored on the 31st, across February",
      { start: "2026-01-31", end: "2026-02-28" },
      "2026-03-05",
      ["2026-02-28", "2026-03-31"],
    ],
    [
      "a yearly period",
      { start: "2026-03-01", end: "2027-03-01" },
      "2027-06-01",
      ["2027-03-01", "2028-03-01"],
    ],
    [
      "a weekly period: its length",
      { start: "2026-01-05", end: "2026-01-12" },
      "2026-01-20",
      ["2026-01-19", "2026-01-26"],
    ],
    [
      "before the period: the one before it",
      { start: "2026-01-15", end: "2026-02-15" },
      "2026-01-10",
      ["2025-12-15", "2026-01-15"],
    ],
    [
      "an empty period is ignored",
      { start: "2026-01-15", end: "2026-01-15" },
      "2026-02-10",
      ["2026-02-01", "2026-03-01"],
    ],
  ])("%s", (_n, sub, now, [start, end]) => {
    const p = periodAt(
      at(now),
      sub && { start: at(sub.start).toISOString(), end: at(sub.end).toISOString() },
    );
    expect(p).toEqual({ periodStart: at(start).toISOString(), periodEnd: at(end).toISOString() });
  });
});
