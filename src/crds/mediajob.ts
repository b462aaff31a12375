import { z } from "zod";
import {
  AGE_COLUMN,
  Conditions,
  FreeObject,
  ObjectMeta,
  ObjectName,
  Timestamp,
  Workload,
  type ResourceDefinition,
} from "./common.js";

export const JobPhase = z.enum(["Pending", "Processing", "Completed", "Failed", "Cancelled"]);
export type JobPhase = z.infer<typeof JobPhase>;

/** Characters that survive a URL path segment and the provider's id field unchanged. */
export const JobId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/, "letters, digits, '.', '_', ':' and '-' only");

const JobSettings = {
  workload: Workload,
  endpointRef: ObjectName.optional().describe(
    "Name of a GpuEndpoint in the same namespace. Default: the GpuEndpoint whose spec.workload matches.",
  ),
  input: FreeObject.optional().describe("Free JSON object handed to the worker as its input."),
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
};

export const PipelineStep = z.object(JobSettings);
export type PipelineStep = z.infer<typeof PipelineStep>;

export const MediaJobSpec = z.object({
  ...JobSettings,
  id: JobId.optional().describe(
    "Idempotency key sent to the provider as the job id. Default: metadata.uid. Immutable.",
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
export const SubmissionIntent = z.object({
  attempt: z.int().min(1).describe("The attempt this submission is (status.attempts when it was made)."),
  id: z
    .string()
    .min(8)
    .max(64)
    .describe("Random id of this submission; with the attempt it binds the callback URL to it."),
  startedAt: Timestamp.describe("When the intent was written, just before the provider was called."),
  state: z
    .enum(["Sending", "Accepted", "Unconfirmed"])
    .describe(
      "Sending: the provider is being called. Accepted: its job id is known. Unconfirmed: the answer " +
        "was lost; the job may be running and is adopted by its callback, never resubmitted before " +
        "its confirmation deadline.",
    ),
});
export type SubmissionIntent = z.infer<typeof SubmissionIntent>;

export const MediaJobStatus = z.object({
  phase: JobPhase.optional(),
  jobId: JobId.optional().describe("The effective idempotency key; never changes once set."),
  providerJobId: z
    .string()
    .max(256)
    .optional()
    .describe("The id the provider returned (may differ from jobId)."),
  endpointId: z.string().max(256).optional(),
  attempts: z.int().min(0).optional().describe("Submissions made to the provider."),
  failures: z.int().min(0).optional().describe("Attempts the provider reported FAILED or TIMED_OUT."),
  submission: SubmissionIntent.optional(),
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
  submittedAt: Timestamp.optional(),
  completedAt: Timestamp.optional(),
  updatedAt: Timestamp.optional(),
  replay: z
    .boolean()
    .optional()
    .describe("True once the job was reset to Pending (by an operator or the controller)."),
  output: FreeObject.optional(),
  error: z.string().max(4096).optional(),
  nextJob: z
    .string()
    .max(253)
    .optional()
    .describe("Name of the MediaJob created for the next pipeline step."),
  conditions: Conditions.optional(),
  observedGeneration: z.int().min(0).optional(),
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

export const mediaJobDefinition: ResourceDefinition = {
  kind: "MediaJob",
  plural: "mediajobs",
  singular: "mediajob",
  shortNames: ["mj"],
  description:
    "One unit of GPU work (ASR, TTS or render) submitted to a GpuEndpoint, with its pipeline steps.",
  spec: MediaJobSpec,
  status: MediaJobStatus,
  specValidations: [
    {
      rule: "has(self.id) == has(oldSelf.id) && (!has(self.id) || self.id == oldSelf.id)",
      message: "spec.id is immutable",
      fieldPath: ".id",
      reason: "FieldValueInvalid",
    },
  ],
  printerColumns: [
    { name: "Workload", type: "string", jsonPath: ".spec.workload" },
    { name: "Phase", type: "string", jsonPath: ".status.phase" },
    { name: "Endpoint", type: "string", jsonPath: ".status.endpointId" },
    { name: "Attempts", type: "integer", jsonPath: ".status.attempts" },
    AGE_COLUMN,
    { name: "Job ID", type: "string", jsonPath: ".status.jobId", priority: 1 },
    { name: "Provider Job", type: "string", jsonPath: ".status.providerJobId", priority: 1 },
    { name: "Replay", type: "boolean", jsonPath: ".status.replay", priority: 1 },
  ],
};
