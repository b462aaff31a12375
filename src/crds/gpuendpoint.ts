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

export const EndpointCreation = z.object({
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
  create: EndpointCreation.optional().describe(
    "Create the provider endpoint with these settings when none is found.",
  ),
});
export type GpuEndpointSpec = z.output<typeof GpuEndpointSpec>;

export const EndpointHealth = z.object({
  jobsInQueue: z.int().min(0).optional(),
  jobsInProgress: z.int().min(0).optional(),
  jobsCompleted: z.int().min(0).optional(),
  jobsFailed: z.int().min(0).optional(),
  workersIdle: z.int().min(0).optional(),
  workersRunning: z.int().min(0).optional(),
  workersInitializing: z.int().min(0).optional(),
  workersUnhealthy: z.int().min(0).optional(),
  workersThrottled: z.int().min(0).optional(),
});
export type EndpointHealth = z.infer<typeof EndpointHealth>;

export const GpuEndpointStatus = z.object({
  endpointId: z.string().max(256).optional(),
  endpointName: z.string().max(256).optional(),
  resolvedBy: z.enum(["spec", "environment", "name", "created"]).optional(),
  workersMin: z.int().min(0).optional().describe("minWorkers as the provider has it."),
  workersMax: z.int().min(0).optional().describe("maxWorkers as the provider has it."),
  idleTimeoutSeconds: z.int().min(0).optional(),
  health: EndpointHealth.optional(),
  lastSyncedAt: Timestamp.optional(),
  conditions: Conditions.optional(),
  observedGeneration: z.int().min(0).optional(),
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
  specValidations: [
    {
      rule: "self.maxWorkers >= self.minWorkers",
      message: "spec.maxWorkers must be greater than or equal to spec.minWorkers",
      fieldPath: ".maxWorkers",
      reason: "FieldValueInvalid",
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
  ],
};
