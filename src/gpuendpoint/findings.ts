// A finding of the runbook's diagnosis as data: which condition it is, its status and reason, the
// cause, and the fix (fixes.ts, by reason). One function composes a condition's message from it,
// "<cause>. Fix: <fix>", so `kubectl describe` shows the fix beside the cause; the CLI takes the
// fix from the reason and the cause from the finding, never by reading a message apart.
import type { ConditionStatus } from "../crds/common.js";
import type { ConditionInput } from "../crds/conditions.js";
import { fixOf } from "./fixes.js";

export interface Finding {
  /** The condition type: CredentialsValid, EndpointFound, WorkersInSync, ScalerKnown, WorkersHealthy, WarmWorkers, Ready. */
  type: string;
  status: ConditionStatus;
  reason: string;
  /** What is the matter (or what is fine), without the fix. */
  cause: string;
  fix?: string;
}

/** The condition message of a cause and its fix. */
const composeMessage = (cause: string, fix?: string): string =>
  fix === undefined ? cause : `${cause}. Fix: ${fix}`;

/** The condition a finding is written as. */
export function conditionOf(f: Finding): ConditionInput {
  return { type: f.type, status: f.status, reason: f.reason, message: composeMessage(f.cause, f.fix) };
}

/**
 * A message composed earlier (a condition this controller wrote, or a wait cause of the MediaJob
 * domain) read with its reason: the fix is the reason's (fixes.ts), and the cause is the message
 * less the ending composeMessage gave it for that fix. A message that does not end with its
 * reason's fix (the fix did not apply, as for ScalerUnknown with spec.maxInFlight) is all cause.
 */
export function causeAndFix(reason: string, message: string): { cause: string; fix?: string } {
  const fix = fixOf(reason);
  const ending = fix === undefined ? undefined : composeMessage("", fix);
  return ending !== undefined && message.endsWith(ending)
    ? { cause: message.slice(0, -ending.length), fix: fix! }
    : { cause: message };
}

/** A condition written earlier, as the finding it was written from. */
export function findingOf(c: {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
}): Finding {
  return { type: c.type, status: c.status, reason: c.reason, ...causeAndFix(c.reason, c.message) };
}
