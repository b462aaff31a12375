// spec.startDeadlineSeconds: how long a submitted job may wait in the provider's queue before a
// worker starts it. RunPod's queue holds a job until a worker takes it (cold starts, no capacity,
// crash-looping workers), and a job waiting there costs nothing: past the start deadline it is
// cancelled there and ends Failed (StartDeadlineExceeded), or goes back to Pending while
// spec.maxAttempts allows another try.
import { getCondition } from "../crds/conditions.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { withCondition } from "./conditions.js";
import { START_DEADLINE_EXCEEDED } from "./deadline.js";
import { isProviderWait, recordedWaitCause, type WaitCause } from "./wait-cause.js";
import { ERROR_MAX_CHARS, clip, maxAttempts } from "./job.js";

/**
 * Added to the start deadline in the provider's ttl (deadline.ts, providerPolicy): the
 * controller's cancel at the start deadline comes first, and the provider still knows the job then.
 */
export const START_DEADLINE_GRACE_MS = 5 * 60_000;

/** The queue allowance of a job's ttl, ms, for a start deadline in seconds: it and the grace. */
export const queueAllowanceMs = (startDeadlineSeconds: number): number =>
  startDeadlineSeconds * 1000 + START_DEADLINE_GRACE_MS;

/**
 * Whether a read of the provider showed the current attempt started (condition Started=True; each
 * submission of a job with a start deadline sets it False, startNotSeen).
 */
export const startedAtProvider = (status: MediaJobStatus | undefined): boolean =>
  getCondition(status?.conditions, "Started")?.status === "True";

/** A new submission of a job with a start deadline: not yet seen started. */
export function startNotSeen(
  job: MediaJob,
  status: MediaJobStatus,
  seconds: number,
  now: string,
): MediaJobStatus {
  return withCondition(
    status,
    job.metadata.generation,
    {
      type: "Started",
      status: "False",
      reason: "NotYetStarted",
      message: `submitted; cancelled at the provider if no worker starts it within ${seconds} s`,
    },
    now,
  );
}

/**
 * Milliseconds until the current attempt's start deadline (status.submission.startBy, recorded
 * with its intent), or Infinity: none recorded, or a read showed it started.
 */
export function msUntilStartDeadline(status: MediaJobStatus | undefined, nowMs: number): number {
  const by = Date.parse(status?.submission?.startBy ?? "");
  if (Number.isNaN(by) || startedAtProvider(status)) return Infinity;
  return by - nowMs;
}

/**
 * Still queued at the provider at its start deadline: the Started=False condition names the
 * endpoint's cause from its last /health (crash-looping workers, a cold start, no capacity), which
 * the job's StartDeadlineExceeded error then gives too.
 */
export function notStartedBecause(
  job: MediaJob,
  status: MediaJobStatus,
  cause: WaitCause | undefined,
  now: string,
): MediaJobStatus {
  if (!cause) return status;
  return withCondition(
    status,
    job.metadata.generation,
    { type: "Started", status: "False", reason: cause.reason, message: cause.message },
    now,
  );
}

/**
 * A read showed the current attempt started (within its start deadline): not checked again. A
 * Queued condition that named the endpoint's cause (provider-wait.ts) ends with it.
 */
export function startedStatus(
  status: MediaJobStatus,
  generation: number | undefined,
  providerStatus: string,
  now: string,
): MediaJobStatus {
  const left = isProviderWait(getCondition(status.conditions, "Queued"))
    ? withCondition(
        status,
        generation,
        {
          type: "Queued",
          status: "False",
          reason: "Started",
          message: `the provider reports ${providerStatus}: it left the provider's queue`,
        },
        now,
      )
    : status;
  return withCondition(
    left,
    generation,
    {
      type: "Started",
      status: "True",
      reason: "StartedAtProvider",
      message: `the provider reports ${providerStatus}: a worker started it`,
    },
    now,
  );
}

/**
 * Why the attempt never started, as the job recorded it: the pass at the deadline names the
 * endpoint's cause on Started=False; the callback of that pass's cancel can reach the sidecar
 * before the pass writes it, and then the cause an earlier pass named on Queued is the one known.
 */
function deadlineCause(status: MediaJobStatus): WaitCause | undefined {
  const started = getCondition(status.conditions, "Started");
  if (started?.status === "False" && started.reason !== "NotYetStarted")
    return { reason: started.reason, message: started.message ?? "" };
  return recordedWaitCause(getCondition(status.conditions, "Queued"));
}

/**
 * The attempt never started within its start deadline and was cancelled at the provider (where a
 * queued job costs nothing): counted as a failure, it goes back to Pending while spec.maxAttempts
 * allows another try, else ends Failed, reason StartDeadlineExceeded.
 */
export function startDeadlineExceeded(
  job: MediaJob,
  status: MediaJobStatus,
  now: string,
  what: string,
): MediaJobStatus {
  const failures = (status.failures ?? 0) + 1;
  const since = Date.parse(status.submission?.startedAt ?? "");
  const by = Date.parse(status.submission?.startBy ?? "");
  const seconds = Number.isNaN(since) || Number.isNaN(by) ? "?" : String(Math.round((by - since) / 1000));
  const known = deadlineCause(status);
  const cause = known ? `; at the endpoint: ${known.reason}: ${known.message}` : "";
  const error = clip(
    `${START_DEADLINE_EXCEEDED}: the job waited in the provider's queue past its start deadline ` +
      `(${seconds} s) without a worker starting it (${what})${cause}`,
    ERROR_MAX_CHARS,
  );
  if (failures < maxAttempts(job)) {
    const { providerJobId: _p, submittedAt: _s, submission: _i, ...rest } = status;
    return { ...rest, phase: "Pending", failures, error, updatedAt: now };
  }
  return { ...status, phase: "Failed", failures, error, updatedAt: now, completedAt: now };
}
