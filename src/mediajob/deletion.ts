// A MediaJob being deleted: its job cancelled at the provider, its usage reported, then the
// finalizers let go of.
import type { ConditionInput } from "../crds/conditions.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import type { PlannedEvent } from "./conditions.js";
import { FINALIZER, SKIP_CANCEL_ANNOTATION } from "./job.js";
import type { OrphanedRun } from "../crds/billingaccount.js";
import { orphanOf } from "./orphan.js";
import { deletedStepPipelineCondition, pipelineFirstOf } from "./pipeline.js";
import { DEFAULT_USAGE_SETTINGS, withBilledUsage, type UsageSettings } from "./usage.js";
import { unsettledUsage, USAGE_FINALIZER, usageHoldsJob } from "./usage-hold.js";

/** How long a deletion waits for an unconfirmed submission's provider id, to cancel it. */
const CANCEL_WAIT_FOR_ID_MS = 60_000;
/** How long a deletion keeps trying to cancel at a provider that fails, before letting go. */
export const CANCEL_GIVE_UP_MS = 5 * 60_000;
/**
 * How long a deletion waits for the job's usage to be reported and counted before it lets go and
 * the seconds are lost (DELETE_USAGE_TIMEOUT_SECONDS). An hour: the usage backlog's alert fires
 * past an hour, so the operator has been told before any seconds are dropped.
 */
export const USAGE_WAIT_MS = 60 * 60_000;
/** Set to "true" on a job being deleted: it goes without waiting for its usage report. */
export const SKIP_USAGE_REPORT_ANNOTATION = "media-orchestrator.io/skip-usage-report";
/**
 * The waiting Event is told by the passes of the first seconds of the wait (the Event series folds
 * their repeats into one), not by every pass of an hour's wait.
 */
const USAGE_WAIT_TOLD_MS = 10_000;

type DeletionStep =
  /** `droppedSeconds`: the Event of a deletion that goes with usage unreported, and how much. */
  | { type: "event"; event: PlannedEvent; droppedSeconds?: number }
  /** Cancel at the provider; on failure, giveUp says whether the deletion goes on without it. */
  | { type: "cancel"; endpointId: string; providerJobId: string; giveUp: boolean }
  /** A later step's deletion told to its pipeline's first job (PipelineSucceeded), before it goes. */
  | { type: "reportToPipeline"; first: string; uid?: string; condition: ConditionInput }
  /** A finished job's recorded usage billed (the pass that would have billed it will not come). */
  | { type: "billUsage"; status: MediaJobStatus }
  /**
   * Let go without a cancel while the run may go on (skip-provider-cancel): the run is followed
   * and billed from its account's record (orphan.ts); `orphan` undefined: no account to bill it to.
   */
  | { type: "leaveRunning"; orphan?: OrphanedRun }
  | { type: "removeFinalizer" };

export interface DeletionPlan {
  steps: DeletionStep[];
  requeueAfterMs?: number;
}

/** What a deletion reads of the controller's settings. */
export interface DeletionSettings {
  /** How long a deletion keeps trying to cancel at a failing provider. Default CANCEL_GIVE_UP_MS. */
  cancelGiveUpMs?: number;
  /** How recorded usage is billed and whether it is metered. Default: metering off. */
  usage?: UsageSettings;
  /** How long a deletion waits for the job's usage report. Default USAGE_WAIT_MS; 0: no wait. */
  usageWaitMs?: number;
}

/**
 * The deletion of a job with a finalizer of ours: cancel what may run at the provider, wait for its
 * usage to be reported (bounded), then let go.
 */
export function planDeletion(job: MediaJob, nowMs: number, settings: DeletionSettings = {}): DeletionPlan {
  const finalizers = job.metadata.finalizers ?? [];
  if (!finalizers.includes(FINALIZER) && !finalizers.includes(USAGE_FINALIZER)) return { steps: [] };
  const cancelGiveUpMs = settings.cancelGiveUpMs ?? CANCEL_GIVE_UP_MS;
  const status = job.status;
  const skip = job.metadata.annotations?.[SKIP_CANCEL_ANNOTATION] === "true";
  const steps: DeletionStep[] = [];
  if (status?.phase === "Processing" && status.providerJobId && skip) {
    const orphan = orphanOf(job, new Date(nowMs).toISOString());
    steps.push({ type: "leaveRunning", ...(orphan && { orphan }) });
  }
  if (status?.phase === "Processing" && status.endpointId && !skip) {
    const deletingForMs = nowMs - new Date(job.metadata.deletionTimestamp ?? 0).getTime();
    const id = status.providerJobId;
    if (!id) {
      // An unconfirmed submission: its provider id may still arrive with its callback.
      if (status.submission && deletingForMs < CANCEL_WAIT_FOR_ID_MS)
        return { steps: [], requeueAfterMs: Math.max(1_000, CANCEL_WAIT_FOR_ID_MS - deletingForMs) };
      steps.push({
        type: "event",
        event: [
          "Warning",
          "CancelSkipped",
          "the provider's id of this job never became known, so it could not be cancelled there",
        ],
      });
    } else {
      // A dead provider must not keep the object forever: give up after a bounded time.
      steps.push({
        type: "cancel",
        endpointId: status.endpointId,
        providerJobId: id,
        giveUp: deletingForMs >= cancelGiveUpMs,
      });
    }
  }
  if (steps.some((s) => s.type === "cancel")) {
    // The cancel ends the job and records its usage: the wait for its report is the next pass's.
  } else if (status) {
    // Finished, or an earlier attempt's usage (a job reset, or deleted without a cancel).
    const usage = settings.usage ?? DEFAULT_USAGE_SETTINGS;
    const billed = withBilledUsage(job, status, usage);
    const current = billed !== status ? { ...job, status: billed } : job;
    if (billed !== status) steps.push({ type: "billUsage", status: billed });
    const wait = deletionUsageWait(current, nowMs, settings);
    if (wait.event)
      steps.push({
        type: "event",
        event: wait.event,
        ...(!wait.wait && wait.droppedSeconds !== undefined && { droppedSeconds: wait.droppedSeconds }),
      });
    if (wait.wait) return { steps, requeueAfterMs: wait.requeueAfterMs };
  }
  const pipeline = pipelineFirstOf(job);
  const condition = deletedStepPipelineCondition(job);
  if (pipeline && condition) steps.push({ type: "reportToPipeline", ...pipeline, condition });
  steps.push({ type: "removeFinalizer" });
  return { steps };
}

export type UsageWait =
  | { wait: true; requeueAfterMs: number; event?: PlannedEvent }
  /** `droppedSeconds`: the GPU seconds not reported that the deletion lets go of (with its Event). */
  | { wait: false; event?: PlannedEvent; droppedSeconds?: number };

/**
 * Whether a job being deleted waits for its usage: with metering on, while an attempt is not yet
 * billed, reported (or refused) and counted into its account, for at most `usageWaitMs` from the
 * deletion, unless SKIP_USAGE_REPORT_ANNOTATION says not to. Letting go with usage outstanding
 * tells a Warning `UsageUnreportedOnDeletion` naming the seconds and identifiers lost.
 */
export function deletionUsageWait(job: MediaJob, nowMs: number, settings: DeletionSettings = {}): UsageWait {
  if (!usageHoldsJob(job, settings.usage?.metering ?? false)) return { wait: false };
  const lost = unsettledUsage(job);
  const deletedAt = new Date(job.metadata.deletionTimestamp ?? NaN).getTime();
  const deletingForMs = Number.isNaN(deletedAt) ? 0 : nowMs - deletedAt;
  const waitMs = settings.usageWaitMs ?? USAGE_WAIT_MS;
  const skip = job.metadata.annotations?.[SKIP_USAGE_REPORT_ANNOTATION] === "true";
  const lostEvent = (why: string): PlannedEvent => [
    "Warning",
    "UsageUnreportedOnDeletion",
    `deleted ${why} with ${lost.unreportedSeconds} GPU seconds not reported to the payment provider` +
      (lost.identifiers.length > 0 ? ` (meter identifiers ${lost.identifiers.join(", ")})` : "") +
      (lost.uncountedSeconds > 0
        ? ` and ${lost.uncountedSeconds} not counted into account ${job.status?.usage?.account ?? ""}`
        : ""),
  ];
  const droppedSeconds = lost.unreportedSeconds;
  if (skip)
    return { wait: false, event: lostEvent(`as ${SKIP_USAGE_REPORT_ANNOTATION} asks`), droppedSeconds };
  if (deletingForMs >= waitMs)
    return {
      wait: false,
      event: lostEvent(`after waiting ${Math.round(waitMs / 1000)} s for its usage report`),
      droppedSeconds,
    };
  // Told in the first seconds of the wait: from the deletion, or from the cancel that ended the job.
  const endedAt = Date.parse(job.status?.completedAt ?? "");
  const waitingForMs = Math.min(deletingForMs, Number.isNaN(endedAt) ? Infinity : nowMs - endedAt);
  return {
    wait: true,
    requeueAfterMs: Math.max(1_000, waitMs - deletingForMs),
    ...(waitingForMs < USAGE_WAIT_TOLD_MS && {
      event: [
        "Normal",
        "DeletionWaitsForUsage",
        `the deletion waits up to ${Math.round(waitMs / 1000)} s for the job's usage (${lost.unreportedSeconds} GPU ` +
          `seconds unreported, ${lost.uncountedSeconds} uncounted) to be reported to the payment provider and ` +
          `counted; annotate ${SKIP_USAGE_REPORT_ANNOTATION}=true to delete it without`,
      ] satisfies PlannedEvent,
    }),
  };
}

/** The Warning of a job let go while its run may go on at the provider. */
export function leftRunningEvent(job: MediaJob, orphan: OrphanedRun | undefined, why: string): PlannedEvent {
  const id = job.status?.providerJobId ?? "(unknown)";
  return [
    "Warning",
    "RunLeftAtProvider",
    orphan
      ? `deleted ${why} while provider job ${id} may still run: it is followed at the provider and billed to ` +
        `account ${orphan.account} when it ends (the BillingAccount's status.orphans)`
      : `deleted ${why} while provider job ${id} may still run, and the job bills no account: the run is not billed`,
  ];
}

/** The Events of a deletion's cancel: done, or failed (and whether the deletion goes on). */
export function cancelledEvent(providerJobId: string, providerStatus: string): PlannedEvent {
  return [
    "Normal",
    "CancelledAtProvider",
    `cancelled job ${providerJobId} at the provider (${providerStatus})`,
  ];
}
export function cancelFailedEvent(providerJobId: string, error: string, giveUp: boolean): PlannedEvent {
  return [
    "Warning",
    giveUp ? "CancelAbandoned" : "CancelFailed",
    `could not cancel job ${providerJobId}: ${error}${giveUp ? "; deleting without cancelling" : ""}`,
  ];
}
