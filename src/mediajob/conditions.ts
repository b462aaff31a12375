// The conditions that follow from a status (Succeeded, Submitted) and the summary columns.
import { mediaFailureReason } from "./media-reasons.js";
import type { Condition } from "../crds/common.js";
import { getCondition, setCondition, type ConditionInput } from "../crds/conditions.js";
import type { JobPhase, MediaJobStatus } from "../crds/mediajob.js";
import { DEADLINE_EXCEEDED, EXPIRED, START_DEADLINE_EXCEEDED } from "./deadline.js";
import { isTerminal, jobPhase } from "./job.js";
import { SUBMISSION_UNCONFIRMED, failedUnconfirmed } from "./unconfirmed.js";
import { isProviderWait } from "./wait-cause.js";

/** Why a Failed job failed, as the Succeeded condition's reason. */
function failureReason(status: MediaJobStatus): string {
  if (status.error?.startsWith(`${DEADLINE_EXCEEDED}:`)) return DEADLINE_EXCEEDED;
  if (status.error?.startsWith(`${EXPIRED}:`)) return EXPIRED;
  if (status.error?.startsWith(`${START_DEADLINE_EXCEEDED}:`)) return START_DEADLINE_EXCEEDED;
  if (failedUnconfirmed(status)) return SUBMISSION_UNCONFIRMED;
  return mediaFailureReason(status.error) ?? "Failed";
}

/**
 * status.reason and status.message (the REASON and MESSAGE columns): the condition that matters
 * most now. A final job: Succeeded. A waiting one: what it waits for (suspended, its account, its
 * endpoint, a refused submission). A running one: an unconfirmed submission, why it waits in the
 * provider's queue, or running past its timeout.
 */
export function summaryOf(conditions: Condition[]): { reason: string; message: string } {
  const find = (type: string, status: string, reason?: string) =>
    conditions.find((c) => c.type === type && c.status === status && (!reason || c.reason === reason));
  const succeeded = conditions.find((c) => c.type === "Succeeded");
  const pick =
    (succeeded?.status !== "Unknown" && succeeded) ||
    find("Suspended", "True") ||
    find("Suspended", "Unknown") ||
    (succeeded?.reason === "Pending" &&
      (find("Admitted", "False") ||
        find("EndpointReady", "False") ||
        find("Queued", "True") ||
        find("Submitted", "False"))) ||
    find("Stopping", "True") ||
    find("Submitted", "Unknown", SUBMISSION_UNCONFIRMED) ||
    // Submitted and waiting in the provider's queue: why (provider-wait.ts).
    find("Queued", "True") ||
    find("Overdue", "True") ||
    succeeded;
  return { reason: pick?.reason ?? "Pending", message: (pick?.message ?? "").slice(0, 4096) };
}

/** Succeeded follows the phase, so phase and conditions always agree. */
export function withPhaseConditions(
  status: MediaJobStatus,
  generation: number | undefined,
  now: string,
): MediaJobStatus {
  const byPhase: Record<JobPhase, [Condition["status"], string, string]> = {
    Pending: ["Unknown", "Pending", "waiting to be submitted to the GPU provider"],
    Processing: ["Unknown", "Processing", "running at the GPU provider"],
    // A job completed from the stage cache (stage-cache.ts) was never run: said so in its reason.
    Completed:
      getCondition(status.conditions, "OutputsVerified")?.reason === "CacheHit"
        ? ["True", "CacheHit", "completed from the stage cache: not run at the provider, not billed"]
        : ["True", "Completed", "the GPU provider completed the job"],
    Failed: ["False", failureReason(status), status.error ?? "the job failed"],
    Cancelled: ["False", "Cancelled", status.error ?? "the job was cancelled"],
  };
  const [s, reason, message] = byPhase[jobPhase(status)];
  let conditions = setCondition(
    status.conditions,
    { type: "Succeeded", status: s, reason, message },
    now,
    generation,
  );
  // Submitted is True once the provider's id is known. While a submission is unconfirmed it keeps
  // what the submission protocol wrote (Unknown: Submitting, SubmissionUnconfirmed), and once True
  // it keeps how the id was learnt (Submitted, AdoptedByCallback).
  if ((status.phase === "Processing" || isTerminal(status.phase)) && status.providerJobId) {
    const prev = conditions.find((c) => c.type === "Submitted");
    conditions = setCondition(
      conditions,
      {
        type: "Submitted",
        status: "True",
        reason: prev?.status === "True" ? prev.reason : "Submitted",
        message: `submitted as ${status.providerJobId}`,
      },
      now,
      generation,
    );
  }
  // A job that has left Processing no longer waits in the provider's queue: a Pending job's Queued
  // is the in-flight window's own (queued.ts), never a provider cause of an attempt that ended.
  if (status.phase !== "Processing" && isProviderWait(getCondition(conditions, "Queued")))
    conditions = setCondition(
      conditions,
      {
        type: "Queued",
        status: "False",
        reason: "LeftProviderQueue",
        message: `the attempt ended at the provider (the job is ${jobPhase(status)})`,
      },
      now,
      generation,
    );
  // A job that has left Processing (a callback may end it) is no longer followed after a cancel.
  if (status.phase !== "Processing" && getCondition(conditions, "Stopping")?.status === "True")
    conditions = setCondition(
      conditions,
      { type: "Stopping", status: "False", reason: "Stopped", message: "the job has ended at the provider" },
      now,
      generation,
    );
  return {
    ...status,
    conditions,
    ...summaryOf(conditions),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
}

/** How a job failed, in one line: its Succeeded reason, then what it says (once). */
export function failureText(status: MediaJobStatus): string {
  const why = getCondition(status.conditions, "Succeeded");
  const reason = why?.reason ?? status.phase ?? "Failed";
  const message = why?.message ?? status.error ?? `the job ended ${status.phase}`;
  return message.startsWith(`${reason}:`) ? message : `${reason}: ${message}`;
}

/** One condition set on a status, for the job's current generation. */
export function withCondition(
  status: MediaJobStatus,
  generation: number | undefined,
  c: ConditionInput,
  now: string,
): MediaJobStatus {
  return { ...status, conditions: setCondition(status.conditions, c, now, generation) };
}

/** An Event planned by the domain: its type, reason and message. */
export type PlannedEvent = [type: "Normal" | "Warning", reason: string, message: string];

/**
 * A condition changed, with an Event only when its status or reason changes (no Event storms).
 * Every Event is an apiserver write: warnings and recoveries are told, not the expected first pass
 * of every job (admitted, endpoint ready).
 */
export function noteCondition(
  status: MediaJobStatus,
  generation: number | undefined,
  c: ConditionInput,
  now: string,
  events: PlannedEvent[],
  eventType: PlannedEvent[0],
): MediaJobStatus {
  const prev = getCondition(status.conditions, c.type);
  const changed = !prev || prev.status !== c.status || prev.reason !== c.reason;
  const worthTelling =
    eventType === "Warning" || (prev !== undefined && prev.status !== "True" && c.status === "True");
  if (changed && worthTelling) events.push([eventType, c.reason, c.message]);
  return withCondition(status, generation, c, now);
}
