import { z } from "zod";
import {
  AGE_COLUMN,
  Conditions,
  ObjectMeta,
  Timestamp,
  Workload,
  conditionColumn,
  type ResourceDefinition,
} from "./common.js";

const EndpointCreation = z.object({
  templateId: z
    .string()
    .min(1)
    .max(256)
    .describe("Provider template (worker image) to create the endpoint from."),
  gpuTypeIds: z
    .array(z.string().min(1).max(128))
    .min(1)
    .max(16)
    .describe("GPU types, in order of preference."),
  gpuCount: z.int().min(1).max(8).optional(),
});

export const GpuEndpointSpec = z.object({
  workload: Workload,
  endpointId: z
    .string()
    .min(1)
    .max(256)
    .optional()
    .describe(
      "Provider endpoint id. Default: GPU_PROVIDER_ENDPOINT_<WORKLOAD>, else the endpoint named <prefix>-<workload>-<env>.",
    ),
  minWorkers: z.int().min(0).max(1000).default(0).describe("Always-running workers (1 avoids cold starts)."),
  maxWorkers: z.int().min(0).max(1000).default(3).describe("Upper bound on workers, to cap cost."),
  idleTimeoutSeconds: z.int().min(1).max(3600).default(5).describe("Seconds an idle worker stays up."),
  maxInFlight: z
    .int()
    .min(0)
    .max(100_000)
    .optional()
    .describe(
      "Most of our jobs submitted to this endpoint and not finished at once (the in-flight window). " +
        "Default: from the endpoint's capacity as the provider reports it (workersMax, its scaler, " +
        "/health). Jobs past it wait Pending with condition Queued and go by fair share between accounts.",
    ),
  idempotentWorkers: z
    .boolean()
    .optional()
    .describe(
      "True: the endpoint's workers deduplicate on the submission identity in the job's input " +
        "(input._mediaOrchestrator), so a submission whose answer was lost is submitted again at its " +
        "confirmation deadline instead of failing the job. Default false: at most once.",
    ),
  baseUrl: z
    .string()
    .max(2048)
    .regex(/^https?:\/\/[^\s/?#@]+(\/[^\s?#@]*)?$/)
    .optional()
    .describe(
      "A self-hosted endpoint: the base of its job API, in place of the provider's " +
        "<GPU_PROVIDER_API_URL>/v2/<endpointId>; jobs go to <baseUrl>/run and <baseUrl>/status/<id>. " +
        "For a local worker (runpod's `--rp_serve_api`) or a self-hosted RunPod-compatible server. " +
        "http(s), no query, fragment or credentials. Nothing is managed at the provider, the API key is " +
        "sent only to GPU_PROVIDER_API_URL's origin, and spec.maxInFlight is required.",
    ),
  create: EndpointCreation.optional().describe(
    "Create the provider endpoint with these settings when none is found.",
  ),
});
export type GpuEndpointSpec = z.output<typeof GpuEndpointSpec>;

export const EndpointHealth = z
  .object({
    jobsInQueue: z.int().min(0).optional().describe("Jobs waiting in the endpoint's queue."),
    jobsInProgress: z.int().min(0).optional().describe("Jobs running on a worker."),
    jobsCompleted: z.int().min(0).optional().describe("Jobs completed, as the provider counts them."),
    jobsFailed: z.int().min(0).optional().describe("Jobs failed, as the provider counts them."),
    workersIdle: z.int().min(0).optional().describe("Workers up and waiting for a job."),
    workersRunning: z.int().min(0).optional().describe("Workers running a job."),
    workersInitializing: z
      .int()
      .min(0)
      .optional()
      .describe("Workers starting (a cold start); read while jobs are queued."),
    workersUnhealthy: z
      .int()
      .min(0)
      .optional()
      .describe("Workers the provider reports unhealthy; read while jobs are queued."),
    workersThrottled: z
      .int()
      .min(0)
      .optional()
      .describe("Workers the provider reports throttled; read while jobs are queued."),
  })
  .describe(
    "The endpoint's queue and workers at the last look: /health, and while jobs are queued the " +
      "provider's worker summary (REST API v2).",
  );
export type EndpointHealth = z.infer<typeof EndpointHealth>;

export const GpuEndpointStatus = z.object({
  endpointId: z.string().max(256).optional().describe("The provider's id of the endpoint in use."),
  endpointName: z.string().max(256).optional().describe("The provider's name of that endpoint."),
  resolvedBy: z
    .enum(["spec", "environment", "name", "created", "baseUrl"])
    .optional()
    .describe(
      "How the endpoint was found: spec (spec.endpointId), environment (GPU_PROVIDER_ENDPOINT_<WORKLOAD>), " +
        "name (<prefix>-<workload>-<env>), created (spec.create) or baseUrl (self-hosted: spec.endpointId, else " +
        "the GpuEndpoint's name).",
    ),
  workersMin: z.int().min(0).optional().describe("minWorkers as the provider has it."),
  workersMax: z.int().min(0).optional().describe("maxWorkers as the provider has it."),
  idleTimeoutSeconds: z.int().min(0).optional().describe("idleTimeoutSeconds as the provider has it."),
  executionTimeoutMs: z
    .int()
    .min(0)
    .optional()
    .describe(
      "The endpoint's execution timeout as the provider has it, ms: what bounds a job that sends none " +
        "(its policy.ttl covers it).",
    ),
  scalerType: z
    .string()
    .max(64)
    .optional()
    .describe("The provider's autoscaler of the endpoint (QUEUE_DELAY or REQUEST_COUNT)."),
  scalerValue: z
    .number()
    .min(0)
    .optional()
    .describe("The autoscaler's value: seconds of queue delay, or requests per worker."),
  health: EndpointHealth.optional(),
  window: z
    .int()
    .min(0)
    .optional()
    .describe("The in-flight window now: how many of our jobs may be at the provider at once."),
  inFlight: z
    .int()
    .min(0)
    .optional()
    .describe("Our jobs submitted to the endpoint and not finished, at the last look."),
  lastSyncedAt: Timestamp.optional().describe(
    "When the status last changed (it is written only when it changes, not at every look).",
  ),
  conditions: Conditions.optional(),
  observedGeneration: z
    .int()
    .min(0)
    .optional()
    .describe("The metadata.generation the controller last acted on."),
});
export type GpuEndpointStatus = z.infer<typeof GpuEndpointStatus>;

export const GpuEndpoint = z.object({
  apiVersion: z.string(),
  kind: z.literal("GpuEndpoint"),
  metadata: ObjectMeta,
  spec: GpuEndpointSpec,
  status: GpuEndpointStatus.optional(),
});
export type GpuEndpoint = z.output<typeof GpuEndpoint>;

export const gpuEndpointDefinition: ResourceDefinition = {
  kind: "GpuEndpoint",
  plural: "gpuendpoints",
  singular: "gpuendpoint",
  shortNames: ["gpuep"],
  description: "A serverless GPU endpoint at the provider, kept in sync with its min/max worker settings.",
  spec: GpuEndpointSpec,
  status: GpuEndpointStatus,
  admissionRules: [
    {
      // Both have defaults, which the apiserver fills in before admission.
      field: "spec.maxWorkers",
      expression: "object.spec.maxWorkers >= object.spec.minWorkers",
      message: "spec.maxWorkers must be greater than or equal to spec.minWorkers",
    },
    {
      // A self-hosted endpoint has no provider capacity to size its in-flight window from.
      field: "spec.maxInFlight",
      expression: "!has(object.spec.baseUrl) || has(object.spec.maxInFlight)",
      message: "spec.maxInFlight is required with spec.baseUrl (a self-hosted endpoint)",
    },
    {
      field: "spec.create",
      expression: "!has(object.spec.baseUrl) || !has(object.spec.create)",
      message:
        "spec.create cannot be set with spec.baseUrl: a self-hosted endpoint is not created at the provider",
    },
  ],
  printerColumns: [
    { name: "Workload", type: "string", jsonPath: ".spec.workload" },
    { name: "Endpoint ID", type: "string", jsonPath: ".status.endpointId" },
    { name: "Min", type: "integer", jsonPath: ".spec.minWorkers" },
    { name: "Max", type: "integer", jsonPath: ".spec.maxWorkers" },
    conditionColumn("Ready", "Ready"),
    AGE_COLUMN,
    {
      name: "Reason",
      type: "string",
      jsonPath: '.status.conditions[?(@.type=="Ready")].reason',
      priority: 1,
    },
    { name: "Queue", type: "integer", jsonPath: ".status.health.jobsInQueue", priority: 1 },
    { name: "In Flight", type: "integer", jsonPath: ".status.inFlight", priority: 1 },
    { name: "Window", type: "integer", jsonPath: ".status.window", priority: 1 },
  ],
};
