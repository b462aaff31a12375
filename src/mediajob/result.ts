// The one rule by which a provider's result reaches a MediaJob's status, for every writer: the
// sidecar (callbacks), the controller's CLI (`kubectl media complete` / `recover`) and anything
// else. decideResult reads one version of the job; the edge that writes it
// (src/controller/mediajob/result-write.ts) calls it again on each fresh read after a conflict, so
// concurrent and repeated deliveries of the same result converge on one final state.
import { ADOPTED_BY_CALLBACK } from "../callback/adoption.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { applyProviderResult } from "./provider-result.js";
import type { UsageSettings } from "./usage.js";
import { isTerminal, type ProviderResult } from "./job.js";
import { recordAccepted } from "./submission.js";
import { setCondition } from "../crds/conditions.js";

/** Which submission a result is for, when the writer knows it (a callback URL carries it). */
export interface SubmissionRef {
  uid: string;
  /** status.jobId the submission was made for, when the writer knows it (a callback URL carries it). */
  jobId?: string;
  attempt: number;
  /** status.submission.id of that attempt. */
  id: string;
}

/**
 * How a result bound to one submission relates to the job as it is now: its current submission, or
 * an object re-created under the same name, or an earlier attempt, or a job that has finished (a
 * duplicate). The one check the controller's writes, the CLI and the sidecar's callbacks share.
 */
export type SubmissionMatch = "current" | "recreated" | "earlier" | "finished";

export function matchSubmission(job: MediaJob, ref: SubmissionRef): SubmissionMatch {
  const status = job.status;
  const sub = status?.submission;
  if (job.metadata.uid !== ref.uid || (ref.jobId !== undefined && status?.jobId !== ref.jobId))
    return "recreated";
  if (sub?.attempt !== ref.attempt || sub.id !== ref.id)
    return isTerminal(status?.phase) && !sub ? "finished" : "earlier";
  return isTerminal(status?.phase) ? "finished" : "current";
}

export interface ResultWrite {
  /** The provider's job status object, as confirmed by the provider's status API. */
  result: ProviderResult;
  now: string;
  /** Bind the write to one submission: anything else (an older attempt, a re-created object) is "superseded". */
  submission?: SubmissionRef;
  /**
   * May take the result's id as the submission's provider id when none is recorded yet (its /run
   * answer was lost, or the callback beat the controller's record). Only with `submission` set,
   * because only a bound result can tell our job from another.
   */
  adopt?: boolean;
  /** Refuse unless the job is Processing (the CLI's manual completion). */
  requireProcessing?: boolean;
  conflictAttempts?: number;
  /** The job as the writer has just read it: the first try writes over it without a second read. */
  read?: MediaJob;
  /** The billing rule, to bill the ended attempt in this same write (the controller meters it). */
  billing?: UsageSettings;
}

export type ResultOutcome =
  /** The outcome was written. */
  | "applied"
  /** The result was not terminal, but it named the unconfirmed submission's provider id: recorded. */
  | "adopted"
  /** The job had already finished: a duplicate. */
  | "terminal"
  /** Nothing to change (a non-terminal result, a result of another provider job). */
  | "unchanged"
  /** The result belongs to an earlier attempt or an object that no longer exists under this name. */
  | "superseded"
  /** The job is not Processing (requireProcessing). */
  | "not-processing"
  /** No such MediaJob. */
  | "gone";

/** The decision for one read of the object: the status to write and what it means. */
export function decideResult(
  current: MediaJob,
  w: ResultWrite,
): { outcome: ResultOutcome; status?: MediaJobStatus; adopted?: boolean } {
  const status = current.status;
  if (w.submission) {
    const match = matchSubmission(current, w.submission);
    if (match === "recreated" || match === "earlier") return { outcome: "superseded" };
  }
  if (isTerminal(status?.phase)) return { outcome: "terminal" };
  if (w.requireProcessing && status?.phase !== "Processing") return { outcome: "not-processing" };
  const adopt = w.adopt === true && w.submission !== undefined;
  // Adopting: the provider's id comes from the callback alone, and the result is marked so
  // (AdoptedByCallback), whether it completes the job now or only records the id.
  const adopting = adopt && !status?.providerJobId;
  const marked = (s: MediaJobStatus): MediaJobStatus => ({
    ...s,
    conditions: setCondition(
      s.conditions,
      {
        type: "Submitted",
        status: "True",
        reason: ADOPTED_BY_CALLBACK,
        message:
          `submitted as ${w.result.id}; the provider's id was learnt from the job's callback, not from the ` +
          "submission's answer: the next pipeline step waits for that answer or for `kubectl media accept`",
      },
      w.now,
      current.metadata.generation,
    ),
  });
  const applied = applyProviderResult(current, w.result, w.now, {
    adopt,
    ...(w.billing && { billing: w.billing }),
  });
  if (applied) return { outcome: "applied", status: adopting ? marked(applied) : applied, adopted: adopting };
  if (adopting && w.submission) {
    const recorded = recordAccepted(status, w.submission.attempt, w.result.id);
    if (recorded) return { outcome: "adopted", status: marked(recorded), adopted: true };
  }
  return { outcome: "unchanged" };
}
