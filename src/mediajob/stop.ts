// A running job stopped at the provider because it was cancelled (spec.cancel), suspended or ran
// past its deadline, as batch/v1 Job does; the provider job followed after the cancel until it has
// ended there (a cancelled worker may run on, and be billed); and the Event that tells how a job
// ended.
// One piece: the three stops share the follow-up after the cancel and the Event that ends a job.
import { getCondition } from "../crds/conditions.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { failureText, withCondition, type PlannedEvent } from "./conditions.js";
import { START_DEADLINE_EXCEEDED, deadlineExceeded, suspendedStatus } from "./deadline.js";
import { startDeadlineExceeded } from "./start-deadline.js";
import { heldStatus } from "./usage-cap.js";
import { TERMINAL_STATUSES, type ProviderJobStatus } from "../provider/schemas.js";
import { ERROR_MAX_CHARS, clip, type ProviderResult } from "./job.js";
import { applyProviderResult } from "./provider-result.js";
import { withRecordedUsage } from "./usage.js";
import { retry, type Facts, type Plan, type StopReason } from "./pass.js";

/**
 * The provider's answer to a cancel: the job's status then, or an error. `confirmed`: the job's own
 * status read (not the cancel's answer), whose times are the attempt's usage.
 */
export type CancelAnswer =
  { result: ProviderResult; confirmed?: boolean } | { lost: true } | { error: string };

/** How long a cancelled job may run on at the provider before it is told (CANCEL_FOLLOW_WARNING_SECONDS). */
const CANCEL_FOLLOW_WARNING_MS = 120_000;

/**
 * The Stopping condition of a job whose cancel was sent while the provider still runs it: True
 * with the reason that says why it was cancelled, and whether it has run on past the warning.
 */
const STOPPING = "Stopping";
const REASONS: Record<StopReason | "delete", { sent: string; overdue: string }> = {
  cancel: { sent: "CancelSent", overdue: "RunningAfterCancel" },
  suspend: { sent: "SuspendCancelSent", overdue: "RunningAfterSuspendCancel" },
  deadline: { sent: "DeadlineCancelSent", overdue: "RunningAfterDeadlineCancel" },
  "start-deadline": { sent: "StartDeadlineCancelSent", overdue: "RunningAfterStartDeadlineCancel" },
  "usage-limit": { sent: "UsageLimitCancelSent", overdue: "RunningAfterUsageLimitCancel" },
  delete: { sent: "DeleteCancelSent", overdue: "RunningAfterDeleteCancel" },
};

/** A job being followed after its cancel: why, since when, and whether it was told overdue. */
interface Followed<Why = StopReason | "delete"> {
  why: Why;
  since: string;
  overdue: boolean;
}

/** The cancel a Processing job is being followed after, if any (its Stopping condition). */
export function stopFollowed(status: MediaJobStatus | undefined): Followed | undefined {
  const c = getCondition(status?.conditions, STOPPING);
  if (c?.status !== "True") return undefined;
  for (const why of Object.keys(REASONS) as Array<StopReason | "delete">) {
    const r = REASONS[why];
    if (c.reason === r.sent || c.reason === r.overdue)
      return { why, since: c.lastTransitionTime, overdue: c.reason === r.overdue };
  }
  return undefined;
}

/** Whether a job is told as running on at the provider past the warning after its cancel. */
export const runningAfterCancel = (status: MediaJobStatus | undefined): boolean =>
  status?.phase === "Processing" && stopFollowed(status)?.overdue === true;

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
 * The cancel's answer read (the reconciler hands over the job's status read right after the
 * cancel, when it could: that has the final figures the cancel's own answer lacks). A job the
 * provider finished meanwhile keeps its result (it ran once; it is not run again). A job the
 * provider still runs is followed (planFollow) until it has ended there, and so is one whose end
 * was told only by the cancel's answer (no times): its usage is read from its own status before
 * the job ends. Cancelled: Cancelled for good. Suspended: Pending until resumed. Past the
 * deadline: Failed (DeadlineExceeded). A cancel that failed is retried, the deadline's too: the
 * provider's ttl covers the whole run, so only the cancel stops a job at its deadline.
 */
export function afterStop(
  job: MediaJob,
  status: MediaJobStatus,
  why: StopReason,
  answer: CancelAnswer,
  now: string,
  followMs?: number,
): Plan {
  const id = status.providerJobId;
  const events: PlannedEvent[] = [];
  let cancelled: string;
  if ("result" in answer) {
    const res = answer.result;
    if (!TERMINAL_STATUSES.has(res.status as ProviderJobStatus))
      return following(job, status, why, res, now, followMs);
    // Ended, as the cancel's answer says, but its times (the attempt's usage) are in the job's own
    // status, which could not be read just now: read at the next pass, before the job ends.
    if (answer.confirmed !== true) return following(job, status, why, res, now, followMs, "unread");
    if (res.status !== "CANCELLED") {
      // It finished before the cancel: its own end, not the suspension's or the deadline's. Its
      // usage is recorded from the job's status read, never from a cancel's answer.
      const applied = applyProviderResult({ ...job, status }, res, now, {
        recordUsage: answer.confirmed === true,
      });
      // A cancelled job that failed for good keeps its failure; one that would be retried is not.
      const end = (s: MediaJobStatus): Plan => ({ status: s, events, actions: [] });
      if (applied && (why === "suspend" || why === "start-deadline" || why === "usage-limit"))
        return end(applied);
      if (applied?.phase === "Completed") return end(applied);
      if (applied?.phase === "Failed" && why === "cancel") return end(applied);
    }
    cancelled = `cancelled job ${id} at the provider (${res.status})`;
    return stopped(job, status, why, now, cancelled, events, res);
  } else if ("lost" in answer) {
    cancelled = `the provider no longer knows job ${id}`;
  } else {
    const message = `could not cancel job ${id} at the provider: ${answer.error}`;
    events.push(["Warning", "CancelFailed", message]);
    return { status, events, actions: [], error: retry(message) };
  }
  return stopped(job, status, why, now, cancelled, events);
}

/** The cancel was sent and the provider still runs the job: Processing, followed at every tick. */
function following(
  job: MediaJob,
  status: MediaJobStatus,
  why: StopReason,
  res: ProviderResult,
  now: string,
  followMs: number | undefined,
  unread?: "unread",
): Plan {
  const message = unread
    ? `cancelled job ${res.id} at the provider (${res.status}); its status, with the times it is billed for, is read before the job ends`
    : `cancelled job ${res.id} at the provider, which still reports it ${res.status}: followed until it has ended there`;
  const prior = stopFollowed(status);
  const reason = prior?.why === why && prior.overdue ? REASONS[why].overdue : REASONS[why].sent;
  const events: PlannedEvent[] = prior ? [] : [["Normal", REASONS[why].sent, message]];
  return {
    status: prior
      ? status
      : withCondition(
          status,
          job.metadata.generation,
          { type: STOPPING, status: "True", reason, message },
          now,
        ),
    events,
    actions: [],
    ...(followMs !== undefined && { requeueAfterMs: followMs }),
  };
}

/**
 * A job followed after its cancel, with the provider's status read this pass: ended there, it
 * ends here as the stop says, with the provider's final answer; still running past the warning,
 * one Warning Event with the provider's job id (and the jobs-running-after-cancel gauge).
 */
export function planFollow(
  job: MediaJob,
  status: MediaJobStatus,
  f: Followed<StopReason>,
  facts: Facts,
): Plan {
  const now = facts.now.toISOString();
  const tick = facts.settings.tickMs;
  const id = status.providerJobId;
  const read = facts.provider;
  if (!read || "error" in read) return { status, events: [], actions: [], requeueAfterMs: tick };
  if ("lost" in read) return stopped(job, status, f.why, now, `the provider no longer knows job ${id}`, []);
  const res = read.result;
  if (TERMINAL_STATUSES.has(res.status as ProviderJobStatus))
    return afterStop(job, status, f.why, { result: res, confirmed: true }, now);
  const warnMs = facts.settings.cancelFollowWarningMs ?? CANCEL_FOLLOW_WARNING_MS;
  return { ...stillRunning(job, status, f, res, facts.now, warnMs, tick), actions: [] };
}

/** Still running after the cancel: looked at again, and told once past the warning. */
function stillRunning(
  job: MediaJob,
  status: MediaJobStatus,
  f: Followed,
  res: ProviderResult,
  now: Date,
  warnMs: number,
  tick: number,
): { status: MediaJobStatus; events: PlannedEvent[]; requeueAfterMs: number } {
  const runningForMs = now.getTime() - Date.parse(f.since);
  if (f.overdue || runningForMs < warnMs)
    return { status, events: [], requeueAfterMs: Math.max(50, Math.min(tick, warnMs - runningForMs)) };
  const message =
    `job ${status.providerJobId ?? res.id} still reports ${res.status} at the provider ${Math.floor(runningForMs / 1000)} s after ` +
    `it was cancelled (${f.why}): it may still be billed; followed until it has ended there`;
  return {
    status: withCondition(
      status,
      job.metadata.generation,
      { type: STOPPING, status: "True", reason: REASONS[f.why].overdue, message },
      now.toISOString(),
    ),
    events: [["Warning", REASONS[f.why].overdue, message]],
    requeueAfterMs: tick,
  };
}

/** What a deletion does after its cancel's answer (and the job's status read after it). */
export interface DeletionCancelOutcome {
  /** Written before the finalizer goes (or while it stays): the job's end, or that it is followed. */
  status?: MediaJobStatus;
  events: PlannedEvent[];
  /** The finalizer may go: the provider has ended the job, or the deletion gave up waiting. */
  letGo: boolean;
  requeueAfterMs?: number;
}

/**
 * A deleted job whose cancel was answered: ended at the provider, it ends Cancelled here with the
 * provider's final answer, then is let go; still running, it keeps its finalizer and is followed
 * at every tick (a Warning past the warning), until DELETE_CANCEL_TIMEOUT_SECONDS lets it go.
 */
export function afterDeletionCancel(
  job: MediaJob,
  res: ProviderResult,
  o: {
    now: Date;
    deletingForMs: number;
    giveUpMs: number;
    warnMs?: number;
    tickMs: number;
    /** `res` is the job's own status read, whose times are the attempt's usage. */
    confirmed?: boolean;
  },
): DeletionCancelOutcome {
  const status = job.status ?? {};
  const now = o.now.toISOString();
  const id = status.providerJobId ?? res.id;
  if (TERMINAL_STATUSES.has(res.status as ProviderJobStatus)) {
    // It ended there on its own before the cancel took: that end, if it is final; else Cancelled.
    const recordUsage = o.confirmed === true;
    const own = res.status === "CANCELLED" ? undefined : applyProviderResult(job, res, now, { recordUsage });
    const ended: MediaJobStatus | undefined =
      status.phase !== "Processing"
        ? undefined
        : own && own.phase !== "Pending"
          ? own
          : {
              ...(recordUsage ? withRecordedUsage(job, status, res, now) : status),
              phase: "Cancelled",
              updatedAt: now,
              completedAt: now,
              error: clip(
                `Cancelled: the MediaJob was deleted: cancelled job ${id} at the provider (${res.status})`,
                ERROR_MAX_CHARS,
              ),
            };
    return { ...(ended && { status: ended }), events: [], letGo: true };
  }
  if (o.deletingForMs >= o.giveUpMs)
    return {
      events: [
        [
          "Warning",
          "CancelAbandoned",
          `job ${id} still reports ${res.status} at the provider after the cancel; deleting without waiting longer`,
        ],
      ],
      letGo: true,
    };
  const prior = stopFollowed(status);
  if (prior?.why !== "delete") {
    const message = `cancelled job ${id} at the provider, which still reports it ${res.status}: followed until it has ended there before the MediaJob goes`;
    return {
      status: withCondition(
        status,
        job.metadata.generation,
        { type: STOPPING, status: "True", reason: REASONS.delete.sent, message },
        now,
      ),
      events: [["Normal", REASONS.delete.sent, message]],
      letGo: false,
      requeueAfterMs: o.tickMs,
    };
  }
  const next = stillRunning(job, status, prior, res, o.now, o.warnMs ?? CANCEL_FOLLOW_WARNING_MS, o.tickMs);
  return {
    ...(next.status !== status && { status: next.status }),
    events: next.events,
    letGo: false,
    requeueAfterMs: next.requeueAfterMs,
  };
}

function stopped(
  job: MediaJob,
  status: MediaJobStatus,
  why: StopReason,
  now: string,
  cancelled: string,
  events: PlannedEvent[],
  ended?: ProviderResult,
): Plan {
  const gen = job.metadata.generation;
  // The attempt's usage, from the job's status read once the provider ended it.
  if (ended) status = withRecordedUsage(job, status, ended, now);
  if (why === "deadline") {
    const failed = deadlineExceeded(status, now, cancelled);
    events.push(["Warning", "DeadlineExceeded", failed.error!]);
    return { status: failed, events, actions: [] };
  }
  if (why === "usage-limit") {
    events.push([
      "Warning",
      "UsageLimitReached",
      `its account has used its plan's GPU seconds this period: ${cancelled}; the job waits for the next period or a larger plan`,
    ]);
    return { status: heldStatus(status, now), events, actions: [] };
  }
  if (why === "start-deadline") {
    const next = startDeadlineExceeded(job, status, now, cancelled);
    events.push([
      "Warning",
      START_DEADLINE_EXCEEDED,
      next.phase === "Pending" ? `${next.error!}; submitted again (spec.maxAttempts)` : next.error!,
    ]);
    return { status: next, events, actions: [] };
  }
  if (why === "cancel") return { status: cancelledStatus(status, now, cancelled), events, actions: [] };
  const message = `spec.suspend is true: ${cancelled}; the job is submitted again once it is false`;
  events.push(["Normal", "Suspended", message]);
  return {
    status: withCondition(
      suspendedStatus(status, now),
      gen,
      { type: "Suspended", status: "True", reason: "Suspended", message },
      now,
    ),
    events,
    actions: [],
  };
}

/** Cancelled for good (spec.cancel): `what` says what became of it at the provider. */
export function cancelledStatus(status: MediaJobStatus, now: string, what: string): MediaJobStatus {
  return {
    ...status,
    phase: "Cancelled",
    updatedAt: now,
    completedAt: now,
    error: clip(`Cancelled: spec.cancel is true: ${what}`, ERROR_MAX_CHARS),
  };
}

/**
 * The Event that says how a job ended: Normal Completed, Normal Cancelled (spec.cancel: the end
 * that was asked for), or Warning Failed with the reason.
 */
export function endEvent(status: MediaJobStatus): PlannedEvent {
  if (status.phase === "Cancelled") return ["Normal", "Cancelled", failureText(status)];
  if (status.phase === "Completed")
    return [
      "Normal",
      "Completed",
      `completed at the provider${status.providerJobId ? ` as ${status.providerJobId}` : ""}, attempt ${status.attempts ?? 1}`,
    ];
  return ["Warning", "Failed", failureText(status)];
}
