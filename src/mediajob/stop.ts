// A running job stopped at the provider because it was suspended or ran past its deadline, as
// batch/v1 Job does, and the Event that tells how a job ended.
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { failureText, withCondition, type PlannedEvent } from "./conditions.js";
import { deadlineExceeded, suspendedStatus } from "./deadline.js";
import { TERMINAL_STATUSES, type ProviderJobStatus } from "../provider/schemas.js";
import type { ProviderResult } from "./job.js";
import { applyProviderResult } from "./provider-result.js";
import { retry, type Plan, type StopReason } from "./plan.js";

/** The provider's answer to a cancel: the job's status then, or an error. */
export type CancelAnswer = { result: ProviderResult } | { lost: true } | { error: string };

/** What the plan does with a job to stop: cancel it, or, its provider id unknown, stop it here. */
export function planStop(job: MediaJob, status: MediaJobStatus, why: StopReason, now: string): Plan {
  const id = status.providerJobId;
  if (id && status.endpointId)
    return {
      status,
      events: [],
      actions: [{ type: "cancel", why, endpointId: status.endpointId, providerJobId: id }],
    };
  return stopped(job, status, why, now, "its provider id is unknown, so it could not be cancelled there", []);
}

/**
 * The cancel's answer read. A job the provider finished meanwhile keeps its result (it ran once;
 * it is not run again). Suspended: Pending until resumed. Past the deadline: Failed
 * (DeadlineExceeded), even when the cancel fails: the provider was given the deadline as the
 * job's TTL where it could be. A suspension whose cancel failed is retried.
 */
export function afterStop(
  job: MediaJob,
  status: MediaJobStatus,
  why: StopReason,
  answer: CancelAnswer,
  now: string,
): Plan {
  const id = status.providerJobId;
  const events: PlannedEvent[] = [];
  let cancelled: string;
  if ("result" in answer) {
    const res = answer.result;
    if (TERMINAL_STATUSES.has(res.status as ProviderJobStatus) && res.status !== "CANCELLED") {
      // It finished before the cancel: its own end, not the suspension's or the deadline's.
      // A /cancel answer, not the job's status: its usage is not recorded from it.
      const applied = applyProviderResult({ ...job, status }, res, now, { recordUsage: false });
      if (applied && why === "suspend") return { status: applied, events, actions: [] };
      if (applied?.phase === "Completed") return { status: applied, events, actions: [] };
    }
    cancelled = `cancelled job ${id} at the provider (${res.status})`;
  } else if ("lost" in answer) {
    cancelled = `the provider no longer knows job ${id}`;
  } else {
    const message = `could not cancel job ${id} at the provider: ${answer.error}`;
    events.push(["Warning", "CancelFailed", message]);
    if (why === "suspend") return { status, events, actions: [], error: retry(message) };
    cancelled = message;
  }
  return stopped(job, status, why, now, cancelled, events);
}

function stopped(
  job: MediaJob,
  status: MediaJobStatus,
  why: StopReason,
  now: string,
  cancelled: string,
  events: PlannedEvent[],
): Plan {
  if (why === "deadline") {
    const failed = deadlineExceeded(status, now, cancelled);
    events.push(["Warning", "DeadlineExceeded", failed.error!]);
    return { status: failed, events, actions: [] };
  }
  const message = `spec.suspend is true: ${cancelled}; the job is submitted again once it is false`;
  events.push(["Normal", "Suspended", message]);
  return {
    status: withCondition(
      suspendedStatus(status, now),
      job.metadata.generation,
      { type: "Suspended", status: "True", reason: "Suspended", message },
      now,
    ),
    events,
    actions: [],
  };
}

/** The Event that says how a job ended: Normal Completed, or Warning Failed with the reason. */
export function endEvent(status: MediaJobStatus): PlannedEvent {
  if (status.phase === "Completed")
    return [
      "Normal",
      "Completed",
      `completed at the provider${status.providerJobId ? ` as ${status.providerJobId}` : ""}, attempt ${status.attempts ?? 1}`,
    ];
  return ["Warning", "Failed", failureText(status)];
}
