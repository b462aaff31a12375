// What one MediaJob pass is planned from and what it plans: the facts the reconciler gathers, the
// actions it carries out, the plan and its error. Shared by the entry point (plan.ts) and the
// sub-planners (pending.ts, processing.ts, stop.ts, next-step.ts, admission.ts), which import it
// rather than plan.ts, so no import runs in a circle.
import type { GpuEndpoint } from "../crds/gpuendpoint.js";
import type { StoredOutput } from "../storage/output-check.js";
import type { MediaJobStatus } from "../crds/mediajob.js";
import type { PlannedEvent } from "./conditions.js";
import type { NotKept } from "./kept-outputs.js";
import type { ProviderResult } from "./job.js";
import type { SlotFact } from "./queued.js";
import type { Plans } from "./plans.js";
import type { UnconfirmedSubmissionPolicy } from "./unconfirmed.js";
import type { UsageSettings } from "./usage.js";
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
  /** How long the run's finalizer waits for a finished job's usage report (USAGE_SETTLE_WAIT_SECONDS). */
  usageSettleWaitMs?: number;
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
  /** The object store's bucket (STORAGE_BUCKET); absent: storage is off, a job with media fails. */
  storageBucket?: string;
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
  /** The job's endpoint is self-hosted (GpuEndpoint spec.baseUrl): no callback comes, its status read is its result. */
  selfHosted?: boolean;
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
  /**
   * A COMPLETED attempt's declared outputs as the store holds them (media.ts), gathered only when
   * their check is due: the facts, or why the store could not be read (the check is retried), or
   * why an output the worker left behind a URL of its own was not kept (kept-outputs.ts).
   */
  outputs?: { stored: StoredOutput[] } | { error: string } | { notKept: NotKept };
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
  | "held-elsewhere"
  /** Not sent: the attempt's presigned URLs could not be signed (the store not open, its credentials unreadable). */
  | "storage-unavailable"
  /** Not sent: the stage cache had the job's outputs (stage-cache.ts); completed from them. */
  | "cache-hit";

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
