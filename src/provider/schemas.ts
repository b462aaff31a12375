import { z } from "zod";

// Shapes of what the GPU provider (RunPod Serverless) answers. Every response is parsed with these
// before anyone uses it. Sources: https://docs.runpod.io/serverless/endpoints/operation-reference
// (job API) and https://docs.runpod.io/sdks/graphql/configurations (GraphQL).

const PROVIDER_JOB_STATUSES = [
  "IN_QUEUE",
  "IN_PROGRESS",
  "COMPLETED",
  "FAILED",
  "TIMED_OUT",
  "CANCELLED",
] as const;
export type ProviderJobStatus = (typeof PROVIDER_JOB_STATUSES)[number];

export const TERMINAL_STATUSES: ReadonlySet<ProviderJobStatus> = new Set<ProviderJobStatus>([
  "COMPLETED",
  "FAILED",
  "TIMED_OUT",
  "CANCELLED",
]);

// RunPod's job-states page also lists RUNNING ("a worker has picked up the job") although no SDK
// tests for it; read it as IN_PROGRESS instead of rejecting the whole answer.
export const ProviderJobStatusSchema = z.preprocess(
  (v) => (v === "RUNNING" ? "IN_PROGRESS" : v),
  z.enum(PROVIDER_JOB_STATUSES),
);

// The provider sends null for absent numbers on some paths; callers only ever see undefined.
const optionalNumber = z
  .number()
  .nullish()
  .transform((v) => v ?? undefined);
const optionalString = z
  .string()
  .nullish()
  .transform((v) => v ?? undefined);

export type ProviderJob = {
  id: string;
  status: ProviderJobStatus;
  delayTime?: number;
  executionTime?: number;
  output?: unknown;
  error?: unknown;
  workerId?: string;
};

// Loose: the webhook body also echoes `input` and `webhook`, and RunPod adds fields over time.
export const ProviderJob: z.ZodType<ProviderJob> = z.looseObject({
  id: z.string().min(1),
  status: ProviderJobStatusSchema,
  delayTime: optionalNumber,
  executionTime: optionalNumber,
  output: z.unknown().optional(),
  error: z.unknown().optional(),
  workerId: optionalString,
});

export const SubmitResponse = z.looseObject({ id: z.string().min(1), status: ProviderJobStatusSchema });

export interface EndpointHealthReport {
  jobs: { completed: number; failed: number; inProgress: number; inQueue: number; retried: number };
  /**
   * RunPod's /health documents only `idle` and `running`
   * (https://docs.runpod.io/serverless/endpoints/operation-reference). The other counts are
   * undefined unless the provider sent them or REST v2's worker summary filled them in.
   */
  workers: {
    idle: number;
    running: number;
    initializing?: number;
    ready?: number;
    throttled?: number;
    unhealthy?: number;
  };
}

// Missing documented counters are 0; undocumented ones stay unknown rather than "0, healthy".
const counter = z.number().int().nonnegative().default(0);
const extraCounter = z
  .number()
  .int()
  .nonnegative()
  .nullish()
  .transform((v) => v ?? undefined);
export const EndpointHealthReport: z.ZodType<EndpointHealthReport> = z
  .looseObject({
    jobs: z.looseObject({
      completed: counter,
      failed: counter,
      inProgress: counter,
      inQueue: counter,
      retried: counter,
    }),
    workers: z.looseObject({
      idle: counter,
      running: counter,
      initializing: extraCounter,
      ready: extraCounter,
      throttled: extraCounter,
      unhealthy: extraCounter,
    }),
  })
  .transform(({ jobs, workers }) => ({
    jobs: {
      completed: jobs.completed,
      failed: jobs.failed,
      inProgress: jobs.inProgress,
      inQueue: jobs.inQueue,
      retried: jobs.retried,
    },
    workers: {
      idle: workers.idle,
      running: workers.running,
      ...(workers.initializing !== undefined && { initializing: workers.initializing }),
      ...(workers.ready !== undefined && { ready: workers.ready }),
      ...(workers.throttled !== undefined && { throttled: workers.throttled }),
      ...(workers.unhealthy !== undefined && { unhealthy: workers.unhealthy }),
    },
  }));

export interface ProviderEndpoint {
  id: string;
  name: string;
  templateId?: string;
  gpuIds?: string;
  workersMin: number;
  workersMax: number;
  idleTimeout: number;
  [k: string]: unknown;
}

export const ProviderEndpoint: z.ZodType<ProviderEndpoint> = z.looseObject({
  id: z.string().min(1),
  name: z.string(),
  templateId: optionalString,
  gpuIds: optionalString,
  workersMin: z.number().int().nonnegative(),
  workersMax: z.number().int().nonnegative(),
  idleTimeout: z.number().nonnegative(),
});

/**
 * Every endpoint field we read and write back. saveEndpoint is a full replace (runpodctl
 * `UpdateEndpointModels`: "omitting fields would reset them to server defaults"), so this is the
 * round-trip set runpodctl uses; all of them are both selectable on Endpoint and accepted by
 * EndpointInput. Fields outside it cannot be sent back without failing GraphQL validation.
 */
export const ENDPOINT_FIELDS = [
  "id",
  "name",
  "templateId",
  "gpuIds",
  "gpuCount",
  "instanceIds",
  "workersMin",
  "workersMax",
  "idleTimeout",
  "locations",
  "networkVolumeId",
  "networkVolumeIds",
  "scalerType",
  "scalerValue",
  "executionTimeoutMs",
  "minCudaVersion",
  "flashBootType",
  "modelReferences",
] as const;

// The GraphQL selection for ENDPOINT_FIELDS; networkVolumeIds is an object list.
export const ENDPOINT_SELECTION = ENDPOINT_FIELDS.map((f) =>
  f === "networkVolumeIds" ? "networkVolumeIds { networkVolumeId }" : f,
).join(" ");

export const GraphQLResponse = z.looseObject({
  data: z.unknown().optional(),
  errors: z.array(z.looseObject({ message: z.string() })).optional(),
});

export const MyselfId = z.looseObject({ myself: z.looseObject({ id: z.string().min(1) }).nullable() });
export const MyselfEndpoints = z.looseObject({
  myself: z.looseObject({ endpoints: z.array(ProviderEndpoint).nullable() }).nullable(),
});
export const SavedEndpoint = z.looseObject({ saveEndpoint: ProviderEndpoint.nullable() });
