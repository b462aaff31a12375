// Usage the payment provider accepted after the invoice of its billing period was finalized: the
// period holding the event's time ended more than the grace period before the acceptance.
import { describe, expect, it } from "vitest";
import { acceptedAfterInvoice, usageAfterInvoice } from "../../src/billing/invoice-grace.js";
import { markReported } from "../../src/billing/outbox.js";
import type { UsageAttempt } from "../../src/crds/mediajob.js";

const at = (iso: string) => new Date(iso);
const sub = { start: "2026-11-15T00:00:00.000Z", end: "2026-12-15T00:00:00.000Z" };

describe("acceptedAfterInvoice", () => {
  it.each<[string, string, string, typeof sub | undefined, number, boolean]>([
    ["in the running period", "2026-11-20T00:00:00Z", "2026-11-28T00:00:00Z", sub, 3_600, false],
    ["the period ended, inside the grace", "2026-12-14T23:00:00Z", "2026-12-15T00:59:59Z", sub, 3_600, false],
    [
      "the period ended, at the grace's end",
      "2026-12-14T23:00:00Z",
      "2026-12-15T01:00:00Z",
      sub,
      3_600,
      true,
    ],
    [
      "a longer grace (72 h) still takes it",
      "2026-12-14T23:00:00Z",
      "2026-12-17T00:00:00Z",
      sub,
      72 * 3_600,
      false,
    ],
    // The calendar month, without a subscription period: Nov's invoice finalized Dec 1, 01:00.
    [
      "calendar month, after its grace",
      "2026-11-30T23:00:00Z",
      "2026-12-01T02:00:00Z",
      undefined,
      3_600,
      true,
    ],
    // A period rolled forward past the recorded one (its renewal's event not in yet).
    ["a later period, after its grace", "2027-01-14T00:00:00Z", "2027-01-15T02:00:00Z", sub, 3_600, true],
  ])("%s", (_n, eventAt, acceptedAt, period, graceSeconds, late) => {
    expect(
      acceptedAfterInvoice({
        eventAt: at(eventAt),
        acceptedAt: at(acceptedAt),
        subscriptionPeriod: period,
        graceSeconds,
      }),
    ).toBe(late);
  });

  it("says what happened and what to do, and names no secret", () => {
    expect(usageAfterInvoice(4, sub.end, 3_600)).toMatch(
      /4 s .* period ending 2026-12-15.*on no invoice.*invoice item/,
    );
  });
});

describe("markReported", () => {
  const pending: UsageAttempt = {
    attempt: 1,
    providerJobId: "p1",
    providerStatus: "COMPLETED",
    endedAt: "2026-11-20T00:00:00Z",
    billedSeconds: 3,
    meter: "Pending",
  };
  it("marks a late acceptance afterInvoice, a timely one plainly Reported, and a non-Pending one not at all", () => {
    expect(markReported("2026-12-16T00:00:00Z", true)(pending)).toMatchObject({
      meter: "Reported",
      afterInvoice: true,
    });
    expect(markReported("2026-11-21T00:00:00Z")(pending)).not.toHaveProperty("afterInvoice");
    expect(markReported("2026-11-21T00:00:00Z", true)({ ...pending, meter: "Reported" })).toBeUndefined();
  });
});
