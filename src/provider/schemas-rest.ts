import { z } from "zod";
import type { ProviderEndpoint } from "./schemas.js";

// Shapes of RunPod's REST API v2 for serverless endpoints, from its published OpenAPI document
// (https://docs.runpod.io/api-reference-v2/overview, schema at https://api.runpod.io/v2/openapi.json):
// `Endpoint`, `ListEndpointsResponse`, `ListEndpointWorkersResponse`. Loose objects: RunPod adds
// fields, and only the ones read here are required.

const count = z.number().int().nonnegative();

/** `EndpointWorkers`: min and max are required on an Endpoint; idleTimeout is omitted for REQUEST_COUNT scaling. */
const RestEndpointWorkers = z.looseObject({
  min: count,
  max: count,
  idleTimeout: z.number().int().positive().optional(),
});

export const RestEndpoint = z.looseObject({
  id: z.string().min(1),
  name: z.string(),
  type: z.string().optional(),
  gpu: z.looseObject({ pools: z.array(z.string()), count: z.number().int().positive().optional() }).nullish(),
  workers: RestEndpointWorkers,
  /** `{type: QUEUE_DELAY, queueDelay}` or `{type: REQUEST_COUNT, requestCount}`. */
  scaling: z
    .looseObject({ type: z.string(), queueDelay: z.number().optional(), requestCount: z.number().optional() })
    .optional(),
  timeout: z.number().int().optional(),
  flashboot: z.string().optional(),
});
export type RestEndpoint = z.infer<typeof RestEndpoint>;

/**
 * The endpoint in the operator's terms (the names GraphQL uses). An endpoint without an idle
 * timeout (REQUEST_COUNT scaling) reads as 0, so a GpuEndpoint that asks for one shows the
 * difference instead of hiding it.
 */
function endpointFromRest(e: RestEndpoint): ProviderEndpoint {
  return {
    id: e.id,
    name: e.name,
    workersMin: e.workers.min,
    workersMax: e.workers.max,
    idleTimeout: e.workers.idleTimeout ?? 0,
    ...(e.gpu?.pools !== undefined && { gpuIds: e.gpu.pools.join(",") }),
    ...(e.gpu?.count !== undefined && { gpuCount: e.gpu.count }),
    ...(e.timeout !== undefined && { executionTimeoutMs: e.timeout }),
    ...(e.type !== undefined && { type: e.type }),
    ...(e.scaling !== undefined && { scalerType: e.scaling.type }),
    ...(scalerValueOf(e.scaling) !== undefined && { scalerValue: scalerValueOf(e.scaling) }),
    ...(e.flashboot !== undefined && { flashboot: e.flashboot }),
  };
}

/** The scaler's value under the name its type gives it (GraphQL's scalerValue). */
function scalerValueOf(scaling: RestEndpoint["scaling"]): number | undefined {
  if (scaling?.type === "QUEUE_DELAY") return scaling.queueDelay;
  if (scaling?.type === "REQUEST_COUNT") return scaling.requestCount;
  return undefined;
}

export const RestEndpointAnswer = RestEndpoint.transform(endpointFromRest);

export const RestEndpointList = z
  .looseObject({ endpoints: z.array(RestEndpoint) })
  .transform((l) => l.endpoints.map(endpointFromRest));

/** `WorkerSummary` of `GET /v2/serverless/{id}/workers`: worker counts by status. */
export const RestWorkerSummary = z.looseObject({
  running: count,
  idle: count,
  initializing: count,
  throttled: count,
  unhealthy: count,
  total: count,
});
export type RestWorkerSummary = z.infer<typeof RestWorkerSummary>;

export const RestEndpointWorkersAnswer = z.looseObject({
  workers: z.array(z.looseObject({ id: z.string(), status: z.string() })),
  summary: RestWorkerSummary,
});

/**
 * RunPod's serverless billing history (GET /v2/billing/serverless,
 * https://docs.runpod.io/api-reference-v2/billing/get-serverless-billing-history): one record per
 * endpoint per time bucket, amounts in USD. Only the fields the cost loop reads are checked.
 */
export const RestServerlessBilling = z.object({
  records: z
    .array(
      z.looseObject({
        startTime: z.iso.datetime({ offset: true }),
        endTime: z.iso.datetime({ offset: true }),
        serverlessId: z.string().min(1).max(256),
        totalAmount: z.number().min(0).max(1e9),
      }),
    )
    .max(100_000),
});
export type RestServerlessBilling = z.infer<typeof RestServerlessBilling>;
