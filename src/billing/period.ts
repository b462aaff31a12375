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

/** The subscription's current billing period as the payment provider last sent it (ISO instants). */
export interface SubscriptionPeriod {
  start: string;
  end: string;
}

/** `t` moved by `months` calendar months in UTC, the day clamped to the month's last (Stripe's anchor rule). */
function addMonths(t: Date, months: number): Date {
  const y = t.getUTCFullYear();
  const m = t.getUTCMonth() + months;
  const last = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
  return new Date(
    Date.UTC(y, m, Math.min(t.getUTCDate(), last), t.getUTCHours(), t.getUTCMinutes(), t.getUTCSeconds()),
  );
}

/** The whole months from `start` to `end` when `end` is that many months after it (1–12), else undefined. */
function monthsApart(start: Date, end: Date): number | undefined {
  const n = (end.getUTCFullYear() - start.getUTCFullYear()) * 12 + end.getUTCMonth() - start.getUTCMonth();
  return n >= 1 && n <= 12 && addMonths(start, n).getTime() === end.getTime() ? n : undefined;
}

/**
 * The billing period holding `now`. Without a subscription period: the UTC calendar month. With
 * one: it, when it holds `now`; else the period of the same length before or after it (a renewal
 * whose event has not arrived yet): whole months from its start when it spans whole months (the
 * day clamped to short months, as Stripe bills from its anchor), else its length in ms.
 */
export function periodAt(now: Date, sub?: SubscriptionPeriod): { periodStart: string; periodEnd: string } {
  const start = sub && new Date(sub.start);
  const end = sub && new Date(sub.end);
  if (!start || !end || !(end.getTime() > start.getTime())) return calendarPeriod(now);
  const t = now.getTime();
  const iso = (a: Date, b: Date) => ({ periodStart: a.toISOString(), periodEnd: b.toISOString() });
  if (t >= start.getTime() && t < end.getTime()) return iso(start, end);
  const months = monthsApart(start, end);
  if (months === undefined) {
    const length = end.getTime() - start.getTime();
    const i = Math.floor((t - start.getTime()) / length);
    return iso(new Date(start.getTime() + i * length), new Date(start.getTime() + (i + 1) * length));
  }
  // Periods [start + i·months, start + (i+1)·months): an estimate of i, then a step either way.
  let i = Math.floor(
    ((now.getUTCFullYear() - start.getUTCFullYear()) * 12 + now.getUTCMonth() - start.getUTCMonth()) / months,
  );
  while (addMonths(start, i * months).getTime() > t) i--;
  while (addMonths(start, (i + 1) * months).getTime() <= t) i++;
  return iso(addMonths(start, i * months), addMonths(start, (i + 1) * months));
}

/**
 * Whether the usage figures are the current period's at `now`: their period holds `now`, and is
 * the subscription's own when the provider sent one (figures kept over the calendar month before
 * the first subscription event start over on the subscription's period). Figures without an end
 * hold until one is written.
 */
export function isCurrentUsage(
  usage: { periodStart: string; periodEnd?: string | undefined },
  now: Date,
  sub?: SubscriptionPeriod,
): boolean {
  const start = Date.parse(usage.periodStart);
  const end = usage.periodEnd === undefined ? Infinity : Date.parse(usage.periodEnd);
  const t = now.getTime();
  if (!(t >= start && t < end)) return false;
  if (!sub) return true;
  const due = periodAt(now, sub);
  return start === Date.parse(due.periodStart) && end === Date.parse(due.periodEnd);
}

export interface CountInput {
  current: BillingAccountUsage | undefined;
  /** Attempts to count now (not marked counted on their jobs, as the cache has them). */
  uncounted: readonly UncountedAttempt[];
  /** Every count id any of the account's jobs still owes (a superset of `uncounted`'s). */
  live: ReadonlySet<string>;
  now: Date;
  /** The account's subscription period (status.subscriptionPeriod), when the provider sent one. */
  subscriptionPeriod?: SubscriptionPeriod | undefined;
}

/**
 * The account's usage after adding `uncounted`: each id not already in `counting` is added (when
 * it ended inside the period) to usedSeconds or reportedSeconds and listed; ids of `counting` no
 * longer uncounted are dropped. Figures for another period than the one holding `now` (periodAt:
 * the subscription's own, else the calendar month) start over at 0 for it.
 */
export function countedUsage(input: CountInput): BillingAccountUsage {
  const { current, uncounted, live, now } = input;
  const due = periodAt(now, input.subscriptionPeriod);
  let usage: BillingAccountUsage = current ?? { ...due, usedSeconds: 0, reportedSeconds: 0 };
  if (!isCurrentUsage(usage, now, input.subscriptionPeriod)) {
    const { counting, limitSeconds } = usage;
    usage = {
      ...due,
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
