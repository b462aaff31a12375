// Every reason a MediaJob can show, what it means and what to do about it: the admission chain's
// holds (admission-chain.ts), the window's (queued.ts, decided by the dispatcher), the provider's
// (wait-cause.ts) and the ends a job can come to. The CLI's `queue`, `status` and `doctor` read the
// fixes from here instead of matching words of a message, and docs/reasons.md is generated from
// this table (scripts/reason-table.ts; test/docs/reasons.test.ts fails when they differ). One piece
// because it is one table: a reason's meaning and fix live beside every other reason's.
import type { MediaJob } from "../crds/mediajob.js";
import { DEADLINE_EXCEEDED, EXPIRED, START_DEADLINE_EXCEEDED } from "./deadline.js";
import { jobAccount } from "./tenancy.js";

/** Where a reason shows: the condition (type=status) that carries it, or the end of the job. */
type ShownAs =
  | "Admitted=False"
  | "EndpointReady=False"
  | "Suspended=True"
  | "Queued=True"
  | "Completed"
  | "Failed"
  | "Cancelled";

/** The job a fix is written for (its names fill the fix's command lines). */
export interface FixSubject {
  namespace: string;
  name: string;
  workload: string;
  /** The account it bills (spec.account or the one its binding supplied). */
  account: string;
  /** spec.account, when the job names one. */
  specAccount?: string | undefined;
}

export interface ReasonEntry {
  shownAs: ShownAs;
  /** Which step gives it (the admission chain's check, the window, the provider, the end). */
  by: "admission chain" | "in-flight window" | "provider" | "end";
  meaning: string;
  fix: (s: FixSubject) => string;
  /** The product working as configured, not something to fix (doctor's ok, status's exit code 0). */
  byDesign?: true;
}

/** The window's reasons: the dispatcher's answer to a job that may go but gets no slot (queued.ts). */
export const WINDOW_REASONS = {
  windowFull: "WindowFull",
  throttled: "Throttled",
  noCapacity: "NoCapacity",
  scalerUnknown: "ScalerUnknown",
  lowPriority: "LowPriority",
} as const;
export type WindowReason = (typeof WINDOW_REASONS)[keyof typeof WINDOW_REASONS];

const waitForSlot = () =>
  "nothing to fix: the job is submitted when a slot of its endpoint's in-flight window frees, by fair share " +
  "between accounts (kubectl media queue shows the window and who waits)";
const maxWorkers = () => "raise spec.maxWorkers of the job's GpuEndpoint";

/** The table, in the order a job meets the reasons. */
export const REASONS: Readonly<Record<string, ReasonEntry>> = {
  Cancelled: {
    shownAs: "Cancelled",
    by: "end",
    meaning: "spec.cancel is true: the job ended (cancelled at the provider when it had been submitted)",
    fix: () => "nothing to fix: create the job again to run it",
  },
  Suspended: {
    shownAs: "Suspended=True",
    by: "admission chain",
    meaning:
      "spec.suspend is true: the job is not submitted (a submitted one is cancelled at the provider) until it is false",
    fix: () => "set spec.suspend to false when the job may run",
    byDesign: true,
  },
  [DEADLINE_EXCEEDED]: {
    shownAs: "Failed",
    by: "end",
    meaning:
      "the job ran past spec.activeDeadlineSeconds since its first submission: it is not submitted again",
    fix: () => "create the job again, with a longer spec.activeDeadlineSeconds if it needs one",
  },
  AccountNotBound: {
    shownAs: "Admitted=False",
    by: "admission chain",
    meaning:
      "the job's namespace is not bound to the account it names, or to any account while one is required",
    fix: (s) =>
      s.specAccount
        ? `an operator binds namespace ${s.namespace} to ${s.specAccount} (kubectl media bind ${s.namespace} ${s.specAccount}), ` +
          `or set spec.account to an account the namespace is bound to (kubectl media status -n ${s.namespace})`
        : `set spec.account to one of the namespace's accounts (kubectl media status -n ${s.namespace}), ` +
          `or an operator binds one (kubectl media bind ${s.namespace} ACCOUNT)`,
  },
  AccountUnknown: {
    shownAs: "Admitted=False",
    by: "admission chain",
    meaning: "no subscription state is known for the job's account yet",
    fix: (s) =>
      `the job runs once a subscription event for ${s.account} arrives: check the payment webhook ` +
      `(the "Replay a payment webhook" checks of kubectl media doctor; kubectl get paymentevents), ` +
      "and replay a missed one with kubectl media redeliver DELIVERY_ID",
  },
  AccountNotActive: {
    shownAs: "Admitted=False",
    by: "admission chain",
    meaning: "the account's subscription is neither active nor trialing",
    fix: (s) =>
      `the job runs once ${s.account}'s subscription is active or trialing again (a customer.subscription.updated event); ` +
      "delete the job otherwise",
  },
  NoPlan: {
    shownAs: "Admitted=False",
    by: "admission chain",
    meaning: "plans are configured but none matches the prices of the account's subscription",
    fix: () =>
      "add a plan for the subscription's price (chart value plans, MEDIA_PLANS), or wait for the subscription's price " +
      "to be recorded (kubectl get bacct -o wide)",
  },
  UsageLimitReached: {
    shownAs: "Admitted=False",
    by: "admission chain",
    meaning:
      "the account has used the GPU seconds its plan allows this billing period (a job still queued at the provider " +
      "is cancelled there and waits in Pending)",
    fix: (s) =>
      `the job runs once ${s.account}'s billing period rolls over or its plan grows (a larger price on the subscription; ` +
      "kubectl get bacct -o wide shows used and limit seconds); delete the job otherwise",
  },
  ConcurrencyLimitReached: {
    shownAs: "Admitted=False",
    by: "admission chain",
    meaning: "the account runs as many jobs as its plan's maxConcurrentJobs",
    fix: (s) => `the job runs once one of ${s.account}'s running jobs ends (its plan's maxConcurrentJobs)`,
    byDesign: true,
  },
  ExecutionTimeoutAbovePlan: {
    shownAs: "Admitted=False",
    by: "admission chain",
    meaning: "spec.executionTimeoutSeconds is above the plan's maxExecutionTimeoutMs",
    fix: (s) =>
      "lower spec.executionTimeoutSeconds to the plan's maxExecutionTimeoutMs (or leave it out: the plan's is used), " +
      `or move ${s.account} to a plan that allows it`,
  },
  EndpointMissing: {
    shownAs: "EndpointReady=False",
    by: "admission chain",
    meaning: "no GpuEndpoint serves the job's workload in its namespace (or spec.endpointRef names none)",
    fix: (s) =>
      `apply a GpuEndpoint for workload ${s.workload} in namespace ${s.namespace}, or set spec.endpointRef to one`,
  },
  WorkloadMismatch: {
    shownAs: "EndpointReady=False",
    by: "admission chain",
    meaning: "spec.endpointRef names a GpuEndpoint of another workload",
    fix: (s) => `set spec.endpointRef to a GpuEndpoint of workload ${s.workload}`,
  },
  EndpointNotReady: {
    shownAs: "EndpointReady=False",
    by: "admission chain",
    meaning: "the job's GpuEndpoint is not Ready (when it says why, its own Ready reason is shown instead)",
    fix: () =>
      "kubectl describe gpuendpoint (its conditions say why it is not Ready); kubectl media doctor checks the endpoints",
  },
  [WINDOW_REASONS.windowFull]: {
    shownAs: "Queued=True",
    by: "in-flight window",
    meaning:
      "the in-flight window of the job's endpoint is full: the job waits in Kubernetes, not at the provider",
    fix: waitForSlot,
    byDesign: true,
  },
  [WINDOW_REASONS.throttled]: {
    shownAs: "Queued=True",
    by: "in-flight window",
    meaning: "the provider refused submissions to the endpoint (429): held until its Retry-After",
    fix: waitForSlot,
    byDesign: true,
  },
  [WINDOW_REASONS.noCapacity]: {
    shownAs: "Queued=True",
    by: "in-flight window",
    meaning: "the endpoint allows no workers (workersMax 0): the job waits in Kubernetes",
    fix: () => "the endpoint has no workers (maxWorkers 0): raise spec.maxWorkers of its GpuEndpoint",
  },
  [WINDOW_REASONS.scalerUnknown]: {
    shownAs: "Queued=True",
    by: "in-flight window",
    meaning: "the endpoint's autoscaler is not known yet, and the window is sized from it",
    fix: () =>
      "set the endpoint's autoscaler at the provider (QUEUE_DELAY or REQUEST_COUNT with a positive value), or " +
      "spec.maxInFlight of its GpuEndpoint (kubectl describe gpuendpoint: condition ScalerKnown)",
  },
  [WINDOW_REASONS.lowPriority]: {
    shownAs: "Queued=True",
    by: "in-flight window",
    meaning: "a low-priority job takes only workers that are up and free: none is",
    fix: () =>
      "nothing to fix: a low-priority job runs when a worker of its endpoint is up and free (it never makes the " +
      "endpoint scale); minWorkers above 0 keeps workers up for such jobs",
    byDesign: true,
  },
  WorkersUnhealthy: {
    shownAs: "Queued=True",
    by: "provider",
    meaning: "submitted, queued at the provider while its workers crash as they start",
    fix: () =>
      "read the worker logs (a GPU runtime mismatch, a missing model artefact, an import error, out of memory) and fix the worker image",
  },
  NoWorkersAllowed: {
    shownAs: "Queued=True",
    by: "provider",
    meaning: "submitted, queued at the provider while maxWorkers is 0",
    fix: maxWorkers,
  },
  WorkersThrottled: {
    shownAs: "Queued=True",
    by: "provider",
    meaning:
      "submitted, queued at the provider while its workers are throttled: no GPU of the requested types is free",
    fix: () => "allow more GPU types, or wait",
  },
  ScalingFromZero: {
    shownAs: "Queued=True",
    by: "provider",
    meaning: "submitted, queued at the provider while the first worker starts (no worker was up)",
    fix: () =>
      "for latency: minWorkers of 1 or more keeps a worker warm; FlashBoot and a smaller image shorten the start",
    byDesign: true,
  },
  ColdStart: {
    shownAs: "Queued=True",
    by: "provider",
    meaning: "submitted, queued at the provider while more workers start",
    fix: () =>
      "for latency: minWorkers of 1 or more keeps a worker warm; FlashBoot and a smaller image shorten the start",
    byDesign: true,
  },
  WorkersMaxReached: {
    shownAs: "Queued=True",
    by: "provider",
    meaning: "submitted, queued at the provider with every allowed worker busy",
    fix: maxWorkers,
    byDesign: true,
  },
  WaitingForScaler: {
    shownAs: "Queued=True",
    by: "provider",
    meaning:
      "submitted, queued at the provider while the autoscaler adds workers (QUEUE_DELAY or REQUEST_COUNT)",
    fix: () => "nothing to fix: the autoscaler adds workers as the queue waits or grows",
    byDesign: true,
  },
  [START_DEADLINE_EXCEEDED]: {
    shownAs: "Failed",
    by: "end",
    meaning: "no worker started the job within its start deadline (spec.startDeadlineSeconds)",
    fix: () =>
      "kubectl describe gpuendpoint (a worker that cannot start shows there); a longer spec.startDeadlineSeconds " +
      "if starts are slow",
  },
  [EXPIRED]: {
    shownAs: "Failed",
    by: "end",
    meaning:
      "the provider no longer knows the job: its policy.ttl (queue plus run) ran out before its end was seen",
    fix: () => "create the job again to run it, with a longer executionTimeoutSeconds if it needs one",
  },
  CacheHit: {
    shownAs: "Completed",
    by: "end",
    meaning:
      "completed from the stage cache: an earlier job of the same namespace ran the same stage (workload, endpoint " +
      "template, input, media inputs' digests) and its outputs are still stored; not run at the provider, not billed",
    fix: (s) =>
      `nothing to fix; to run it anyway, create it again with spec.cache: Never (kubectl get mj ${s.name} -n ${s.namespace} -o yaml shows its outputs)`,
    byDesign: true,
  },
  OutputMissing: {
    shownAs: "Failed",
    by: "end",
    meaning:
      "the provider reported COMPLETED, but a declared output (spec.media.outputs) was not in the object store: " +
      "each such attempt is a failure, retried while maxAttempts allows",
    fix: () =>
      "the worker must PUT every output to its URL under _mediaOrchestrator.outputs before it returns " +
      "(docs/provider.md, worker contract); its logs say why it did not",
  },
  OutputSizeMismatch: {
    shownAs: "Failed",
    by: "end",
    meaning:
      "a declared output's stored size differs from the size the worker reported: retried as OutputMissing",
    fix: () =>
      "the worker must report the size of the bytes it uploaded (a truncated or repeated upload shows here)",
  },
  OutputDigestMismatch: {
    shownAs: "Failed",
    by: "end",
    meaning:
      "a declared output's stored bytes do not have the SHA-256 the worker reported: retried as OutputMissing",
    fix: () => "the worker must report the hex SHA-256 of the bytes it uploaded",
  },
  OutputNotKept: {
    shownAs: "Failed",
    by: "end",
    meaning:
      "the worker reported a declared output behind a URL of its own, and it could not be copied into the object " +
      "store (a 404, a refused address, over the size bound, or the provider forgot the result first): retried " +
      "while maxAttempts allows",
    fix: () =>
      "the worker must report an https URL that answers 200 with a Content-Length while the provider keeps the " +
      "result (docs/provider.md, outputs left at the provider), or PUT the output to its URL",
  },
  StorageNotConfigured: {
    shownAs: "Failed",
    by: "end",
    meaning:
      "the job names media (spec.media), but the installation has no object store: it is never submitted",
    fix: () => "an operator sets the chart's storage.bucket (STORAGE_BUCKET); then create the job again",
  },
  InvalidInputReference: {
    shownAs: "Failed",
    by: "end",
    meaning:
      "an input reference is not s3://<bucket>/<namespace>/<key> in the installation's bucket under the job's " +
      "namespace: it is never submitted",
    fix: (s) => `create the job again with references under s3://<bucket>/${s.namespace}/`,
  },
  InvalidOutputName: {
    shownAs: "Failed",
    by: "end",
    meaning: "a declared output's name is not a valid object name: it is never submitted",
    fix: () => "create the job again with output names of letters, digits, '.', '_' and '-'",
  },
  StorageDeadlineTooLong: {
    shownAs: "Failed",
    by: "end",
    meaning:
      "the attempt's deadlines end more than 7 days after its submission, longer than a presigned URL lasts: " +
      "it is never submitted",
    fix: () =>
      "create the job again with an executionTimeoutSeconds or activeDeadlineSeconds that ends within 7 days",
  },
  StorageDeadlinePassed: {
    shownAs: "Failed",
    by: "end",
    meaning: "the attempt's deadlines had passed when it was to be submitted: no URL could be valid",
    fix: () => "create the job again with a later deadline",
  },
  StorageUnbounded: {
    shownAs: "Failed",
    by: "end",
    meaning: "the attempt has no deadline, so no URL could end: it is never submitted",
    fix: () => "create the job again with executionTimeoutSeconds or activeDeadlineSeconds",
  },
};

/** The names of a job that a fix is written for. */
function fixSubject(job: MediaJob): FixSubject {
  return {
    namespace: job.metadata.namespace ?? "",
    name: job.metadata.name,
    workload: job.spec.workload,
    account: jobAccount(job) ?? "",
    specAccount: job.spec.account,
  };
}

/**
 * What to do about a reason shown on a job: the table's fix, else (a reason the table does not
 * list, such as a GpuEndpoint's own Ready reason) the fix of its condition type.
 */
export function fixFor(job: MediaJob, c: { type: string; reason?: string | undefined }): string {
  const entry = c.reason !== undefined ? REASONS[c.reason] : undefined;
  if (entry) return entry.fix(fixSubject(job));
  if (c.type === "EndpointReady") return REASONS.EndpointNotReady!.fix(fixSubject(job));
  return `kubectl describe mediajob ${job.metadata.name} -n ${job.metadata.namespace}`;
}

/** Whether a reason is the product working as configured (doctor's ok, status's exit code 0). */
export const isByDesign = (reason: string | undefined): boolean =>
  reason !== undefined && REASONS[reason]?.byDesign === true;
