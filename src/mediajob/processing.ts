// A Processing job: stopped at its deadline or when suspended, its unconfirmed submission waited
// for, and past its timeout checked with the provider (the automated "missed callback" runbook).
import { getCondition } from "../crds/conditions.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { TERMINAL_STATUSES, type ProviderJobStatus } from "../provider/schemas.js";
import { withCondition, type PlannedEvent } from "./conditions.js";
import { EXPIRED, expiredStatus, msUntilDeadline, pastProviderTtl } from "./deadline.js";
import { currentProviderJobId } from "./job.js";
import { retry, type Facts, type Plan } from "./pass.js";
import { applyProviderResult } from "./provider-result.js";
import { afterOutputCheck, afterOutputVerdict, outputCheckDue } from "./media.js";
import { decideNotKept } from "./kept-outputs.js";
import { afterProviderLostJob, msUntilStuck, resetToPending } from "./recovery.js";
import { planFollow, planStop, stopFollowed } from "./stop.js";
import {
  msUntilStartDeadline,
  notStartedBecause,
  startedAtProvider,
  startedStatus,
} from "./start-deadline.js";
import { withProviderWait, waitReadDue } from "./provider-wait.js";
import { heldForUsage, markHeldForUsage } from "./usage-cap.js";
import type { WaitCause } from "./wait-cause.js";
import { isUnconfirmed } from "./submission.js";
import { decideUnconfirmed } from "./unconfirmed.js";
import { unconfirmedStatus } from "./write-ahead.js";

/**
 * The provider status read a pass needs, if any: only for a job past its timeout, its start
 * deadline, held by its account's cap or waiting for a new cause (provider-wait.ts), with a known
 * endpoint, not stopped, not suspended and not unconfirmed (its outcome can come only by callback).
 * A job on a self-hosted endpoint (GpuEndpoint spec.baseUrl) is read at every pass: no callback
 * comes from it (runpod-python's local API server runs a job when its status is asked).
 */
export function providerReadDue(
  job: MediaJob,
  nowMs: number,
  defaultTimeoutSeconds: number,
  usageCapReached = false,
  providerWait?: WaitCause,
  selfHosted = false,
): { endpointId: string; providerJobId: string } | undefined {
  const status = job.status;
  if (status?.phase !== "Processing" || job.metadata.deletionTimestamp) return undefined;
  // COMPLETED already: the store, not the provider, has what is left to learn.
  if (outputCheckDue(status)) return undefined;
  // Cancelled and still running at the provider: followed at every pass until it has ended there.
  if (stopFollowed(status) && status.endpointId && status.providerJobId)
    return { endpointId: status.endpointId, providerJobId: status.providerJobId };
  if (msUntilDeadline(job.spec, status, nowMs) <= 0 || job.spec.suspend || isUnconfirmed(status))
    return undefined;
  // Past its timeout (a callback may be lost), or past its start deadline not yet seen started.
  // Or its account at its plan's cap, the job not seen started (it may be cancelled in the queue).
  // Or its endpoint's queue has a cause its condition does not name yet (provider-wait.ts).
  const due =
    selfHosted ||
    msUntilStuck(job, nowMs, defaultTimeoutSeconds) <= 0 ||
    msUntilStartDeadline(status, nowMs) <= 0 ||
    (usageCapReached && !startedAtProvider(status) && status.providerJobId !== undefined) ||
    waitReadDue(status, providerWait);
  if (!due || !status.endpointId) return undefined;
  return { endpointId: status.endpointId, providerJobId: providerIdOf(job, status) };
}

const providerIdOf = (job: MediaJob, status: MediaJobStatus): string =>
  currentProviderJobId({ ...job, status });

export function planProcessing(job: MediaJob, status: MediaJobStatus, facts: Facts): Plan {
  const nowMs = facts.now.getTime();
  const now = facts.now.toISOString();
  const gen = job.metadata.generation;
  // COMPLETED at the provider, its declared outputs not yet checked: the run has ended, so
  // nothing below (a cancel, a deadline) concerns it any more.
  if (outputCheckDue(status)) return planOutputCheck(job, status, facts);
  const followed = stopFollowed(status);
  if (followed && followed.why !== "delete")
    return planFollow(job, status, { ...followed, why: followed.why }, facts);
  // spec.cancel is final: it comes before the deadline and a suspension.
  if (job.spec.cancel && !isUnconfirmed(status)) return planStop(job, status, "cancel", now);
  if (msUntilDeadline(job.spec, status, nowMs) <= 0) return planStop(job, status, "deadline", now);
  if (job.spec.suspend || job.spec.cancel) {
    if (!isUnconfirmed(status)) return planStop(job, status, "suspend", now);
    // Its provider id is unknown, so it cannot be cancelled, and it may be running: it is not
    // submitted again either. It is cancelled once its id arrives (its callback), or ends as any
    // unconfirmed submission does at its deadline.
    const o = planUnconfirmed(job, status, facts);
    if (o.actions.length || o.status.phase !== "Processing") return o;
    return {
      ...o,
      status: withCondition(
        o.status,
        gen,
        {
          type: "Suspended",
          status: "Unknown",
          reason: "SuspendPending",
          message:
            `spec.${job.spec.cancel ? "cancel" : "suspend"} is true, but the submission is unconfirmed (its provider id is unknown): it ` +
            "is cancelled once its id arrives with its callback, and never submitted again meanwhile",
        },
        now,
      ),
    };
  }
  // Resumed before a suspension could cancel anything (its submission was unconfirmed).
  if (getCondition(status.conditions, "Suspended")?.status === "Unknown")
    status = withCondition(
      status,
      gen,
      { type: "Suspended", status: "False", reason: "Resumed", message: "spec.suspend is false again" },
      now,
    );
  if (isUnconfirmed(status)) return planUnconfirmed(job, status, facts);
  const remaining = msUntilStuck(job, nowMs, facts.settings.defaultTimeoutSeconds);
  const untilStart = msUntilStartDeadline(status, nowMs);
  const capHolds = facts.usageCapReached === true && !startedAtProvider(status);
  const read = facts.provider;
  const readStatus = read && "result" in read ? read.result.status : undefined;
  // A self-hosted endpoint sends no callback: the end its status read reports is the job's.
  const selfHostedEnd = facts.selfHosted === true && TERMINAL_STATUSES.has(readStatus as ProviderJobStatus);
  if (remaining > 0 && untilStart > 0 && !capHolds && !selfHostedEnd) {
    // Only waiting, perhaps in the provider's queue: why, on the job (a result read here is left to
    // its callback, or to the check at its timeout).
    status = withProviderWait(status, gen, facts.providerWait, readStatus, now);
    return { status, events: [], actions: [], requeueAfterMs: Math.min(remaining, untilStart) };
  }
  const events: PlannedEvent[] = [];
  if (!status.endpointId) {
    events.push(["Warning", "ResetToPending", "Processing without an endpoint id; resubmitting"]);
    return { status: resetToPending(status, now)!, events, actions: [] };
  }
  const providerId = providerIdOf(job, status);
  if (!read) return { status, events, actions: [], error: retry("the provider's status was not read") };
  if ("lost" in read) {
    // Past its ttl the provider forgets a job by design (queue plus run): Expired, not replayed.
    if (pastProviderTtl(status, nowMs)) {
      const expired = expiredStatus(status, now, providerId);
      events.push(["Warning", EXPIRED, expired.error!]);
      return { status: expired, events, actions: [] };
    }
    const next = afterProviderLostJob(status, now);
    events.push([
      "Warning",
      "ProviderLostJob",
      next.phase === "Failed"
        ? `the provider no longer knows job ${providerId}, for the ${next.providerLosses}th time; not replaying it again`
        : `the provider no longer knows job ${providerId}; reset to Pending and replayed`,
    ]);
    return {
      status: next,
      events,
      actions: [],
      ...(next.phase !== "Failed" && { recovery: "provider_lost_job" }),
    };
  }
  if ("error" in read) {
    const message = `could not read the job's status at the provider: ${read.error}`;
    events.push(["Warning", "StatusCheckFailed", message]);
    return { status, events, actions: [], error: retry(message) };
  }
  const result = read.result;
  if ((untilStart <= 0 || capHolds) && !TERMINAL_STATUSES.has(result.status as ProviderJobStatus)) {
    // Still in the provider's queue past its start deadline: cancelled there (it costs nothing).
    if (result.status === "IN_QUEUE" && untilStart <= 0)
      return planStop(job, notStartedBecause(job, status, facts.providerWait, now), "start-deadline", now);
    // Still queued while its account is at its plan's cap: marked held, then (still queued at the
    // next read) cancelled there (usage-cap.ts).
    if (result.status === "IN_QUEUE" && capHolds) {
      if (heldForUsage(status)) return planStop(job, status, "usage-limit", now);
      return { status: markHeldForUsage(job, status, now), events, actions: [], requeueAfterMs: 50 };
    }
    // A worker started it in time: not checked again, and looked at again at its timeout.
    status = startedStatus(status, gen, result.status, now);
    if (remaining > 0) return { status, events, actions: [], requeueAfterMs: remaining };
  }
  if (!TERMINAL_STATUSES.has(result.status as ProviderJobStatus)) {
    status = withProviderWait(status, gen, facts.providerWait, result.status, now);
    // Told once, as a condition and one Event, not on every tick it stays that way.
    if (getCondition(status.conditions, "Overdue")?.status !== "True") {
      status = withCondition(
        status,
        gen,
        {
          type: "Overdue",
          status: "True",
          reason: "StillRunning",
          message: `past its timeout, but the provider reports ${result.status}; checking again every tick`,
        },
        now,
      );
      events.push([
        "Normal",
        "StillRunning",
        `past its timeout, but the provider reports ${result.status}; checking again later`,
      ]);
    }
    return { status, events, actions: [], requeueAfterMs: facts.settings.tickMs };
  }
  const applied = applyProviderResult({ ...job, status }, result, now);
  if (!applied) return { status, events, actions: [], requeueAfterMs: facts.settings.tickMs };
  if (result.status === "COMPLETED" && facts.selfHosted) {
    events.push(["Normal", "CompletedAtEndpoint", "the self-hosted endpoint reports COMPLETED"]);
    return { status: applied, events, actions: [] };
  }
  if (result.status === "COMPLETED") {
    events.push([
      "Normal",
      "RecoveredMissedCallback",
      "the provider completed the job but its callback never arrived; completed from the status API",
    ]);
    return { status: applied, events, actions: [], recovery: "missed_callback" };
  }
  const kind =
    result.status === "TIMED_OUT" ? "TimedOut" : result.status === "CANCELLED" ? "Cancelled" : "Failed";
  events.push([
    "Warning",
    `Provider${kind}`,
    `the provider reports ${result.status}${applied.phase === "Pending" ? "; retrying" : ""}`,
  ]);
  return { status: applied, events, actions: [] };
}

/**
 * A submission whose provider id is unknown: its /run answer was lost, the process died between
 * /run and the record, or the record write failed. It may be running, so it is never submitted
 * again while its callback can still arrive (the sidecar adopts it by its attempt-bound token);
 * past that, UNCONFIRMED_SUBMISSION_POLICY decides (decideUnconfirmed).
 */
function planUnconfirmed(job: MediaJob, status: MediaJobStatus, facts: Facts): Plan {
  const attempt = status.submission!.attempt;
  const known = facts.unrecorded;
  if (known?.attempt === attempt)
    return {
      status,
      events: [],
      actions: [{ type: "recordProviderId", attempt, providerJobId: known.providerJobId }],
      requeueAfterMs: 1_000,
    };
  const nowMs = facts.now.getTime();
  const decision = decideUnconfirmed(
    { ...job, status },
    {
      nowMs,
      defaultTimeoutSeconds: facts.settings.defaultTimeoutSeconds,
      windowMs: facts.settings.confirmationWindowMs,
      // Workers that deduplicate on the submission identity (submission-identity.ts) make a
      // second submission of the same attempt harmless: it is resubmitted, not failed.
      policy: facts.idempotentWorkers ? "resubmit" : (facts.settings.unconfirmedPolicy ?? "fail"),
    },
  );
  if (decision.action === "wait") {
    const remaining = decision.remainingMs;
    // Seen in Sending by a pass that did not send it: the sending pass ended without an answer.
    const marked = unconfirmedStatus(
      job,
      attempt,
      `the submission's answer was never recorded; the job may be running: waiting for its callback until ${new Date(nowMs + remaining).toISOString()}`,
      facts.now.toISOString(),
    );
    return { status: marked ?? status, events: [], actions: [], requeueAfterMs: remaining };
  }
  return {
    status: decision.status,
    events: [["Warning", decision.reason, decision.message]],
    actions: [],
    submission: decision.outcome,
    ...(decision.action === "resubmit" && { recovery: "unconfirmed_resubmission" as const }),
  };
}

/**
 * A COMPLETED attempt's outputs checked against the store (media.ts): Completed, or the attempt
 * failed with its reason. Without the store's answer (unreachable, refusing, not configured any
 * more) nothing is written: the pass fails and is retried with backoff.
 */
function planOutputCheck(job: MediaJob, status: MediaJobStatus, facts: Facts): Plan {
  const bucket = facts.settings.storageBucket;
  const read = facts.outputs;
  if (bucket === undefined || read === undefined)
    return {
      status,
      events: [],
      actions: [],
      error: retry("the outputs cannot be checked: no object store"),
    };
  if ("error" in read) {
    const message = `could not check the job's outputs in the object store: ${read.error}`;
    return {
      status,
      events: [["Warning", "OutputCheckFailed", message]],
      actions: [],
      error: retry(message),
    };
  }
  const now = facts.now.toISOString();
  if ("notKept" in read) {
    const decision = decideNotKept(read.notKept);
    if ("retry" in decision)
      return {
        status,
        events: [["Warning", "OutputNotKeptYet", decision.retry]],
        actions: [],
        error: retry(decision.retry),
      };
    const verdict = { ok: false as const, ...decision.fail };
    return { ...afterOutputVerdict(job, status, verdict, bucket, now), actions: [] };
  }
  return { ...afterOutputCheck(job, status, read.stored, bucket, now), actions: [] };
}
