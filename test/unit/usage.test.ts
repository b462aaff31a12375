// The billing rule for one job's usage: integer milliseconds summed, one rounding up to whole
// seconds, a minimum, failed jobs by choice; and the meter identifier and send verdicts.
import { describe, expect, it } from "vitest";
import {
  BillingRuleSchema,
  DEFAULT_BILLING_RULE,
  billableSeconds,
  meterIdentifier,
  meterSendVerdict,
  type BillingRule,
  type ReportedUsage,
} from "../../src/mediajob/usage.js";

const rule = (r: Partial<BillingRule> = {}): BillingRule => BillingRuleSchema.parse(r);
const DAY = 24 * 3600;

describe("billableSeconds", () => {
  const cases: Array<[string, ReportedUsage, Partial<BillingRule>, number]> = [
    [
      "execution rounds up to the next second",
      { status: "COMPLETED", executionTime: 1001, delayTime: 5000 },
      {},
      2,
    ],
    ["an exact second stays", { status: "COMPLETED", executionTime: 3000 }, {}, 3],
    ["one millisecond is one second", { status: "COMPLETED", executionTime: 1 }, {}, 1],
    ["no execution is nothing", { status: "COMPLETED", executionTime: 0, delayTime: 900 }, {}, 0],
    ["absent times are 0", { status: "CANCELLED" }, {}, 0],
    [
      "with delay: summed in ms before rounding (0.5 s + 0.6 s = 2 s, not 1 + 1)",
      { status: "COMPLETED", executionTime: 500, delayTime: 600 },
      { billedTime: "executionAndDelay" },
      2,
    ],
    [
      "with delay: 0.4 s + 0.4 s is one second",
      { status: "COMPLETED", executionTime: 400, delayTime: 400 },
      { billedTime: "executionAndDelay" },
      1,
    ],
    [
      "a minimum raises a short job",
      { status: "COMPLETED", executionTime: 1200 },
      { minimumSeconds: 10 },
      10,
    ],
    [
      "a minimum leaves a longer job",
      { status: "COMPLETED", executionTime: 12_001 },
      { minimumSeconds: 10 },
      13,
    ],
    [
      "a minimum never bills a job that never ran",
      { status: "CANCELLED", delayTime: 4000 },
      { minimumSeconds: 10 },
      0,
    ],
    [
      "a cancelled job bills what it ran",
      { status: "CANCELLED", executionTime: 7500, delayTime: 100 },
      {},
      8,
    ],
    ["failed jobs are billed by default", { status: "FAILED", executionTime: 2500 }, {}, 3],
    ["timed-out jobs are billed by default", { status: "TIMED_OUT", executionTime: 5000 }, {}, 5],
    [
      "failed jobs are free when billFailed is off",
      { status: "FAILED", executionTime: 2500 },
      { billFailed: false },
      0,
    ],
    [
      "timed out too",
      { status: "TIMED_OUT", executionTime: 5000 },
      { billFailed: false, minimumSeconds: 3 },
      0,
    ],
    [
      "cancelled jobs are billed even with billFailed off",
      { status: "CANCELLED", executionTime: 2500 },
      { billFailed: false },
      3,
    ],
    ["a fractional ms is rounded up, never lost", { status: "COMPLETED", executionTime: 1000.2 }, {}, 2],
    ["seven days of execution", { status: "TIMED_OUT", executionTime: 7 * DAY * 1000 }, {}, 7 * DAY],
  ];
  it.each(cases)("%s", (_name, usage, r, seconds) => {
    const got = billableSeconds(usage, rule(r));
    expect(got).toMatchObject({ ok: true, seconds });
    if (got.ok) expect(Number.isInteger(got.seconds) && Number.isInteger(got.billedMs)).toBe(true);
  });

  it.each([
    ["a queued job", { status: "IN_QUEUE" } as ReportedUsage],
    ["a running job", { status: "IN_PROGRESS", executionTime: 1000 } as ReportedUsage],
    ["a negative time", { status: "COMPLETED", executionTime: -1 } as ReportedUsage],
    ["NaN", { status: "COMPLETED", executionTime: Number.NaN } as ReportedUsage],
    ["Infinity", { status: "COMPLETED", delayTime: Number.POSITIVE_INFINITY } as ReportedUsage],
    ["a year and more", { status: "COMPLETED", executionTime: 400 * DAY * 1000 } as ReportedUsage],
  ])("refuses %s", (_name, usage) => {
    expect(billableSeconds(usage, rule({ billedTime: "executionAndDelay" })).ok).toBe(false);
  });

  it("defaults to execution only, no minimum, failed jobs billed", () => {
    expect(DEFAULT_BILLING_RULE).toEqual({ billedTime: "execution", minimumSeconds: 0, billFailed: true });
  });

  it("a rule that is not whole seconds is rejected", () => {
    expect(BillingRuleSchema.safeParse({ minimumSeconds: 1.5 }).success).toBe(false);
    expect(BillingRuleSchema.safeParse({ billedTime: "wallclock" }).success).toBe(false);
  });

  it("summing per-job seconds equals summing each job's own rounding (no cross-job rounding)", () => {
    const jobs = [1, 999, 1000, 1001, 1999, 2000].map((ms) =>
      billableSeconds({ status: "COMPLETED", executionTime: ms }),
    );
    const total = jobs.reduce((s, j) => s + (j.ok ? j.seconds : 0), 0);
    expect(total).toBe(1 + 1 + 1 + 2 + 2 + 2);
  });
});

describe("meterIdentifier", () => {
  const uid = "0d9f5c1e-3b7a-4c2d-9e8f-1a2b3c4d5e6f";
  it("is the same for every report of one attempt, different across attempts and objects", () => {
    expect(meterIdentifier({ uid, attempt: 1 })).toBe(meterIdentifier({ uid, attempt: 1 }));
    expect(meterIdentifier({ uid, attempt: 2 })).not.toBe(meterIdentifier({ uid, attempt: 1 }));
    expect(meterIdentifier({ uid: uid.replace("0d", "0e"), attempt: 1 })).not.toBe(
      meterIdentifier({ uid, attempt: 1 }),
    );
  });
  it("fits the payment provider's 100 characters", () => {
    expect(meterIdentifier({ uid, attempt: Number.MAX_SAFE_INTEGER }).length).toBeLessThanOrEqual(100);
  });
  it.each([
    ["", 1],
    ["a_b", 1],
    [uid, 0],
    [uid, 1.5],
  ])("refuses uid %j attempt %j", (u, attempt) => {
    expect(() => meterIdentifier({ uid: u, attempt })).toThrow(RangeError);
  });
});

describe("meterSendVerdict", () => {
  const now = 1_800_000_000;
  it.each([
    ["a fresh report is sent at its end time", now - 60, undefined, { send: "now", timestamp: now - 60 }],
    [
      "a retry within the dedup window is sent",
      now - 3600,
      now - 3600,
      { send: "now", timestamp: now - 3600 },
    ],
    [
      "a retry near the end of the dedup window is reconciled first",
      now - DAY,
      now - DAY + 1800,
      { send: "reconcileFirst", timestamp: now - DAY },
    ],
    [
      "a report never tried is sent even days later",
      now - 10 * DAY,
      undefined,
      { send: "now", timestamp: now - 10 * DAY },
    ],
    [
      "an end time in the future (clock skew) is sent as now",
      now + 120,
      undefined,
      { send: "now", timestamp: now },
    ],
  ])("%s", (_name, endedAt, first, verdict) => {
    expect(meterSendVerdict(endedAt, first, now)).toEqual(verdict);
  });
  it("a report past the provider's 35 days (less an hour) is never sent", () => {
    expect(meterSendVerdict(now - 35 * DAY + 1800, undefined, now)).toMatchObject({ send: "never" });
  });
});
