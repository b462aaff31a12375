// What every other rule of the MediaJob state machine reads: the finalizer, the replay limit, the
// terminal phases, the job's ids and its first status.
import { createHash } from "node:crypto";
import type { JobPhase, MediaJob, MediaJobStatus } from "../crds/mediajob.js";

/** A job's phase: a job the controller has not written yet is Pending. */
export const jobPhase = (status: Pick<MediaJobStatus, "phase"> | undefined): JobPhase =>
  status?.phase ?? "Pending";

/** Whether the job is Pending (no phase yet counts). */
export const isPending = (status: Pick<MediaJobStatus, "phase"> | undefined): boolean =>
  jobPhase(status) === "Pending";

export const FINALIZER = "media-orchestrator.io/cancel-at-provider";
/** Set to "true" on a MediaJob to delete it without cancelling its job at the provider. */
export const SKIP_CANCEL_ANNOTATION = "media-orchestrator.io/skip-provider-cancel";

/**
 * Replays after which a job the provider keeps losing is failed instead of replayed. A provider
 * keeps a finished job's status only for a while (RunPod: 30 min); when callbacks never reach the
 * sidecar and the timeout is longer than that, every replay would run (and bill) the job again.
 * Counted per cause: provider losses (status 404), and unconfirmed resubmissions. Operator resets
 * and failure retries are not losses.
 */
export const MAX_REPLAYS = 3;

const TERMINAL_PHASES: ReadonlySet<JobPhase> = new Set(["Completed", "Failed", "Cancelled"]);
export const isTerminal = (phase: JobPhase | undefined): boolean =>
  phase !== undefined && TERMINAL_PHASES.has(phase);

/** The provider's job status object, as far as the lifecycle reads it. */
export interface ProviderResult {
  id: string;
  status: string;
  output?: unknown;
  error?: unknown;
  /** GPU time, ms, as the provider's status API reports it (RunPod's executionTime, delayTime). */
  executionTime?: number;
  delayTime?: number;
}

/** spec.id, else metadata.uid: the idempotency key, fixed in status.jobId once set. */
export function effectiveJobId(job: MediaJob): string {
  return job.status?.jobId ?? job.spec.id ?? job.metadata.uid ?? job.metadata.name;
}

/**
 * The job's key for its next submission, sent to the provider inside providerRequestId. Resets resubmit the same id (a provider
 * that honours it answers with the job it already has instead of running it again); a retry after
 * the provider reported a failure needs a fresh id, or it would get the failed job back.
 */
export function submissionId(status: MediaJobStatus | undefined, jobId: string): string {
  // A submission cancelled by a suspension is over at the provider too: resuming needs a fresh id.
  const ended = (status?.failures ?? 0) + (status?.suspensions ?? 0);
  return ended === 0 ? jobId : `${jobId}-retry-${ended}`;
}

/**
 * Whose submission an id is: a hash of the job's namespace and uid (128 bits, hex). Two MediaJobs
 * never share it, whatever their spec.id, so neither can name the other's job at the provider.
 */
export function providerIdScope(meta: { namespace?: string; uid?: string }): string {
  return createHash("sha256")
    .update(`${meta.namespace ?? ""}/${meta.uid ?? ""}`)
    .digest("hex")
    .slice(0, 32);
}

/**
 * The id a submission is sent to the provider with (`POST /run` body `id`):
 * `<scope>.<key>`, the scope the job's own (providerIdScope), the key submissionId's (the job's
 * idempotency key, with `-retry-<n>` after an ended submission). A provider that honours client
 * ids answers a reset's resubmission with the job it already has, and never with another
 * MediaJob's, though two namespaces (or a re-created object) use the same spec.id.
 */
export function providerRequestId(
  job: Pick<MediaJob, "metadata">,
  status: MediaJobStatus | undefined,
  jobId: string,
): string {
  return `${providerIdScope(job.metadata)}.${submissionId(status, jobId)}`;
}

export const maxAttempts = (job: MediaJob): number => job.spec.maxAttempts ?? 1;

/** A new object's status: the job id fixed, Pending. */
export function initialStatus(job: MediaJob, now: string): MediaJobStatus {
  const status: MediaJobStatus = {
    ...job.status,
    phase: jobPhase(job.status),
    jobId: effectiveJobId(job),
    attempts: job.status?.attempts ?? 0,
  };
  if (!job.status?.updatedAt) status.updatedAt = now;
  return status;
}

/** status.error's limit in the CRD: anything written there must fit, or the write fails forever. */
export const ERROR_MAX_CHARS = 4096;

export function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 16)}… [truncated]`;
}

export function errorText(error: unknown, fallback: string): string {
  if (error === undefined || error === null || error === "") return fallback;
  return typeof error === "string" ? error : JSON.stringify(error);
}

/** The provider id the current submission is known by: the recorded one, else the id it was sent with. */
export function currentProviderJobId(job: MediaJob): string {
  const status = job.status;
  return status?.providerJobId ?? providerRequestId(job, status, status?.jobId ?? effectiveJobId(job));
}
