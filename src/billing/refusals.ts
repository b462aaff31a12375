// The texts a user reads when usage is not reported: written into the attempt's message and the
// job's UsageNotReported Event, so they say what happened and what to do.

/** Why a send is held back once its identifier may have left the provider's deduplication window. */
export const FORGOTTEN_IDENTIFIER =
  "may have been sent first more than 23 hours ago and is not confirmed: the payment provider may have recorded it and " +
  "forgotten its identifier since, so it is not sent again blindly; compare the meter's event " +
  "summaries for the customer, then set meter to Reported (it was recorded), or to Pending with firstSentAt set to now (send it again)";

/** The longest refusal kept in an attempt's message. */
export const REFUSAL_MAX = 1024;

/** The UsageNotReported Event's message for a refused attempt. */
export function usageNotReported(
  attempt: { attempt: number; billedSeconds?: number },
  reason: string,
): string {
  return `attempt ${attempt.attempt}'s ${attempt.billedSeconds ?? 0} GPU seconds were not reported: ${reason}`;
}
