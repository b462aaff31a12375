// Which submission a worker is running, in the job's input: a worker that wants to can
// deduplicate on it (the provider makes up its own job id for every /run, so the same MediaJob
// submitted twice is two provider jobs). A GpuEndpoint whose workers do (spec.idempotentWorkers)
// has an unconfirmed submission submitted again instead of failed (unconfirmed.ts): the worker
// recognises the second run of the same attempt by its key and does not do the work twice.

/** The one key of the job's input the controller writes; the rest of the input is the user's. */
export const SUBMISSION_IDENTITY_KEY = "_mediaOrchestrator";

export interface SubmissionIdentity {
  /** metadata.uid of the MediaJob. */
  jobUid: string;
  /** The job's idempotency key (spec.id, default the uid). */
  jobId: string;
  /** status.attempts of this submission: a new attempt (a retry after FAILED) is new work. */
  attempt: number;
  /** Random id of this submission (each /run has its own). */
  submissionId: string;
  /**
   * What a worker deduplicates on: `<jobUid>/<n>`, n the attempts less the unconfirmed
   * resubmissions. A submission sent again because the first one's answer was lost has the same
   * key (the same work, perhaps already done); a new attempt after a FAILED run has a new one.
   */
  dedupKey: string;
}

/** The identity of the submission an intent records. */
export function submissionIdentity(
  jobUid: string,
  jobId: string,
  status: { attempts?: number; unconfirmedResubmissions?: number; submission?: { id: string } },
): SubmissionIdentity {
  const attempt = status.attempts ?? 0;
  const work = attempt - (status.unconfirmedResubmissions ?? 0);
  return {
    jobUid,
    jobId,
    attempt,
    submissionId: status.submission?.id ?? "",
    dedupKey: `${jobUid}/${work}`,
  };
}

/** The input as sent: the user's, with the identity under SUBMISSION_IDENTITY_KEY. */
export function withSubmissionIdentity(
  input: Record<string, unknown>,
  identity: SubmissionIdentity,
): Record<string, unknown> {
  return { ...input, [SUBMISSION_IDENTITY_KEY]: identity };
}
