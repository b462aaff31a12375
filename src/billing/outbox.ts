// The outbox of a job attempt's usage report (status.usage.attempts[i]), as pure transitions: each
// takes the attempt as the API server has it now and returns its next state, or undefined when the
// attempt is no longer in the state the change was decided for (nothing to write). The reporter
// applies them inside a read-modify-write, so a second reporter, a late answer or a user's edit in
// between is seen, and a transition never undoes another.
import type { UsageAttempt } from "../crds/mediajob.js";
import { reportedCountId } from "./identifier.js";
import type { UncountedAttempt } from "./period.js";
import { REFUSAL_MAX } from "./refusals.js";

export type AttemptChange = (a: UsageAttempt) => UsageAttempt | undefined;

/**
 * The payment provider accepted the event (or already had it); `afterInvoice` when its period's
 * invoice was already finalized (invoice-grace.ts): accepted, and on no invoice.
 */
export const markReported =
  (reportedAt: string, afterInvoice = false): AttemptChange =>
  (a) =>
    a.meter === "Pending"
      ? { ...a, meter: "Reported", reportedAt, ...(afterInvoice && { afterInvoice: true }) }
      : undefined;

/**
 * The payment provider accepted the event (or an earlier leader's acceptance is found in the
 * account) and the account's write that lists the attempt's owed counts (acceptedCounts) came
 * first: Reported, its used and reported seconds marked counted, in one write. An attempt the
 * user set to Refused meanwhile keeps that, its counts marked all the same (the account has them).
 */
export const markReportedCounted =
  (reportedAt: string, afterInvoice = false): AttemptChange =>
  (a) => {
    if (a.meter === "Pending")
      return {
        ...a,
        meter: "Reported",
        reportedAt,
        ...(afterInvoice && { afterInvoice: true }),
        counted: true,
        countedReported: true,
      };
    if (a.meter === "NotMetered" || (a.counted === true && a.countedReported === true)) return undefined;
    return { ...a, counted: true, countedReported: true };
  };

/** The event is not sent: the reason is kept for the user, who may set it back to Pending. */
export const markRefused =
  (reason: string): AttemptChange =>
  (a) =>
    a.meter === "Pending" ? { ...a, meter: "Refused", message: reason.slice(0, REFUSAL_MAX) } : undefined;

/**
 * After the account's write: the attempt's seconds are counted, and its reported seconds too when
 * it was Reported both when the count was decided (`seen`) and now.
 */
export const markCounted =
  (seen: Pick<UsageAttempt, "meter">): AttemptChange =>
  (a) => {
    const reported = a.meter === "Reported" && seen.meter === "Reported";
    if (a.counted === true && (!reported || a.countedReported === true)) return undefined;
    return { ...a, counted: true, ...(reported && { countedReported: true }) };
  };

/** The counts an attempt (sent under `id`) still owes its account: its billed seconds, and once reported, those. */
export function countEntries(id: string, a: UsageAttempt): UncountedAttempt[] {
  const seconds = a.billedSeconds ?? 0;
  const out: UncountedAttempt[] = [];
  if (a.counted !== true) out.push({ id, kind: "used", seconds, endedAt: a.endedAt });
  if (a.meter === "Reported" && a.countedReported !== true)
    out.push({ id: reportedCountId(id), kind: "reported", seconds, endedAt: a.endedAt });
  return out;
}

/**
 * What the account's write after the provider accepted an attempt counts: its used seconds when not
 * counted yet, and its reported seconds (one account write for both, one job write to mark them).
 */
export const acceptedCounts = (id: string, a: UsageAttempt): UncountedAttempt[] =>
  countEntries(id, { ...a, meter: "Reported" });

/**
 * Every count id the attempt may have listed in its account's `counting` and not yet marked on
 * itself: its used id until counted; its reported id until countedReported while it is metered
 * (Pending included: the account counts the reported seconds just before the job's Reported
 * write, so a crash between the two leaves a Pending attempt whose reported id is listed). The
 * account's `counting` keeps only such ids: one dropped too early would be counted again.
 */
export function liveCountIds(id: string, a: UsageAttempt): string[] {
  const out: string[] = [];
  if (a.counted !== true) out.push(id);
  if (
    a.countedReported !== true &&
    (a.meter === "Pending" || a.meter === "Reported" || a.meter === "Refused")
  )
    out.push(reportedCountId(id));
  return out;
}
