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
import type { GpuEndpoint } from "../crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import type { ConditionInput } from "../crds/conditions.js";
import { withPhaseConditions, withCondition, type PlannedEvent } from "./conditions.js";
import { msUntilDeadline } from "./deadline.js";
import { FINALIZER, initialStatus, isTerminal, type ProviderResult } from "./job.js";
import { planCompleted } from "./next-step.js";
import { planPending } from "./pending.js";
import { ownPipelineCondition, pipelineFirstOf, stepPipelineCondition } from "./pipeline.js";
import { planProcessing } from "./processing.js";
import type { SlotFact } from "./queued.js";
import { endEvent } from "./stop.js";
import { msUntilExpiry } from "./ttl.js";
import type { Plans } from "./plans.js";
import type { UnconfirmedSubmissionPolicy } from "./unconfirmed.js";
import {
  DEFAULT_USAGE_SETTINGS,
  USAGE_FINALIZER,
  usageHoldsJob,
  withBilledUsage,
  type UsageSettings,
} from "./usage.js";
import type { WaitCause } from "./wait-cause.js";
import type { SubmissionPlan } from "./write-ahead.js";

/** The controller's settings a plan reads. */
export interface PlanSettings {
  defaultTimeoutSeconds: number;
  /** How long past its timeout an unconfirmed submission waits for its callback. */
  confirmationWindowMs?: number;
  /** What becomes of a submission still unconfirmed at its deadline. Default "fail" (at most once). */
  unconfirmedPolicy?: UnconfirmedSubmissionPolicy;
  /** How long a cancelled job may run on at the provider before a Warning (CANCEL_FOLLOW_WARNING_SECONDS). */
  cancelFollowWarningMs?: number;
  /** How long a deletion keeps trying to cancel at a failing provider. Default CANCEL_GIVE_UP_MS. */
  cancelGiveUpMs?: number;
  /** How long a deletion waits for the job's usage report (DELETE_USAGE_TIMEOUT_SECONDS). Default USAGE_WAIT_MS. */
  usageWaitMs?: number;
  /** The reconciliation tick: how often waiting jobs are looked at again. */
  tickMs: number;
  /** The start deadline of jobs without spec.startDeadlineSeconds (JOB_START_DEADLINE_SECONDS); absent or 0: none. */
  defaultStartDeadlineSeconds?: number;
  /** Plans by price id (plans.ts); absent or empty: no plan limits. */
  plans?: Plans;
  /** How recorded usage is billed and metered. Default: DEFAULT_USAGE_SETTINGS (metering off). */
  usage?: UsageSettings;
  /**
   * Every job must bill an account (plans or metering are configured): a job whose namespace is
   * bound to none waits, AccountNotBound (tenancy.ts). Default false: a single-customer install.
   */
  accountRequired?: boolean;
}

/** What the provider said when asked for a job's status. */
export type ProviderRead = { result: ProviderResult } | { lost: true } | { error: string };

/** The facts one pass is planned from, gathered by the reconciler. */
export interface Facts {
  now: Date;
  settings: PlanSettings;
  /** The accounts the job's namespace is bound to (tenancy.ts), for a Pending job. */
  boundAccounts?: readonly string[];
  /** The subscription state of the job's BillingAccount (a Pending job's admission). */
  subscriptionState?: string;
  /** What the plans read of the job's account, for a Pending job, when plans are configured. */
  account?: AccountFacts;
  /** The job's endpoint (pickEndpoint), for a Pending job. */
  endpoint?: GpuEndpoint;
  /**
   * A submitted job's account has used its plan's GPU seconds this period: a job of it still
   * queued at the provider is cancelled there and held (usage-cap.ts).
   */
  usageCapReached?: boolean;
  /** Why jobs wait in the queue of a submitted job's endpoint, from its last /health (wait-cause.ts). */
  providerWait?: WaitCause;
  /** The provider's status of the job, read only when providerReadDue said it was due. */
  provider?: ProviderRead;
  /**
   * The dispatcher's answer: may this job take a slot of its endpoint's in-flight window now?
   * Asked only of a job that could be submitted now; absent: no window (submitted at once).
   */
  slot?: SlotFact;
  /**
   * The job's endpoint has spec.idempotentWorkers: an unconfirmed submission is submitted again
   * at its confirmation deadline (counted), whatever unconfirmedPolicy says.
   */
  idempotentWorkers?: boolean;
  /** A fresh random id for a submission this pass may write. */
  newSubmissionId: string;
  /** An accepted provider id whose record write failed in an earlier pass: recorded now. */
  unrecorded?: { attempt: number; providerJobId: string };
}

/** A Pending job's account as its plan sees it. */
export interface AccountFacts {
  /** BillingAccount.status.priceIds. */
  priceIds: readonly string[];
  /** GPU seconds used in the current billing period (usedSecondsNow). */
  usedSeconds: number;
  /** The account's jobs submitted and not ended, this one excluded (from the cache). */
  runningJobs: number;
}

/** Why a running job is cancelled at the provider. */
export type StopReason = "cancel" | "suspend" | "deadline" | "start-deadline" | "usage-limit";

/** A side effect, carried out by the reconciler in the order planned. */
export type Action =
  /** The finalizer (and a pipeline's first job's labels), before the provider hears of the job. */
  | {
      type: "addFinalizer";
      metadata?: { labels: Record<string, string>; annotations: Record<string, string> };
    }
  /** A waiting pipeline's first job gets the pipeline's label, so `-l` selects the whole pipeline. */
  | {
      type: "labelPipeline";
      metadata: { labels: Record<string, string>; annotations: Record<string, string> };
    }
  /** The write-ahead submission (write-ahead.ts): the only sequence that writes status more than once. */
  | { type: "submit"; submission: SubmissionPlan }
  /** An accepted provider id whose record failed earlier: written now (never submitted again). */
  | { type: "recordProviderId"; attempt: number; providerJobId: string }
  /** Cancel at the provider; its answer is read by afterStop. */
  | { type: "cancel"; why: StopReason; endpointId: string; providerJobId: string }
  /** Create the next pipeline step; its answer is read by afterNextStep. */
  | { type: "createNextStep"; name: string; object: Record<string, unknown> };

/** What the metrics count of a pass. */
export type RecoveryKind = "missed_callback" | "provider_lost_job" | "unconfirmed_resubmission";
export type SubmissionOutcome =
  | "accepted"
  | "refused"
  | "unconfirmed"
  | "unconfirmed-resubmission"
  | "unconfirmed-failed"
  | "fenced"
  | "intent-conflict"
  | "held-elsewhere";

/**
 * A pass's error, as controller-runtime's: retried with backoff, or terminal (not retried; a
 * condition says why, and the job is looked at again at the next tick or change).
 */
export interface PassError {
  terminal: boolean;
  message: string;
}

/** One pass, planned. */
export interface Plan {
  /** The status to write once the actions are done (unless an action wrote its own). */
  status: MediaJobStatus;
  events: PlannedEvent[];
  actions: Action[];
  requeueAfterMs?: number;
  error?: PassError;
  submission?: SubmissionOutcome;
  recovery?: RecoveryKind;
}

export const retry = (message: string): PassError => ({ terminal: false, message });
export const terminal = (message: string): PassError => ({ terminal: true, message });

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
  o: { nowMs: number; requeueAfterMs?: number; nextStepCached: boolean; failed: boolean; metering?: boolean },
): Finish {
  const status = job.status ?? {};
  const actions: FinishAction[] = [];
  // A job whose usage is not reported yet is kept by USAGE_FINALIZER: a deletion waits for it.
  const keepForUsage = usageHoldsJob(job, o.metering ?? false);
  if (isTerminal(status.phase) && job.metadata.finalizers?.includes(FINALIZER)) {
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
