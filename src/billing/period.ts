// A BillingAccount's period usage (status.usage) kept from its jobs' billed attempts, exactly once
// per attempt, as a pure step: which seconds one write adds and which attempts it claims. Two
// writes make a count: the account's (seconds added, attempt ids listed in `counting`), then the
// job's (the attempt marked counted). An attempt listed in `counting` is never added again; the
// list is pruned of attempts whose jobs show them counted (or are gone), so it holds only the
// attempts between the two writes.
import type { BillingAccountUsage } from "../crds/billingaccount.js";

/** One billed attempt of one of the account's jobs, not yet marked counted on its job. */
export interface UncountedAttempt {
  /** The attempt's count id (its meter identifier; with `+reported` for its reported count). */
  id: string;
  /** Whether its seconds go to usedSeconds (billed) or reportedSeconds (accepted by the provider). */
  kind: "used" | "reported";
  seconds: number;
  /** When the attempt ended (ISO): it belongs to the period that holds this instant. */
  endedAt: string;
}

/** The UTC calendar month holding `now`: the period when the account has none of its own. */
export function calendarPeriod(now: Date): { periodStart: string; periodEnd: string } {
  const start = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  const end = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
  return { periodStart: new Date(start).toISOString(), periodEnd: new Date(end).toISOString() };
}

export interface CountInput {
  current: BillingAccountUsage | undefined;
  /** Attempts to count now (not marked counted on their jobs, as the cache has them). */
  uncounted: readonly UncountedAttempt[];
  /** Every count id any of the account's jobs still owes (a superset of `uncounted`'s). */
  live: ReadonlySet<string>;
  now: Date;
}

/**
 * The account's usage after adding `uncounted`: each id not already in `counting` is added (when
 * it ended inside the period) to usedSeconds or reportedSeconds and listed; ids of `counting` no
 * longer uncounted are dropped. A period that ended starts over at 0 (the calendar month holding
 * `now`).
 */
export function countedUsage(input: CountInput): BillingAccountUsage {
  const { current, uncounted, live, now } = input;
  let usage: BillingAccountUsage = current ?? { ...calendarPeriod(now), usedSeconds: 0, reportedSeconds: 0 };
  if (usage.periodEnd !== undefined && now.getTime() >= Date.parse(usage.periodEnd)) {
    const { counting, limitSeconds } = usage;
    usage = {
      ...calendarPeriod(now),
      usedSeconds: 0,
      reportedSeconds: 0,
      ...(limitSeconds !== undefined && { limitSeconds }),
      ...(counting && { counting }),
    };
  }
  const start = Date.parse(usage.periodStart);
  const end = usage.periodEnd === undefined ? Infinity : Date.parse(usage.periodEnd);
  const inPeriod = (a: UncountedAttempt): boolean => {
    const t = Date.parse(a.endedAt);
    return t >= start && t < end;
  };
  const counting = (usage.counting ?? []).filter((id) => live.has(id));
  const listed = new Set(counting);
  let used = usage.usedSeconds;
  let reported = usage.reportedSeconds;
  for (const a of uncounted) {
    if (listed.has(a.id)) continue;
    if (inPeriod(a)) {
      if (a.kind === "used") used += a.seconds;
      else reported += a.seconds;
    }
    counting.push(a.id);
    listed.add(a.id);
  }
  const { counting: _old, ...rest } = usage;
  return {
    ...rest,
    usedSeconds: used,
    reportedSeconds: reported,
    ...(counting.length > 0 && { counting }),
  };
}
