// The usage outbox's transitions, as a table: (attempt as the API server has it now, change) ->
// (next attempt, or no write). A transition decided on an older view never undoes what another
// writer (a second reporter, the user, a late answer) did meanwhile.
import { describe, expect, it } from "vitest";
import type { UsageAttempt } from "../../src/crds/mediajob.js";
import {
  acceptedCounts,
  type AttemptChange,
  countEntries,
  liveCountIds,
  markCounted,
  markRefused,
  markReported,
  markReportedCounted,
} from "../../src/billing/outbox.js";
import { FORGOTTEN_IDENTIFIER, REFUSAL_MAX, usageNotReported } from "../../src/billing/refusals.js";

const T0 = "2026-01-01T00:00:00.000Z";
const T1 = "2026-01-01T00:05:00.000Z";
const attempt = (o: Partial<UsageAttempt> = {}): UsageAttempt => ({
  attempt: 1,
  providerJobId: "p-1",
  providerStatus: "COMPLETED",
  endedAt: T0,
  billedSeconds: 42,
  meter: "Pending",
  eventName: "gpu_seconds",
  identifier: "mj_uid-1_1",
  ...o,
});

describe("outbox transitions", () => {
  const rows: Array<[string, UsageAttempt, AttemptChange, UsageAttempt | undefined]> = [
    [
      "accepted: Pending becomes Reported with its time",
      attempt({ firstSentAt: T0 }),
      markReported(T1),
      attempt({ firstSentAt: T0, meter: "Reported", reportedAt: T1 }),
    ],
    [
      "accepted twice: the first time stays",
      attempt({ meter: "Reported", reportedAt: T0 }),
      markReported(T1),
      undefined,
    ],
    [
      "accepted after the user refused it: stays Refused",
      attempt({ meter: "Refused" }),
      markReported(T1),
      undefined,
    ],
    [
      "accepted for a NotMetered attempt: nothing",
      attempt({ meter: "NotMetered" }),
      markReported(T1),
      undefined,
    ],
    [
      "refused: Pending becomes Refused with the reason",
      attempt(),
      markRefused("no such customer"),
      attempt({ meter: "Refused", message: "no such customer" }),
    ],
    [
      "refused after it was reported: stays Reported",
      attempt({ meter: "Reported" }),
      markRefused("late"),
      undefined,
    ],
    [
      "counted while Pending: used seconds only",
      attempt(),
      markCounted({ meter: "Pending" }),
      attempt({ counted: true }),
    ],
    [
      "counted when seen and now Reported: both counts",
      attempt({ meter: "Reported" }),
      markCounted({ meter: "Reported" }),
      attempt({ meter: "Reported", counted: true, countedReported: true }),
    ],
    [
      "reported after the count was decided: its reported count is not claimed",
      attempt({ meter: "Reported" }),
      markCounted({ meter: "Pending" }),
      attempt({ meter: "Reported", counted: true }),
    ],
    [
      "counted already, still Pending: nothing",
      attempt({ counted: true }),
      markCounted({ meter: "Pending" }),
      undefined,
    ],
    [
      "counted, now reported: the reported count is added",
      attempt({ meter: "Reported", counted: true }),
      markCounted({ meter: "Reported" }),
      attempt({ meter: "Reported", counted: true, countedReported: true }),
    ],
    [
      "both counted: nothing",
      attempt({ meter: "Reported", counted: true, countedReported: true }),
      markCounted({ meter: "Reported" }),
      undefined,
    ],
    [
      "accepted and counted: Pending becomes Reported with both counts, in one write",
      attempt({ firstSentAt: T0 }),
      markReportedCounted(T1),
      attempt({ firstSentAt: T0, meter: "Reported", reportedAt: T1, counted: true, countedReported: true }),
    ],
    [
      "accepted and counted after the invoice: afterInvoice kept",
      attempt({ counted: true }),
      markReportedCounted(T1, true),
      attempt({
        meter: "Reported",
        reportedAt: T1,
        afterInvoice: true,
        counted: true,
        countedReported: true,
      }),
    ],
    [
      "accepted and counted, already Reported by another writer: its first time stays, counts marked",
      attempt({ meter: "Reported", reportedAt: T0 }),
      markReportedCounted(T1),
      attempt({ meter: "Reported", reportedAt: T0, counted: true, countedReported: true }),
    ],
    [
      "accepted and counted after the user refused it: stays Refused, counts marked (the account has them)",
      attempt({ meter: "Refused", message: "by hand" }),
      markReportedCounted(T1),
      attempt({ meter: "Refused", message: "by hand", counted: true, countedReported: true }),
    ],
    [
      "accepted and counted twice: nothing",
      attempt({ meter: "Reported", reportedAt: T0, counted: true, countedReported: true }),
      markReportedCounted(T1),
      undefined,
    ],
    [
      "accepted and counted for a NotMetered attempt: nothing",
      attempt({ meter: "NotMetered" }),
      markReportedCounted(T1),
      undefined,
    ],
  ];
  it.each(rows)("%s", (_name, current, change, next) => {
    expect(change(current)).toEqual(next);
  });

  it("keeps at most REFUSAL_MAX characters of a refusal", () => {
    const next = markRefused("x".repeat(REFUSAL_MAX + 10))(attempt());
    expect(next?.message).toHaveLength(REFUSAL_MAX);
  });
});

describe("counts an attempt owes its account", () => {
  const rows: Array<[string, UsageAttempt, Array<{ id: string; kind: string }>]> = [
    ["Pending, not counted: its used seconds", attempt(), [{ id: "mj_uid-1_1", kind: "used" }]],
    [
      "Reported, not counted: used and reported",
      attempt({ meter: "Reported" }),
      [
        { id: "mj_uid-1_1", kind: "used" },
        { id: "mj_uid-1_1+reported", kind: "reported" },
      ],
    ],
    [
      "Reported, used counted: reported only",
      attempt({ meter: "Reported", counted: true }),
      [{ id: "mj_uid-1_1+reported", kind: "reported" }],
    ],
    [
      "Reported, both counted: none",
      attempt({ meter: "Reported", counted: true, countedReported: true }),
      [],
    ],
    [
      "Refused, counted: none (refused seconds are never reported)",
      attempt({ meter: "Refused", counted: true }),
      [],
    ],
  ];
  it.each(rows)("%s", (_name, a, owed) => {
    const entries = countEntries("mj_uid-1_1", a);
    expect(entries.map(({ id, kind }) => ({ id, kind }))).toEqual(owed);
    for (const e of entries) expect(e).toMatchObject({ seconds: 42, endedAt: T0 });
  });
});

describe("counts the account's write after an acceptance lists", () => {
  const rows: Array<[string, UsageAttempt, string[]]> = [
    ["Pending, not counted: used and reported", attempt(), ["mj_uid-1_1", "mj_uid-1_1+reported"]],
    ["Pending, used counted: reported only", attempt({ counted: true }), ["mj_uid-1_1+reported"]],
    [
      "Reported, both counted: none",
      attempt({ meter: "Reported", counted: true, countedReported: true }),
      [],
    ],
  ];
  it.each(rows)("%s", (_name, a, ids) => {
    expect(acceptedCounts("mj_uid-1_1", a).map((e) => e.id)).toEqual(ids);
  });
});

describe("count ids an attempt keeps listed in its account", () => {
  const rows: Array<[string, UsageAttempt, string[]]> = [
    [
      "Pending, not counted: both (its reported count may precede its Reported write)",
      attempt(),
      ["mj_uid-1_1", "mj_uid-1_1+reported"],
    ],
    ["Pending, counted: its reported id", attempt({ counted: true }), ["mj_uid-1_1+reported"]],
    [
      "Reported, counted: its reported id until countedReported",
      attempt({ meter: "Reported", counted: true }),
      ["mj_uid-1_1+reported"],
    ],
    [
      "Reported, both counted: none",
      attempt({ meter: "Reported", counted: true, countedReported: true }),
      [],
    ],
    [
      "Refused, counted: its reported id (an acceptance may have been counted)",
      attempt({ meter: "Refused", counted: true }),
      ["mj_uid-1_1+reported"],
    ],
    ["NotMetered, not counted: its used id only", attempt({ meter: "NotMetered" }), ["mj_uid-1_1"]],
  ];
  it.each(rows)("%s", (_name, a, ids) => {
    expect(liveCountIds("mj_uid-1_1", a)).toEqual(ids);
  });
});

describe("refusal texts", () => {
  it("tell the user how to settle a send past the deduplication window", () => {
    expect(FORGOTTEN_IDENTIFIER).toMatch(
      /set meter to Reported .* or to Pending with firstSentAt set to now/,
    );
    expect(FORGOTTEN_IDENTIFIER.length).toBeLessThanOrEqual(REFUSAL_MAX);
  });
  it("name the attempt and its seconds in the Event", () => {
    expect(usageNotReported({ attempt: 2, billedSeconds: 7 }, "no such customer")).toBe(
      "attempt 2's 7 GPU seconds were not reported: no such customer",
    );
    expect(usageNotReported({ attempt: 1 }, "r")).toBe("attempt 1's 0 GPU seconds were not reported: r");
  });
});
