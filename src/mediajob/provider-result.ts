// A provider's job status applied to a MediaJob: the one way a result (a callback, a poll, a
// replay of either) changes a job, so every writer produces the same status.
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { deadlineExceeded, msUntilDeadline, suspendedStatus } from "./deadline.js";
import { msUntilStartDeadline, startDeadlineExceeded } from "./start-deadline.js";
import { heldForUsage, heldStatus } from "./usage-cap.js";
import { awaitingOutputCheck, declaresOutputs } from "./media.js";
import { redactOutputUrls } from "./kept-outputs.js";
import {
  ERROR_MAX_CHARS,
  type ProviderResult,
  clip,
  errorText,
  initialStatus,
  isTerminal,
  maxAttempts,
} from "./job.js";
import { withBilledUsage, withRecordedUsage, type UsageSettings } from "./usage.js";

/**
 * Whether a provider status object speaks about the current submission of this job. Callbacks and
 * polls of an earlier attempt (late, reordered) must not touch the current one. While the
 * provider's id for the current submission is unknown (its /run answer was lost, or the callback
 * beat the controller's record of it), only a caller that has bound the result to this submission
 * (the sidecar: a callback URL of this attempt, confirmed with the provider's status API) may adopt
 * it; nothing else can tell our job from another.
 */
export function concernsCurrentSubmission(
  status: MediaJobStatus | undefined,
  result: ProviderResult,
  opts: { adopt?: boolean } = {},
): boolean {
  if (!status?.jobId) return false;
  if (status.providerJobId) return result.id === status.providerJobId;
  return opts.adopt === true && status.submission !== undefined;
}

/**
 * status.output's cap, as JSON bytes. etcd refuses objects over 1.5 MiB, and the next pipeline step
 * copies this output into its own spec (input.previous), so one output must leave room for the
 * rest of both objects. Larger outputs are stored as a marker with a preview: the worker should
 * put large results in object storage and return their location.
 */
export const OUTPUT_MAX_BYTES = 256 * 1024;
const OUTPUT_PREVIEW_CHARS = 4096;

/**
 * status.output's nesting cap. A worker's output nested thousands deep makes JSON.stringify (and
 * every writer of the object after it) overflow the stack; such an output is stored as a marker
 * instead, so the job still ends Completed rather than staying Processing on a write that throws.
 */
export const OUTPUT_MAX_DEPTH = 64;

/** Whether a value nests deeper than `max` levels of objects and arrays (iterative: never recurses). */
function deeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (!v || typeof v !== "object") continue;
    if (depth >= max) return true;
    for (const child of Object.values(v as Record<string, unknown>)) stack.push([child, depth + 1]);
  }
  return false;
}

/** The provider's output as status.output stores it: an object, within OUTPUT_MAX_BYTES and OUTPUT_MAX_DEPTH. */
export function storedOutput(output: unknown): Record<string, unknown> {
  const obj =
    output && typeof output === "object" && !Array.isArray(output)
      ? (output as Record<string, unknown>)
      : { value: output ?? null };
  if (deeperThan(obj, OUTPUT_MAX_DEPTH))
    return {
      truncated: true,
      reason: `nested deeper than ${OUTPUT_MAX_DEPTH} levels`,
      maxDepth: OUTPUT_MAX_DEPTH,
    };
  const text = JSON.stringify(obj);
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes <= OUTPUT_MAX_BYTES) return obj;
  return {
    truncated: true,
    originalBytes: bytes,
    maxBytes: OUTPUT_MAX_BYTES,
    preview: text.slice(0, OUTPUT_PREVIEW_CHARS),
  };
}

/**
 * Applies a provider result. Returns the new status, or undefined when nothing changes: a
 * non-terminal status, a result about another submission, or a job already finished (a late
 * FAILED after Completed changes nothing: a job never moves backwards).
 */
export function applyProviderResult(
  job: MediaJob,
  result: ProviderResult,
  now: string,
  opts: {
    adopt?: boolean;
    billing?: UsageSettings;
    /**
     * False for an answer that is not the provider's status of the job (a /cancel answer carries
     * no times): the attempt's end is applied, its usage not recorded from it.
     */
    recordUsage?: boolean;
  } = {},
): MediaJobStatus | undefined {
  // A fast job's callback can arrive before the controller's first status write: judge it against
  // the status the job is about to have (its id is spec.id or the uid, fixed already).
  const status = job.status?.jobId ? job.status : initialStatus(job, now);
  if (isTerminal(status.phase)) return undefined;
  if (!concernsCurrentSubmission(status, result, opts)) return undefined;
  // The attempt's GPU time rides on the write of its end (status.usage), whatever the end; billed
  // and put in the meter outbox (meter Pending) there too when the writer has the rule (the
  // sidecar, configured as the controller is), else by the controller's next pass: a job deleted
  // right after its result was written still owes its report, and its deletion waits for it.
  const ended: MediaJobStatus = {
    ...status,
    providerJobId: status.providerJobId ?? result.id,
    ...(status.submission && { submission: { ...status.submission, state: "Accepted" as const } }),
    updatedAt: now,
  };
  const recorded = opts.recordUsage === false ? ended : withRecordedUsage(job, ended, result, now);
  const base: MediaJobStatus = opts.billing
    ? // Metering off here leaves the meter to the controller's pass: a sidecar configured
      // without it never decides NotMetered for a controller that meters.
      withBilledUsage(job, recorded, opts.billing, { decideMeter: opts.billing.metering })
    : recorded;
  const overDeadline = msUntilDeadline(job.spec, status, Date.parse(now)) <= 0;
  switch (result.status) {
    case "COMPLETED": {
      const { error: _drop, ...rest } = base;
      // Declared outputs are checked in the store before the job is Completed (media.ts): the
      // controller, which holds the store's credentials, does it at its next pass.
      // A URL a worker reported for an output is a secret: status keeps the report without it.
      const output = storedOutput(redactOutputUrls(result.output));
      if (declaresOutputs(job.spec)) return awaitingOutputCheck(job, { ...rest, output }, now);
      return { ...rest, phase: "Completed", output, completedAt: now };
    }
    case "FAILED":
    case "TIMED_OUT": {
      // The provider enforced the deadline we sent it (or the job failed past it): no retry.
      if (overDeadline) return deadlineExceeded(base, now, `the provider reports ${result.status}`);
      const failures = (status.failures ?? 0) + 1;
      const message = errorText(
        result.error,
        result.status === "TIMED_OUT" ? "the job timed out at the provider" : "the job failed",
      );
      const error = clip(`${result.status}: ${message}`, ERROR_MAX_CHARS);
      // Judged by failures, not submissions: a replay of a lost job is not a failed try.
      if (failures < maxAttempts(job)) {
        // Retry: back to Pending; the next submission is a new attempt with a new intent, so a late
        // callback of this one no longer matches.
        const { providerJobId: _p, submittedAt: _s, submission: _i, ...rest } = base;
        return { ...rest, phase: "Pending", failures, error };
      }
      return { ...base, phase: "Failed", failures, error, completedAt: now };
    }
    case "CANCELLED":
      // The controller's own cancellations (a suspension, the deadline) may reach the sidecar as a
      // callback before the controller records them: they end as the controller would end them.
      if (overDeadline) return deadlineExceeded(base, now, "cancelled at the provider");
      if (job.spec.suspend) return suspendedStatus(base, now);
      if (!job.spec.cancel && msUntilStartDeadline(status, Date.parse(now)) <= 0)
        return startDeadlineExceeded(job, base, now, "cancelled at the provider");
      // Marked held for its account's cap before the controller's cancel: held, not ended.
      if (!job.spec.cancel && heldForUsage(status)) return heldStatus(base, now);
      return { ...base, phase: "Cancelled", error: "cancelled at the provider", completedAt: now };
    default:
      return undefined;
  }
}
