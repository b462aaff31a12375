// The MediaJob resource: its one zod schema, from which the CRD, docs/api.md and the types are
// generated (one schema per resource: one piece for that reason).
import { z } from "zod";
import { mediaRules } from "./media-rules.js";
import {
  AGE_COLUMN,
  Conditions,
  FreeObject,
  ObjectMeta,
  ObjectName,
  Timestamp,
  Workload,
  type AdmissionRule,
  type ResourceDefinition,
} from "./common.js";

export const JobPhase = z.enum(["Pending", "Processing", "Completed", "Failed", "Cancelled"]);
export type JobPhase = z.infer<typeof JobPhase>;

/** Characters that survive a URL path segment and the provider's id field unchanged. */
const JobId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/, "letters, digits, '.', '_', ':' and '-' only");

/** An object's name in a job's media: the worker's name for it and its key's last segment (src/storage/keys.ts). */
const MediaName = z
  .string()
  .min(1)
  .max(128)
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._-]*$/,
    "letters, digits, '.', '_' and '-', starting with a letter or digit",
  );

const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, "64 lowercase hex digits");

/** A media input by reference: the worker reads the object through a presigned GET. */
const MediaInput = z.object({
  name: MediaName.describe("The input's name: the worker finds it under _mediaOrchestrator.inputs.<name>."),
  uri: z
    .string()
    .min(6)
    .max(1100)
    .regex(/^s3:\/\/[^/]+\/.+$/, "s3://<bucket>/<key>")
    .describe(
      "s3://<bucket>/<key> in the installation's bucket, the key under the job's namespace " +
        "(<namespace>/...): a job reads only its own namespace's objects.",
    ),
  sha256: Sha256.optional().describe("Hex SHA-256 of the object: the worker checks the bytes against it."),
  size: z.int().min(0).optional().describe("The object's size in bytes: the worker checks it."),
});

/** A declared output: the worker writes it through a presigned PUT, checked before Completed. */
const MediaOutput = z.object({
  name: MediaName.describe(
    "The output's name: the worker writes it to _mediaOrchestrator.outputs.<name>.url; the next " +
      "pipeline step reads it as its input of the same name.",
  ),
});

const Media = z.object({
  inputs: z
    .array(MediaInput)
    .max(32)
    .meta({ "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"] })
    .optional()
    .describe("Objects the worker reads, by reference (a presigned GET URL each, per attempt)."),
  outputs: z
    .array(MediaOutput)
    .max(32)
    .meta({ "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"] })
    .optional()
    .describe(
      "Objects the worker must write (a presigned PUT URL each, per attempt). A COMPLETED attempt " +
        "whose outputs are not all stored is a failure (reason OutputMissing), retried as maxAttempts allows.",
    ),
});

const JobSettings = {
  workload: Workload,
  endpointRef: ObjectName.optional().describe(
    "Name of a GpuEndpoint in the same namespace. Default: the GpuEndpoint whose spec.workload matches.",
  ),
  input: FreeObject.optional().describe(
    "Free JSON object handed to the worker as its input: small parameters. spec.input and the " +
      "then[].input together hold at most 512 KiB (keys and strings counted; media goes in media.inputs).",
  ),
  cache: z
    .enum(["Reuse", "Never"])
    .optional()
    .describe(
      "Reuse (default): a job whose stage (workload, the endpoint's template, input and media inputs' " +
        "digests) has outputs stored and checked for this namespace completes from them, reason CacheHit, " +
        "without a provider call. Never: always run. Only jobs that declare outputs are cached.",
    ),
  media: Media.optional().describe(
    "Media by reference (needs the installation's object store): inputs the worker reads and " +
      "outputs it writes, through presigned URLs per attempt under input._mediaOrchestrator.",
  ),
  timeoutSeconds: z
    .int()
    .min(1)
    .max(7 * 24 * 3600)
    .optional()
    .describe("How long the job may stay Processing before it counts as stuck and the provider is asked."),
  maxAttempts: z
    .int()
    .min(1)
    .max(100)
    .optional()
    .describe(
      "How many times the job may run before a FAILED or TIMED_OUT from the provider is final. Default 1.",
    ),
  account: z
    .string()
    .min(1)
    .max(255)
    .optional()
    .describe("Payment-provider customer id; the job waits until that account is active or trialing."),
  priority: z
    .enum(["high", "normal", "low"])
    .optional()
    .describe(
      "Order among the waiting jobs of the same account (default normal): high goes first, low last. " +
        "Between accounts, slots of the endpoint's in-flight window go by fair share, whatever the " +
        "priority. A low job is also sent with the provider's policy.lowPriority (it does not make " +
        "the endpoint scale up), and only when a worker is up and free: it never holds back a normal job.",
    ),
  activeDeadlineSeconds: z
    .int()
    .min(1)
    .max(7 * 24 * 3600)
    .optional()
    .describe(
      "Hard limit on the job's run, counted from its first submission (again from the resumption " +
        "after a suspension): sent to the provider as its execution timeout where it allows it, and " +
        "enforced by the controller's cancel at the deadline (the provider's time-to-live always " +
        "outlives it, so the time the job ran is read and billed). Past it the job ends Failed with " +
        "reason DeadlineExceeded. May be added or lowered after submission, never raised or removed.",
    ),
  startDeadlineSeconds: z
    .int()
    .min(1)
    .max(7 * 24 * 3600)
    .optional()
    .describe(
      "How long a submitted job may wait in the provider's queue before a worker starts it, counted " +
        "from each submission. Past it the job is cancelled there (a queued job costs nothing) and " +
        "ends Failed with reason StartDeadlineExceeded, or goes back to Pending while maxAttempts " +
        "allows another try. Default: the controller's JOB_START_DEADLINE_SECONDS (chart value " +
        "startDeadlineSeconds), else none (the provider's queue holds it up to 24 h).",
    ),
  executionTimeoutSeconds: z
    .int()
    .min(5)
    .max(7 * 24 * 3600)
    .optional()
    .describe(
      "The longest the worker may run the job: sent to the provider as policy.executionTimeout " +
        "(RunPod: 5 s to 7 days), which ends it TIMED_OUT past it. Default: the account's plan's " +
        "maxExecutionTimeoutMs. Above the plan's, the job waits (Admitted=False, " +
        "ExecutionTimeoutAbovePlan). With activeDeadlineSeconds the smaller limit is sent.",
    ),
  ttlSecondsAfterFinished: z
    .int()
    .min(0)
    .max(10 * 365 * 24 * 3600)
    .optional()
    .describe(
      "Seconds after the job finished (Completed, Failed or Cancelled) when it is deleted, as batch/v1 " +
        "Job's. A job with a next pipeline step waits until that step was created and is gone itself, " +
        "so a pipeline is deleted from its last step back and its first job (PipelineSucceeded) goes " +
        "last. Later steps inherit it. May be changed at any time.",
    ),
};

const PipelineStep = z.object(JobSettings);
type PipelineStep = z.infer<typeof PipelineStep>;

export const MediaJobSpec = z.object({
  ...JobSettings,
  suspend: z
    .boolean()
    .optional()
    .describe(
      "True: the job is not submitted; a running job is cancelled at the provider and waits in " +
        "Pending (condition Suspended) until this is false again, as batch/v1 Job's suspend. May be " +
        "changed at any time.",
    ),
  cancel: z
    .boolean()
    .optional()
    .describe(
      "True: the job is cancelled for good, as suspend but final: a waiting job is never submitted, " +
        "a running one is cancelled at the provider and followed until the provider reports it " +
        "CANCELLED or ended; the job ends Cancelled. Cannot be set back to false " +
        "(`kubectl media cancel JOB`).",
    ),
  id: JobId.optional().describe(
    "Idempotency key, sent to the provider inside a job id scoped to this object's namespace and uid. Default: metadata.uid. Immutable.",
  ),
  then: z
    .array(PipelineStep)
    .max(16)
    .optional()
    .describe("The following pipeline steps, run in order after this job completes."),
});
export type MediaJobSpec = z.infer<typeof MediaJobSpec>;

/**
 * The write-ahead record of one submission: written (guarded by resourceVersion) before the
 * provider is called, so a submission can never happen without a trace in the object.
 */
const SubmissionIntent = z.object({
  attempt: z.int().min(1).describe("The attempt this submission is (status.attempts when it was made)."),
  id: z
    .string()
    .min(8)
    .max(64)
    .describe("Random id of this submission; with the attempt it binds the callback URL to it."),
  startedAt: Timestamp.describe("When the intent was written, just before the provider was called."),
  startBy: Timestamp.optional().describe(
    "When a worker must have started the job (startedAt plus the start deadline: spec.startDeadlineSeconds " +
      "or the controller's default): still queued at the provider then, it is cancelled there.",
  ),
  expiresAt: Timestamp.optional().describe(
    "When the provider forgets the job at the latest: startedAt plus the policy.ttl sent (queue plus " +
      "run). A status 404 after it ends the job Failed, reason Expired; one before it is a lost job.",
  ),
  state: z
    .enum(["Sending", "Accepted", "Unconfirmed"])
    .describe(
      "Sending: the provider is being called. Accepted: its job id is known. Unconfirmed: the answer " +
        "was lost; the job may be running and is adopted by its callback, never resubmitted before " +
        "its confirmation deadline.",
    ),
});
type SubmissionIntent = z.infer<typeof SubmissionIntent>;

/** One attempt's usage, as the provider's confirmed status reported it when the attempt ended. */
export const UsageAttempt = z.object({
  attempt: z.int().min(1).describe("The attempt (status.attempts when it was submitted)."),
  providerJobId: z.string().max(256).describe("The provider's id of the attempt's job."),
  endpointId: z.string().max(256).optional().describe("The provider's endpoint the attempt ran on."),
  providerStatus: z
    .enum(["COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED"])
    .describe("How the provider reported the attempt ended."),
  executionTimeMs: z
    .int()
    .min(0)
    .optional()
    .describe("The provider's executionTime, ms (absent: not reported)."),
  delayTimeMs: z.int().min(0).optional().describe("The provider's delayTime (queue and cold start), ms."),
  endedAt: Timestamp.describe("When the attempt's end was recorded: the meter event's time."),
  billedSeconds: z
    .int()
    .min(0)
    .optional()
    .describe("Whole seconds billed under the billing rule (absent: not yet billed by the controller)."),
  meter: z
    .enum(["Pending", "Reported", "Refused", "NotMetered"])
    .optional()
    .describe(
      "The meter report: Pending (in the outbox), Reported (the payment provider accepted it), Refused " +
        "(not sent: see message), NotMetered (metering is off, no account, or nothing billed).",
    ),
  eventName: z.string().max(100).optional().describe("The meter event name it is reported under."),
  identifier: z.string().max(100).optional().describe("The meter event identifier (one per attempt)."),
  firstSentAt: Timestamp.optional().describe(
    "Set by an operator sending a Refused report again (with meter Pending): its deduplication window starts then.",
  ),
  reportedAt: Timestamp.optional().describe("When the payment provider accepted it."),
  afterInvoice: z
    .boolean()
    .optional()
    .describe(
      "True when the payment provider accepted it after the invoice of its billing period was finalized " +
        "(the grace period, USAGE_INVOICE_GRACE_SECONDS, had ended): recorded by the meter, on no invoice.",
    ),
  counted: z
    .boolean()
    .optional()
    .describe("True once the seconds were added to the BillingAccount's usedSeconds."),
  countedReported: z
    .boolean()
    .optional()
    .describe("True once the reported seconds were added to the BillingAccount's reportedSeconds."),
  message: z.string().max(1024).optional().describe("Why the report was refused or is held."),
});

/** What the job was billed: each ended attempt's usage, and their sum. */
const JobUsage = z.object({
  workload: Workload.describe("The job's workload (the meter event name is chosen by it)."),
  account: z.string().max(255).optional().describe("The payment-provider customer billed (spec.account)."),
  billedSeconds: z.int().min(0).optional().describe("Sum of the attempts' billedSeconds."),
  attempts: z.array(UsageAttempt).max(256).describe("The ended attempts' usage, oldest first."),
});
export type JobUsage = z.infer<typeof JobUsage>;
export type UsageAttempt = z.infer<typeof UsageAttempt>;

export const MediaJobStatus = z.object({
  phase: JobPhase.optional().describe(
    "Where the job is: Pending (not submitted, or waiting to be submitted again), Processing " +
      "(submitted to the provider), Completed, Failed or Cancelled (the last three are final).",
  ),
  reason: z
    .string()
    .max(1024)
    .optional()
    .describe(
      "The reason of the condition that matters most now (why a Pending job waits, why a job failed), " +
        "in CamelCase: the REASON column.",
    ),
  message: z
    .string()
    .max(4096)
    .optional()
    .describe("The message of that condition, for people: the MESSAGE column (-o wide)."),
  jobId: JobId.optional().describe("The effective idempotency key; never changes once set."),
  account: z
    .string()
    .min(1)
    .max(255)
    .optional()
    .describe(
      "The account billed when spec.account is empty: the one account bound to the job's namespace, " +
        "recorded before the first submission.",
    ),
  providerJobId: z
    .string()
    .max(256)
    .optional()
    .describe("The id the provider returned (may differ from jobId)."),
  endpointId: z
    .string()
    .max(256)
    .optional()
    .describe("The provider's id of the endpoint the job was submitted to."),
  attempts: z.int().min(0).optional().describe("Submissions made to the provider."),
  failures: z.int().min(0).optional().describe("Attempts the provider reported FAILED or TIMED_OUT."),
  suspensions: z
    .int()
    .min(0)
    .optional()
    .describe("Times a submitted job was cancelled at the provider because spec.suspend was set."),
  submission: SubmissionIntent.optional().describe(
    "The current submission's write-ahead record: written before the provider is called.",
  ),
  unconfirmedResubmissions: z
    .int()
    .min(0)
    .optional()
    .describe(
      "Submissions made again because an earlier one stayed unconfirmed past its deadline (no answer, " +
        "no callback): each may have run twice at the provider.",
    ),
  providerLosses: z
    .int()
    .min(0)
    .optional()
    .describe("Times the provider no longer knew a submitted job (status 404) and it was replayed."),
  startedAt: Timestamp.optional().describe(
    "The first submission (since the last resumption from suspension): spec.activeDeadlineSeconds " +
      "counts from here.",
  ),
  submittedAt: Timestamp.optional().describe("When the current attempt was submitted."),
  completedAt: Timestamp.optional().describe("When the job reached Completed, Failed or Cancelled."),
  updatedAt: Timestamp.optional().describe("When the phase last changed."),
  replay: z
    .boolean()
    .optional()
    .describe("True once the job was reset to Pending (by an operator or the controller)."),
  stageKey: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional()
    .describe(
      "The stage cache's key of the attempt (its outputs are reused by later jobs of the same stage).",
    ),
  output: FreeObject.optional().describe(
    "The worker's output as the provider reported it (over 256 KiB: a truncation marker with a preview).",
  ),
  error: z
    .string()
    .max(4096)
    .optional()
    .describe("Why the last attempt failed or the job was cancelled, e.g. `FAILED: <worker error>`."),
  outputs: z
    .array(
      z.object({
        name: MediaName.describe("The declared output's name (spec.media.outputs)."),
        uri: z
          .string()
          .max(1100)
          .describe("s3://<bucket>/<key>: the object, as an input reference names it."),
        key: z
          .string()
          .max(1024)
          .describe("The object's key in the bucket: <namespace>/<jobUid>/<attempt>/<name>."),
        size: z.int().min(0).describe("The stored object's size in bytes."),
        sha256: Sha256.optional().describe("Hex SHA-256 of the stored bytes, when the worker reported one."),
      }),
    )
    .max(32)
    .optional()
    .describe(
      "The declared outputs of the completed attempt, checked in the object store before the job " +
        "was Completed: references, never URLs (`kubectl media outputs JOB` signs downloads).",
    ),
  nextJob: z
    .string()
    .max(253)
    .optional()
    .describe("Name of the MediaJob created for the next pipeline step."),
  usage: JobUsage.optional().describe(
    "GPU time the provider reported for each ended attempt (from its status API, never a callback " +
      "body), the seconds billed and their meter report.",
  ),
  conditions: Conditions.optional().describe(
    "Succeeded (True/False once final: `kubectl wait --for=condition=Succeeded`), Admitted, " +
      "EndpointReady, Submitted, Suspended, Overdue, and on a pipeline's first job PipelineSucceeded " +
      "(the whole pipeline: `kubectl wait --for=condition=PipelineSucceeded`).",
  ),
  observedGeneration: z
    .int()
    .min(0)
    .optional()
    .describe("The metadata.generation the controller last acted on."),
});
export type MediaJobStatus = z.infer<typeof MediaJobStatus>;

export const MediaJob = z.object({
  apiVersion: z.string(),
  kind: z.literal("MediaJob"),
  metadata: ObjectMeta,
  spec: MediaJobSpec,
  status: MediaJobStatus.optional(),
});
export type MediaJob = z.infer<typeof MediaJob>;

/**
 * Spec fields that may change after the job was submitted: suspend and cancel (that is what they
 * are for),
 * activeDeadlineSeconds (a limit may be tightened; the rules below refuse raising or removing it) and
 * ttlSecondsAfterFinished (how long a finished job is kept says nothing about what ran).
 * Everything else decides what runs, so it is frozen once the job was sent: a finished job shows
 * what ran, and a running one cannot drift from it.
 */
const MUTABLE_SPEC_FIELDS = [
  "suspend",
  "cancel",
  "activeDeadlineSeconds",
  "ttlSecondsAfterFinished",
] as const;

/** CEL: the stored job was never submitted (Pending with no attempt), so its spec is still a draft. */
const NOT_SUBMITTED =
  "!has(oldObject.status) || ((!has(oldObject.status.attempts) || oldObject.status.attempts == 0) && " +
  "(!has(oldObject.status.phase) || oldObject.status.phase == 'Pending'))";

const sameField = (f: string): string =>
  `(has(object.spec.${f}) == has(oldObject.spec.${f}) && ` +
  `(!has(object.spec.${f}) || object.spec.${f} == oldObject.spec.${f}))`;

const FROZEN_SPEC_FIELDS = Object.keys(MediaJobSpec.shape).filter(
  (f) => !(MUTABLE_SPEC_FIELDS as readonly string[]).includes(f),
);

/** The rules of the spec's lifecycle (frozen once submitted, cancel final, the reset's phase). */
const MEDIAJOB_RULES: AdmissionRule[] = [
  {
    field: "spec.id",
    expression: sameField("id"),
    message: "spec.id is immutable",
    onUpdate: true,
  },
  {
    field: "spec.cancel",
    expression:
      "!has(oldObject.spec.cancel) || !oldObject.spec.cancel || " +
      "(has(object.spec.cancel) && object.spec.cancel)",
    message: "spec.cancel cannot be undone; create a new MediaJob to run the work again",
    onUpdate: true,
  },
  {
    field: "spec",
    expression: `${NOT_SUBMITTED} || (${FROZEN_SPEC_FIELDS.map(sameField).join(" && ")})`,
    message:
      "spec is immutable once the job has been submitted, except suspend, cancel, ttlSecondsAfterFinished " +
      "and activeDeadlineSeconds (lowered only); create a new MediaJob to run something else",
    onUpdate: true,
  },
  {
    field: "spec.activeDeadlineSeconds",
    expression:
      `${NOT_SUBMITTED} || !has(oldObject.spec.activeDeadlineSeconds) || ` +
      "(has(object.spec.activeDeadlineSeconds) && " +
      "object.spec.activeDeadlineSeconds <= oldObject.spec.activeDeadlineSeconds)",
    message: "spec.activeDeadlineSeconds may only be lowered once the job has been submitted",
    onUpdate: true,
  },
  {
    // The reset (Pending, replay true, updatedAt now) applies to a Processing job, or to one
    // Failed because its submission stayed unconfirmed: a finished job stays finished, and a
    // Pending one is already waiting. The refusal says which phase the job is in.
    field: "status.phase",
    expression:
      "!has(object.status) || !has(oldObject.status) || !has(oldObject.status.phase) || " +
      "!has(object.status.phase) || object.status.phase != 'Pending' || " +
      "!has(object.status.replay) || !object.status.replay || !has(object.status.updatedAt) || " +
      "(has(oldObject.status.updatedAt) && object.status.updatedAt == oldObject.status.updatedAt) || " +
      "oldObject.status.phase == 'Processing' || " +
      "(oldObject.status.phase == 'Failed' && has(oldObject.status.submission) && " +
      "oldObject.status.submission.state == 'Unconfirmed')",
    message: "only a Processing job can be reset to Pending",
    messageExpression: "'only a Processing job can be reset; it is ' + oldObject.status.phase",
    onUpdate: true,
  },
];

export const mediaJobDefinition: ResourceDefinition = {
  kind: "MediaJob",
  plural: "mediajobs",
  singular: "mediajob",
  shortNames: ["mj"],
  description:
    "One unit of GPU work (ASR, TTS or render) submitted to a GpuEndpoint, with its pipeline steps.",
  spec: MediaJobSpec,
  status: MediaJobStatus,
  // Built when asked (the CRD generator, the rules policy): the media rules' CEL is text a
  // running controller never reads (media-rules.ts).
  get admissionRules() {
    return [...mediaRules(), ...MEDIAJOB_RULES];
  },
  printerColumns: [
    { name: "Workload", type: "string", jsonPath: ".spec.workload" },
    { name: "Phase", type: "string", jsonPath: ".status.phase" },
    {
      name: "Reason",
      type: "string",
      jsonPath: ".status.reason",
      description: "Why the job is where it is: the reason of the condition that matters most now.",
    },
    { name: "Endpoint", type: "string", jsonPath: ".status.endpointId" },
    { name: "Attempts", type: "integer", jsonPath: ".status.attempts" },
    AGE_COLUMN,
    { name: "Message", type: "string", jsonPath: ".status.message", priority: 1 },
    { name: "Job ID", type: "string", jsonPath: ".status.jobId", priority: 1 },
    { name: "Provider Job", type: "string", jsonPath: ".status.providerJobId", priority: 1 },
    { name: "Replay", type: "boolean", jsonPath: ".status.replay", priority: 1 },
    {
      name: "GPU Seconds",
      type: "integer",
      jsonPath: ".status.usage.billedSeconds",
      description: "Whole GPU seconds billed for the job's ended attempts.",
      priority: 1,
    },
  ],
  // The sidecar asks which MediaJob holds a provider job before a callback may adopt it
  // (src/callback/adoption.ts): one indexed list call, on any replica, however fresh.
  selectableFields: [{ jsonPath: ".status.providerJobId" }],
};
