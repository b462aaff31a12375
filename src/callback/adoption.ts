// Adoption: a submission whose /run answer was lost (or not yet recorded) learns its provider job id
// from its callback. RunPod offers no lookup by our id, so the callback URL's token only proves the
// caller holds the URL; the provider job it names is the caller's choice. Whoever holds the URL
// (they leak: ingress access logs keep query strings) could name another tenant's job on the same
// endpoint. So an adopted result is marked (condition Submitted, reason AdoptedByCallback, a
// Warning Event, a metric) and the job's next pipeline step is not created until evidence the
// caller cannot choose arrives: the controller's record of the /run answer naming the same id, or
// an operator's `kubectl media accept`, which records the id it accepts in an annotation.
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { getCondition, setCondition } from "../crds/conditions.js";

/** The Submitted condition's reason while the provider's id is known from a callback only. */
export const ADOPTED_BY_CALLBACK = "AdoptedByCallback";

/** Set by `kubectl media accept` to the provider job id the operator accepts for this job. */
export const ACCEPTED_PROVIDER_JOB_ANNOTATION = "media-orchestrator.io/accepted-provider-job";

/** Whether the job's provider id was learnt from a callback alone (no /run answer, no operator). */
export function adoptedWithoutEvidence(job: MediaJob): boolean {
  const id = job.status?.providerJobId;
  if (!id) return false;
  if (getCondition(job.status?.conditions, "Submitted")?.reason !== ADOPTED_BY_CALLBACK) return false;
  return job.metadata.annotations?.[ACCEPTED_PROVIDER_JOB_ANNOTATION] !== id;
}

/**
 * The controller's record of the /run answer, when it names the provider job a callback adopted:
 * the evidence the mark waited for. The Submitted condition says so; undefined when there is
 * nothing to confirm (not adopted, or adopted as another job: that mark stays).
 */
export function confirmAdoption(
  status: MediaJobStatus | undefined,
  providerJobId: string,
  now: string,
  generation: number | undefined,
): MediaJobStatus | undefined {
  if (!status || status.providerJobId !== providerJobId) return undefined;
  if (getCondition(status.conditions, "Submitted")?.reason !== ADOPTED_BY_CALLBACK) return undefined;
  return {
    ...status,
    conditions: setCondition(
      status.conditions,
      {
        type: "Submitted",
        status: "True",
        reason: "Submitted",
        message: `submitted as ${providerJobId}; the submission's answer confirms the id its callback named`,
      },
      now,
      generation,
    ),
  };
}
