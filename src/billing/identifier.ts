// The meter event identifier of a job attempt, in one place: the reporter sends it, the account's
// period count keys on it, the CLI lists it, and a repeat of it is what the payment provider drops.
import type { UsageAttempt } from "../crds/mediajob.js";

// Stripe: "A unique identifier for the event ... Max length: 100"
// (https://docs.stripe.com/api/billing/meter-event/create).
const IDENTIFIER_MAX = 100;

/**
 * The meter event identifier of one job attempt: the same for every report of that attempt (so the
 * payment provider drops a repeat inside its deduplication window), different for another attempt
 * or another object that happens to reuse the name (the uid differs).
 */
export function meterIdentifier(job: { uid: string; attempt: number }): string {
  if (!/^[A-Za-z0-9-]{1,64}$/.test(job.uid))
    throw new RangeError(`uid ${JSON.stringify(job.uid)} is not an object uid`);
  if (!Number.isSafeInteger(job.attempt) || job.attempt < 1)
    throw new RangeError(`attempt ${String(job.attempt)} is not a positive integer`);
  const id = `mj_${job.uid}_${job.attempt}`;
  if (id.length > IDENTIFIER_MAX) throw new RangeError("meter identifier too long");
  return id;
}

/**
 * The identifier an attempt is sent and counted under: the one recorded in it when usage was
 * written, else the one derived from the job's uid (attempts written before identifiers were
 * recorded). Throws RangeError when neither exists (no object uid: not a job from the API server).
 */
export function attemptIdentifier(
  uid: string | undefined,
  attempt: Pick<UsageAttempt, "attempt" | "identifier">,
): string {
  return attempt.identifier ?? meterIdentifier({ uid: uid ?? "", attempt: attempt.attempt });
}

/** The count id of an attempt's reported seconds in its account (its used seconds count under `id`). */
export const reportedCountId = (id: string): string => `${id}+reported`;
