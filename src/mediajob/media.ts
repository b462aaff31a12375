// A job's media through the object store (docs/design.md, "Media and storage"), the domain's half:
// which objects an attempt reads and writes and until when (planned at its submission, signed by
// the edge), and what a COMPLETED attempt with declared outputs becomes once they were looked at
// in the store. Pure: the reconciler gathers the store's answers (src/controller/mediajob) and
// mints the URLs (src/storage/mint.ts); nothing here sees a URL.
//
// A provider's COMPLETED for a job with declared outputs does not complete it: whoever writes the
// result (the sidecar's callback, the controller's poll, the CLI) records it as an attempt whose
// outputs are to be checked (Processing, OutputsVerified=Unknown), and the controller, which holds
// the store's credentials, checks them and completes the job or fails the attempt. A store that
// cannot be read leaves the job as it was, retried with backoff: never half-applied.
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { getCondition } from "../crds/conditions.js";
import { planAttemptIO, type AttemptIOResult, type InputReference } from "../storage/attempt-io.js";
import { attemptObjectKey } from "../storage/keys.js";
import {
  reportedOutputs,
  verifyOutputs,
  type OutputVerdict,
  type StoredOutput,
} from "../storage/output-check.js";
import { withCondition, type PlannedEvent } from "./conditions.js";
import { clip, ERROR_MAX_CHARS, maxAttempts } from "./job.js";
import type { SubmissionPlan } from "./write-ahead.js";

/** The condition that tells a COMPLETED attempt's outputs were checked (True), are being (Unknown), or failed. */
const OUTPUTS_VERIFIED = "OutputsVerified";
const CHECKING = "ProviderCompleted";

type Spec = Pick<MediaJob["spec"], "media">;

/** Whether a job names media (input references or declared outputs): it needs the object store. */
export function declaresMedia(spec: Spec): boolean {
  return (spec.media?.inputs?.length ?? 0) + (spec.media?.outputs?.length ?? 0) > 0;
}

/** Whether a provider's COMPLETED for this job must wait for its outputs to be checked. */
export const declaresOutputs = (spec: Spec): boolean => (spec.media?.outputs?.length ?? 0) > 0;

/**
 * The presigned I/O of the attempt a submission plan sends: a GET per input reference and a PUT
 * per declared output, valid until the attempt's deadlines as its intent records them.
 */
export function attemptIOFor(job: MediaJob, p: SubmissionPlan, bucket: string, now: string): AttemptIOResult {
  const sub = p.intent.submission!;
  const activeDeadline = job.spec.activeDeadlineSeconds;
  const startedAt = p.intent.startedAt;
  const inputs: Record<string, InputReference> = {};
  for (const i of job.spec.media?.inputs ?? [])
    inputs[i.name] = {
      uri: i.uri,
      ...(i.sha256 !== undefined && { sha256: i.sha256 }),
      ...(i.size !== undefined && { size: i.size }),
    };
  const executionTimeoutMs = p.request.policy.executionTimeout;
  return planAttemptIO({
    scope: { namespace: job.metadata.namespace ?? "", jobUid: job.metadata.uid ?? "", attempt: p.attempt },
    bucket,
    inputs,
    outputs: (job.spec.media?.outputs ?? []).map((o) => o.name),
    deadlines: {
      submittedAt: new Date(now),
      ...(sub.startBy !== undefined && { startBy: new Date(sub.startBy) }),
      ...(executionTimeoutMs !== undefined && {
        executionTimeoutSeconds: Math.ceil(executionTimeoutMs / 1000),
      }),
      ...(sub.expiresAt !== undefined && { providerExpiresAt: new Date(sub.expiresAt) }),
      ...(activeDeadline !== undefined &&
        startedAt !== undefined && {
          activeDeadlineAt: new Date(Date.parse(startedAt) + activeDeadline * 1000),
        }),
    },
  });
}

/** A job whose media cannot be sent at all (no store, a bad reference): Failed, never submitted. */
export function mediaRefused(
  status: MediaJobStatus,
  reason: string,
  message: string,
  now: string,
): MediaJobStatus {
  return {
    ...status,
    phase: "Failed",
    updatedAt: now,
    completedAt: now,
    error: clip(`${reason}: ${message}`, ERROR_MAX_CHARS),
  };
}

/** The reason of a media job that cannot run in an installation without a store. */
export const STORAGE_NOT_CONFIGURED = {
  reason: "StorageNotConfigured",
  message:
    "the job names media (spec.media), but this installation has no object store (STORAGE_BUCKET, chart value storage.bucket)",
};

/** The provider's COMPLETED recorded for a job with declared outputs: still Processing, to be checked. */
export function awaitingOutputCheck(job: MediaJob, status: MediaJobStatus, now: string): MediaJobStatus {
  return withCondition(
    status,
    job.metadata.generation,
    {
      type: OUTPUTS_VERIFIED,
      status: "Unknown",
      reason: CHECKING,
      message: "the provider reports COMPLETED; the declared outputs are being checked in the object store",
    },
    now,
  );
}

/** Whether a Processing job's attempt is COMPLETED at the provider and waits for its outputs' check. */
export function outputCheckDue(status: MediaJobStatus | undefined): boolean {
  const c = getCondition(status?.conditions, OUTPUTS_VERIFIED);
  return status?.phase === "Processing" && c?.status === "Unknown" && c.reason === CHECKING;
}

/** The keys of the declared outputs of the attempt that completed. */
export function outputKeys(job: MediaJob, status: MediaJobStatus): Array<{ name: string; key: string }> {
  const attempt = status.submission?.attempt ?? status.attempts ?? 1;
  const scope = { namespace: job.metadata.namespace ?? "", jobUid: job.metadata.uid ?? "", attempt };
  return (job.spec.media?.outputs ?? []).map((o) => ({ name: o.name, key: attemptObjectKey(scope, o.name) }));
}

/** What the worker reported of its outputs (digest, size), from the output status keeps. */
export const reportedOf = (status: MediaJobStatus) => reportedOutputs(status.output);

/** One entry of status.outputs: a stored object's key, its reference in the bucket, size and digest. */
export function storedOutput(
  bucket: string,
  o: { name: string; key: string; size: number; sha256?: string | undefined },
): NonNullable<MediaJobStatus["outputs"]>[number] {
  return {
    name: o.name,
    uri: `s3://${bucket}/${o.key}`,
    key: o.key,
    size: o.size,
    ...(o.sha256 && { sha256: o.sha256 }),
  };
}

/**
 * The attempt's end once its outputs were looked at: Completed with status.outputs (keys and
 * references, never URLs), or a failed attempt with the verdict's reason, back to Pending while
 * maxAttempts allows (a new attempt writes new keys) and Failed after.
 */
export function afterOutputCheck(
  job: MediaJob,
  status: MediaJobStatus,
  stored: readonly StoredOutput[],
  bucket: string,
  now: string,
): { status: MediaJobStatus; events: PlannedEvent[] } {
  return afterOutputVerdict(job, status, verifyOutputs(stored, reportedOf(status)), bucket, now);
}

/** The attempt's end once its outputs' verdict is known (afterOutputCheck; an output not kept). */
export function afterOutputVerdict(
  job: MediaJob,
  status: MediaJobStatus,
  verdict: OutputVerdict,
  bucket: string,
  now: string,
): { status: MediaJobStatus; events: PlannedEvent[] } {
  const gen = job.metadata.generation;
  if (verdict.ok) {
    const outputs = (job.spec.media?.outputs ?? []).map(({ name }) =>
      storedOutput(bucket, { name, ...verdict.outputs[name]! }),
    );
    const { error: _drop, ...rest } = status;
    const verified = withCondition(
      rest,
      gen,
      {
        type: OUTPUTS_VERIFIED,
        status: "True",
        reason: "Verified",
        message: `${outputs.length} output(s) stored`,
      },
      now,
    );
    return {
      status: { ...verified, phase: "Completed", outputs, completedAt: now, updatedAt: now },
      events: [],
    };
  }
  const failures = (status.failures ?? 0) + 1;
  const error = clip(`${verdict.reason}: ${verdict.message}`, ERROR_MAX_CHARS);
  const failed = withCondition(
    status,
    gen,
    { type: OUTPUTS_VERIFIED, status: "False", reason: verdict.reason, message: verdict.message },
    now,
  );
  const retrying = failures < maxAttempts(job);
  const events: PlannedEvent[] = [
    ["Warning", verdict.reason, `${verdict.message}${retrying ? "; retrying" : ""}`],
  ];
  if (retrying) {
    const { providerJobId: _p, submittedAt: _s, submission: _i, ...rest } = failed;
    return { status: { ...rest, phase: "Pending", failures, error, updatedAt: now }, events };
  }
  return {
    status: { ...failed, phase: "Failed", failures, error, completedAt: now, updatedAt: now },
    events,
  };
}

/**
 * The next pipeline step's media inputs: its own references, then the previous step's outputs by
 * name (a name the step references itself keeps the step's reference).
 */
export function nextStepInputs(
  stepInputs: NonNullable<NonNullable<MediaJob["spec"]["media"]>["inputs"]> | undefined,
  previous: MediaJobStatus["outputs"],
): NonNullable<NonNullable<MediaJob["spec"]["media"]>["inputs"]> {
  const own = stepInputs ?? [];
  const named = new Set(own.map((i) => i.name));
  const passed = (previous ?? [])
    .filter((o) => !named.has(o.name))
    .map((o) => ({
      name: o.name,
      uri: o.uri,
      size: o.size,
      ...(o.sha256 !== undefined && { sha256: o.sha256 }),
    }));
  return [...own, ...passed];
}
