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

/** Before the first send: the outbox records that a send may have happened, and since when. */
export const stampFirstSent =
  (at: string): AttemptChange =>
  (a) =>
    a.meter === "Pending" && a.firstSentAt === undefined ? { ...a, firstSentAt: at } : undefined;

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
