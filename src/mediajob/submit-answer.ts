// What the domain makes of the provider's answer to a submission (/run, step (3) of the
// write-ahead sequence, write-ahead.ts), as afterStop reads a cancel's and afterNextStep a
// create's: the executor (src/controller/mediajob/submit.ts) sends, hands the answer here, and
// writes what comes back.
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import type { PlannedEvent } from "./conditions.js";
import { retry, type PassError } from "./pass.js";
import { unconfirmedNote, unconfirmedStatus, withdrawnStatus, type SubmissionPlan } from "./write-ahead.js";

/** The provider's answer to /run, as the executor saw it. */
export type SubmitAnswer =
  /** Accepted: the provider's job id. */
  | { accepted: string }
  /** Provably not taken: the provider's error code and what it said. */
  | { refused: { code: string; error: string; retryAfterMs?: number } }
  /** No answer to rely on (a timeout, a reset): the job may be running. */
  | { unconfirmed: string };

/** A status to write onto the job as stored now (undefined: it moved on, nothing to write). */
type StatusWrite = (cur: MediaJob) => MediaJobStatus | undefined;

/** What follows the answer: what to write onto the stored job (by name), its Events, and when to look again. */
export type AfterSubmit =
  /** Step (4) records the provider's id once the executor has checked who holds it. */
  | { outcome: "accepted"; providerJobId: string; events: PlannedEvent[]; requeueAfterMs: number }
  /**
   * The intent withdrawn, with why; retried with backoff. `throttled`: a 429, the endpoint's
   * window shrinks and the job waits out Retry-After in Kubernetes.
   */
  | {
      outcome: "refused";
      write: StatusWrite;
      events: PlannedEvent[];
      error: PassError;
      throttled?: { retryAfterMs?: number };
    }
  /** The attempt Unconfirmed: never sent again before its confirmation deadline. */
  | { outcome: "unconfirmed"; write: StatusWrite; events: PlannedEvent[]; requeueAfterMs: number };

export function afterSubmit(
  stored: MediaJob,
  p: SubmissionPlan,
  answer: SubmitAnswer,
  now: string,
  settings: { defaultTimeoutSeconds: number; confirmationWindowMs?: number },
): AfterSubmit {
  if ("accepted" in answer) {
    const providerJobId = answer.accepted;
    const replay = p.before.replay ? " (replay)" : "";
    return {
      outcome: "accepted",
      providerJobId,
      events: [
        [
          "Normal",
          "Submitted",
          `submitted to endpoint ${p.endpointId} as ${providerJobId}${replay}, attempt ${p.attempt}`,
        ],
      ],
      requeueAfterMs: p.timeoutMs,
    };
  }
  if ("refused" in answer) {
    const { code, error, retryAfterMs } = answer.refused;
    const message = `submission to endpoint ${p.endpointId} failed: ${error}`;
    return {
      outcome: "refused",
      write: (cur) => withdrawnStatus(cur, p, now, { reason: code, message }),
      events: [["Warning", code, message]],
      error: retry(message),
      ...(code === "RATE_LIMITED" && { throttled: { ...(retryAfterMs !== undefined && { retryAfterMs }) } }),
    };
  }
  const message = `submission to endpoint ${p.endpointId} is unconfirmed: ${answer.unconfirmed}`;
  const { note, waitMs } = unconfirmedNote(stored, message, Date.parse(now), settings);
  return {
    outcome: "unconfirmed",
    write: (cur) => unconfirmedStatus(cur, p.attempt, note, now),
    events: [["Warning", "SubmissionUnconfirmed", note]],
    requeueAfterMs: Math.max(1_000, waitMs),
  };
}
