// The MediaJob state machine's entry point: given a job and the facts gathered for it, what one
// reconcile pass does. Pure: no I/O, no clock, no randomness of its own (the facts carry them),
// so every branch is a table test (test/unit/mediajob-plan.test.ts).
//
// A pass is planned in two parts. `planJob` decides the status and the side effects that come
// before the status write: add the finalizer, submit (the write-ahead sequence), cancel at the
// provider, create the next pipeline step. An action whose answer matters (a cancel, a create) is
// followed by the domain's reading of that answer (stop.ts, next-step.ts). `planFinish` then
// decides what follows the write: tell the pipeline, let go of the finalizer, tell how the job
// ended, when to look again, delete after the TTL.
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import type { ConditionInput } from "../crds/conditions.js";
import { withPhaseConditions, withCondition, type PlannedEvent } from "./conditions.js";
import { msUntilDeadline } from "./deadline.js";
import { FINALIZER, initialStatus, isTerminal } from "./job.js";
import type { Facts, Plan } from "./pass.js";
import { planCompleted } from "./next-step.js";
import { planPending } from "./pending.js";
import { ownPipelineCondition, pipelineFirstOf, stepPipelineCondition } from "./pipeline.js";
import { planProcessing } from "./processing.js";
import { endEvent } from "./stop.js";
import { msUntilExpiry } from "./ttl.js";
import { DEFAULT_USAGE_SETTINGS, withBilledUsage, type UsageSettings } from "./usage.js";
import { msUntilUsageSettleWaitEnds, USAGE_FINALIZER, usageHoldsJob } from "./usage-hold.js";

/**
 * The status a pass writes: usage recorded by any writer of a result billed under the rule, in the
 * pass's one status write; Succeeded and Submitted follow the phase, PipelineSucceeded the job.
 */
export function writtenStatus(
  job: MediaJob,
  status: MediaJobStatus,
  usage: UsageSettings | undefined,
  now: string,
): MediaJobStatus {
  return finalStatus(job, withBilledUsage(job, status, usage ?? DEFAULT_USAGE_SETTINGS), now);
}

function finalStatus(job: MediaJob, status: MediaJobStatus, now: string): MediaJobStatus {
  const s = withPhaseConditions(status, job.metadata.generation, now);
  // Only pipelines (a first job with later steps), so that a job on its own costs no write more.
  // From the first pass on, so `kubectl wait --for=condition=PipelineSucceeded` has a condition
  // to read while the pipeline waits or runs (Unknown, with a message that does not change until
  // the first job ends: it rides along the pass's own write).
  if (!job.spec.then?.length) return s;
  const c = ownPipelineCondition(job, s);
  return c ? withCondition(s, job.metadata.generation, c, now) : s;
}

/** The pass for a job that is not being deleted. */
export function planJob(job: MediaJob, facts: Facts): Plan {
  const now = facts.now.toISOString();
  const status = initialStatus(job, now);
  const plan = ((): Plan => {
    switch (status.phase) {
      case "Pending":
        return planPending(job, status, facts);
      case "Processing":
        return planProcessing(job, status, facts);
      case "Completed":
        return planCompleted(job, status);
      default:
        return { status, events: [], actions: [] };
    }
  })();
  return { ...plan, status: writtenStatus(job, plan.status, facts.settings.usage, now) };
}

/** What follows the status write. */
export type FinishAction =
  /** A later step that ended tells the pipeline's first job (its PipelineSucceeded). */
  | { type: "reportToPipeline"; first: string; uid?: string; condition: ConditionInput }
  /**
   * Let go of the job; the Event that says how it ended is told only by the pass that did.
   * `keepForUsage`: USAGE_FINALIZER takes its place, in the same write (usage still outstanding).
   */
  | { type: "releaseFinalizer"; endEvent: PlannedEvent; keepForUsage?: boolean }
  /** Let go of a finished job whose usage is now reported and counted (USAGE_FINALIZER). */
  | { type: "releaseUsageFinalizer" }
  /** Delete this very object (its uid) past its TTL; kept if its next step is found to exist. */
  | { type: "deleteExpired"; unlessStepExists?: string };

export interface Finish {
  actions: FinishAction[];
  requeueAfterMs?: number;
}

/**
 * What follows the status write of a pass that ended with `job` (as written) and wanted a look
 * again after `requeueAfterMs`. The end of a job, whoever wrote it (this controller, or the sidecar
 * from a callback), is told once: in the pass that lets go of the job (its finalizer), which no
 * later pass repeats. `nextStepCached`: the job's next step is in the cache.
 */
export function planFinish(
  job: MediaJob,
  o: {
    nowMs: number;
    requeueAfterMs?: number;
    nextStepCached: boolean;
    failed: boolean;
    metering?: boolean;
    /** How long the run's finalizer waits for the usage report. Default USAGE_SETTLE_WAIT_MS. */
    usageSettleWaitMs?: number;
  },
): Finish {
  const status = job.status ?? {};
  const actions: FinishAction[] = [];
  // A job whose usage is not reported yet is kept by USAGE_FINALIZER: a deletion waits for it.
  const keepForUsage = usageHoldsJob(job, o.metering ?? false);
  // Just ended with usage the reporter is about to settle: the run's finalizer waits for it a
  // little and then goes alone (USAGE_SETTLE_WAIT_MS), no USAGE_FINALIZER put in and taken out.
  const settleWaitMs =
    isTerminal(status.phase) && job.metadata.finalizers?.includes(FINALIZER)
      ? msUntilUsageSettleWaitEnds(job, o.metering ?? false, o.nowMs, o.usageSettleWaitMs)
      : 0;
  if (settleWaitMs > 0) {
    // Looked at again when the wait ends; the reporter's write that settles the usage comes first.
  } else if (isTerminal(status.phase) && job.metadata.finalizers?.includes(FINALIZER)) {
    const c = stepPipelineConditionOf(job);
    if (c) actions.push(c);
    actions.push({
      type: "releaseFinalizer",
      endEvent: endEvent(status),
      ...(keepForUsage && { keepForUsage }),
    });
  } else if (!keepForUsage && job.metadata.finalizers?.includes(USAGE_FINALIZER))
    actions.push({ type: "releaseUsageFinalizer" });
  // A pass that failed is retried with backoff: it neither looks again nor deletes.
  if (o.failed) return { actions };
  // A running job is looked at again by its deadline at the latest.
  const untilDeadline = msUntilDeadline(job.spec, status, o.nowMs);
  let requeueAfterMs =
    status.phase === "Processing" && Number.isFinite(untilDeadline)
      ? Math.max(50, Math.min(o.requeueAfterMs ?? Infinity, untilDeadline + 50))
      : o.requeueAfterMs;
  if (settleWaitMs > 0) requeueAfterMs = Math.min(requeueAfterMs ?? Infinity, settleWaitMs + 50);
  // A finished job with spec.ttlSecondsAfterFinished: deleted once it has expired.
  const untilExpiry = isTerminal(status.phase) ? msUntilExpiry(job, o.nowMs, o.nextStepCached) : undefined;
  if (untilExpiry !== undefined) {
    if (untilExpiry <= 0) {
      // A step just created may not be cached yet: its absence is confirmed by a read first.
      actions.push({
        type: "deleteExpired",
        ...(status.nextJob !== undefined && { unlessStepExists: status.nextJob }),
      });
      return { actions, requeueAfterMs };
    }
    requeueAfterMs = Math.min(requeueAfterMs ?? Infinity, untilExpiry + 50);
  }
  return { actions, requeueAfterMs };
}

function stepPipelineConditionOf(job: MediaJob): FinishAction | undefined {
  const c = stepPipelineCondition(job, job.status ?? {});
  const pipeline = pipelineFirstOf(job);
  return c && pipeline ? { type: "reportToPipeline", ...pipeline, condition: c } : undefined;
}
