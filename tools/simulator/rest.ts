import type { IncomingMessage } from "node:http";
import { z } from "zod";
import type { SimContext } from "./context.js";
import { carriedOver, containerOf, type Container } from "./endpoints.js";
import type { EndpointConfig } from "./engine.js";
import { json, readJson, type Reply } from "./http.js";
import { inferWorkload } from "./outputs.js";

// RunPod's REST API v2 for serverless endpoints, as its OpenAPI document describes it
// (https://docs.runpod.io/api-reference-v2/overview): GET/POST /v2/serverless, GET/PATCH/DELETE
// /v2/serverless/{id}, GET /v2/serverless/{id}/workers. PATCH changes only the fields sent.
// Errors are RFC 9457 problems; a validation failure names the field in `errors`.

const LIMIT = 1024 * 1024;

const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  422: "Unprocessable Entity",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

export function problem(
  status: number,
  detail: string,
  errors?: string[],
  headers: Record<string, string> = {},
): Reply {
  return json(
    status,
    { title: TITLES[status] ?? "Error", status, detail, ...(errors !== undefined && { errors }) },
    { "content-type": "application/problem+json", ...headers },
  );
}

// ---- request bodies (CreateEndpointRequest, UpdateEndpointRequest) ----

const cudaVersion = z.string().regex(/^\d+\.\d+$/);
const Workers = z.strictObject({
  min: z.int().min(0).optional(),
  max: z.int().min(0).optional(),
  idleTimeout: z.int().min(1).max(3600).optional(),
});
const Scaling = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("QUEUE_DELAY"), queueDelay: z.number().min(0.5) }),
  z.strictObject({ type: z.literal("REQUEST_COUNT"), requestCount: z.int().min(1) }),
]);
const GpuFields = {
  pools: z.array(z.string().min(1)).min(1),
  excludedTypes: z.array(z.string().min(1)).optional(),
  count: z.int().min(1).optional(),
  allowedCudaVersions: z.array(cudaVersion).optional(),
};
const GpuCreate = z.strictObject({ ...GpuFields, minCudaVersion: cudaVersion.optional() });
const GpuUpdate = z.strictObject({
  ...GpuFields,
  pools: GpuFields.pools.optional(),
  minCudaVersion: z
    .string()
    .regex(/^$|^\d+\.\d+$/)
    .optional(),
});
const Cpu = z.array(z.strictObject({ id: z.string().min(1), vcpuCount: z.int().min(1) })).min(1);
const Container = {
  image: z.string().min(1).optional(),
  args: z.string().optional(),
  disk: z.int().min(1).optional(),
  env: z.record(z.string(), z.string()).optional(),
  ports: z.array(z.string()).optional(),
  registry: z.string().nullable().optional(),
};
const Common = {
  ...Container,
  cpu: Cpu.optional(),
  dataCenterIds: z.array(z.string()).optional(),
  networkVolumes: z.array(z.string()).optional(),
  timeout: z.int().min(1).optional(),
  flashboot: z.enum(["OFF", "FLASHBOOT", "PRIORITY_FLASHBOOT"]).optional(),
  templateId: z.string().min(1).optional(),
  workers: Workers.optional(),
};
const CreateRequest = z.strictObject({
  ...Common,
  name: z.string().min(1),
  type: z.enum(["QUEUE", "LOAD_BALANCER"]),
  scaling: Scaling,
  gpu: GpuCreate.optional(),
});
const UpdateRequest = z.strictObject({
  ...Common,
  name: z.string().min(1).optional(),
  scaling: Scaling.optional(),
  gpu: GpuUpdate.optional(),
});
type UpdateRequest = z.infer<typeof UpdateRequest>;

/** zod issues as JSON-path messages, like RunPod's `"$: additional properties 'bogus' not allowed"`. */
function fieldErrors(error: z.ZodError): string[] {
  return error.issues.map((i) => {
    const path = ["$", ...i.path.map(String)].join(".");
    if (i.code === "unrecognized_keys")
      return `${path}: additional properties ${i.keys.map((k) => `'${k}'`).join(", ")} not allowed`;
    return `${path}: ${i.message}`;
  });
}

const invalid = (errors: string[]): Reply => problem(400, "request validation failed", errors);

// ---- the Endpoint resource ----

/** The stored configuration as REST v2's `Endpoint`. */
function restView(config: EndpointConfig, jobApiBase: string): Record<string, unknown> {
  const s = config.settings;
  const id = config.id;
  const queue = s.type !== "LB";
  const scalerType = s.scalerType === "REQUEST_COUNT" ? "REQUEST_COUNT" : "QUEUE_DELAY";
  const scalerValue = typeof s.scalerValue === "number" ? s.scalerValue : 4;
  const cpu = Array.isArray(s.cpu) ? (s.cpu as Array<{ id: string; vcpuCount: number }>) : undefined;
  const pools = typeof s.gpuIds === "string" && s.gpuIds !== "" ? s.gpuIds.split(",") : [];
  const cuda = typeof s.allowedCudaVersions === "string" ? s.allowedCudaVersions.split(",") : [];
  const volumes = (Array.isArray(s.networkVolumeIds) ? s.networkVolumeIds : [])
    .map((v: unknown) => (v as { networkVolumeId?: unknown }).networkVolumeId)
    .filter((v): v is string => typeof v === "string");
  if (
    typeof s.networkVolumeId === "string" &&
    s.networkVolumeId !== "" &&
    !volumes.includes(s.networkVolumeId)
  )
    volumes.unshift(s.networkVolumeId);
  const c = containerOf(config);
  const run = `${jobApiBase}/v2/${id}`;
  // An idle timeout does not apply to a queue endpoint scaling on request count: omitted then.
  const idle = queue && scalerType === "REQUEST_COUNT" ? {} : { idleTimeout: config.idleTimeout };
  return {
    id,
    name: config.name,
    type: queue ? "QUEUE" : "LOAD_BALANCER",
    requestUrls: queue
      ? {
          run: `${run}/run`,
          runSync: `${run}/runsync`,
          status: `${run}/status/{job_id}`,
          stream: `${run}/stream/{job_id}`,
          cancel: `${run}/cancel/{job_id}`,
          retry: `${run}/retry/{job_id}`,
          purgeQueue: `${run}/purge-queue`,
          health: `${run}/health`,
        }
      : { base: run, health: `${run}/ping` },
    image: c.image ?? `simulator/${config.workload}-worker:latest`,
    args: c.args ?? "",
    disk: c.disk ?? 20,
    ports: c.ports ?? [],
    env: c.env ?? {},
    registry: c.registry ?? null,
    ...(cpu !== undefined
      ? { cpu: cpu.map((x) => ({ ...x, memory: x.vcpuCount * 2 })) }
      : {
          gpu: {
            pools,
            count: typeof s.gpuCount === "number" ? s.gpuCount : 1,
            allowedCudaVersions: cuda.filter((v) => v !== ""),
            minCudaVersion:
              typeof s.minCudaVersion === "string" && s.minCudaVersion !== "" ? s.minCudaVersion : null,
          },
        }),
    workers: { min: config.workersMin, max: config.workersMax, ...idle },
    scaling:
      scalerType === "QUEUE_DELAY"
        ? { type: scalerType, queueDelay: scalerValue }
        : { type: scalerType, requestCount: scalerValue },
    dataCenterIds: typeof s.locations === "string" && s.locations !== "" ? s.locations.split(",") : [],
    networkVolumes: volumes,
    timeout: config.executionTimeoutMs,
    flashboot: typeof s.flashBootType === "string" ? s.flashBootType : "OFF",
    createdAt: typeof s.createdAt === "string" ? s.createdAt : new Date(0).toISOString(),
  };
}

/** Applies a validated create or update body onto a configuration (the same fields GraphQL stores). */
function apply(config: EndpointConfig, body: UpdateRequest & { type?: string }): EndpointConfig {
  const settings = { ...config.settings };
  const next: EndpointConfig = { ...config, settings };
  if (body.name !== undefined) next.name = body.name;
  if (body.type !== undefined) settings.type = body.type === "LOAD_BALANCER" ? "LB" : "QB";
  if (body.workers?.min !== undefined) next.workersMin = body.workers.min;
  if (body.workers?.max !== undefined) next.workersMax = body.workers.max;
  if (body.workers?.idleTimeout !== undefined) next.idleTimeout = body.workers.idleTimeout;
  if (body.scaling !== undefined) {
    settings.scalerType = body.scaling.type;
    settings.scalerValue =
      body.scaling.type === "QUEUE_DELAY" ? body.scaling.queueDelay : body.scaling.requestCount;
  }
  if (body.gpu !== undefined) {
    if (body.gpu.pools !== undefined) {
      settings.gpuIds = body.gpu.pools.join(",");
      settings.excludedTypes = body.gpu.excludedTypes ?? [];
    }
    if (body.gpu.count !== undefined) settings.gpuCount = body.gpu.count;
    if (body.gpu.allowedCudaVersions !== undefined)
      settings.allowedCudaVersions = body.gpu.allowedCudaVersions.join(",");
    if (body.gpu.minCudaVersion !== undefined) settings.minCudaVersion = body.gpu.minCudaVersion || null;
  }
  if (body.cpu !== undefined) settings.cpu = body.cpu;
  if (body.dataCenterIds !== undefined) settings.locations = body.dataCenterIds.join(",");
  if (body.networkVolumes !== undefined) {
    settings.networkVolumeIds = body.networkVolumes.map((networkVolumeId) => ({ networkVolumeId }));
    settings.networkVolumeId = body.networkVolumes[0] ?? null;
  }
  if (body.timeout !== undefined) next.executionTimeoutMs = body.timeout;
  if (body.flashboot !== undefined) settings.flashBootType = body.flashboot;
  if (body.templateId !== undefined) settings.templateId = body.templateId;
  const container: Container = { ...containerOf(config) };
  for (const k of ["image", "args", "disk", "env", "ports", "registry"] as const) {
    if (body[k] !== undefined) (container as Record<string, unknown>)[k] = body[k];
  }
  settings.container = container;
  return next;
}

/** Rules the schema alone does not express; each names the field. */
function crossFieldErrors(config: EndpointConfig, body: UpdateRequest): string[] {
  const errors: string[] = [];
  if (config.workersMin > config.workersMax)
    errors.push(`$.workers.min: must not exceed workers.max (${config.workersMin} > ${config.workersMax})`);
  const s = config.settings;
  if (s.type !== "LB" && s.scalerType === "REQUEST_COUNT" && body.workers?.idleTimeout !== undefined)
    errors.push("$.workers.idleTimeout: not applicable to a queue endpoint scaling on requestCount");
  if (s.type === "LB" && s.scalerType !== "REQUEST_COUNT")
    errors.push("$.scaling.type: a LOAD_BALANCER endpoint scales on REQUEST_COUNT");
  const cuda = body.gpu?.allowedCudaVersions ?? [];
  if (cuda.length > 0 && body.gpu?.minCudaVersion !== undefined && body.gpu.minCudaVersion !== "")
    errors.push("$.gpu.minCudaVersion: mutually exclusive with a non-empty gpu.allowedCudaVersions");
  if (body.gpu?.excludedTypes !== undefined && body.gpu.pools === undefined)
    errors.push("$.gpu.excludedTypes: requires gpu.pools");
  return errors;
}

// ---- routes ----

export async function handleRest(
  ctx: SimContext,
  req: IncomingMessage,
  parts: string[],
  jobApiBase: string,
): Promise<Reply> {
  const method = req.method ?? "GET";
  const { engine } = ctx;
  const [id, sub, ...rest] = parts;
  if (id === undefined) {
    if (method === "GET")
      return json(200, { endpoints: engine.endpoints().map((c) => restView(c, jobApiBase)) });
    if (method === "POST") return create(ctx, await readJson(req, LIMIT), jobApiBase);
    return problem(405, "The requested method is not allowed for this path.");
  }
  const config = engine.endpoint(id);
  if (sub === "workers" && rest.length === 0) {
    if (method !== "GET") return problem(405, "The requested method is not allowed for this path.");
    if (config === undefined) return problem(404, "resource not found");
    return json(200, workersView(ctx, config));
  }
  if (sub !== undefined) return problem(404, "resource not found");
  if (!["GET", "PATCH", "DELETE"].includes(method))
    return problem(405, "The requested method is not allowed for this path.");
  // Also what RunPod answers for another account's endpoint ("not found or not accessible").
  if (config === undefined) return problem(404, "resource not found");
  if (method === "GET") return json(200, restView(config, jobApiBase));
  if (method === "DELETE") {
    // Unlike GraphQL, no need to scale to zero first: workers end, queued and running jobs are cancelled.
    engine.removeEndpoint(id);
    return json(204);
  }
  const body = UpdateRequest.safeParse((await readJson(req, LIMIT)) ?? {});
  if (!body.success) return invalid(fieldErrors(body.error));
  const isCpu = Array.isArray(config.settings.cpu);
  if (body.data.gpu !== undefined && body.data.cpu !== undefined)
    return invalid(["$: gpu and cpu are mutually exclusive"]);
  if (body.data.gpu !== undefined && isCpu)
    return invalid(["$.gpu: a CPU endpoint cannot take a GPU selection"]);
  if (body.data.cpu !== undefined && !isCpu)
    return invalid(["$.cpu: a GPU endpoint cannot take a CPU selection"]);
  const next = apply(config, body.data);
  const errors = crossFieldErrors(next, body.data);
  if (errors.length > 0) return invalid(errors);
  next.settings = { ...next.settings, ...carriedOver(config), container: next.settings.container };
  engine.upsertEndpoint(next);
  return json(200, restView(next, jobApiBase));
}

function create(ctx: SimContext, raw: unknown, jobApiBase: string): Reply {
  const parsed = CreateRequest.safeParse(raw ?? {});
  if (!parsed.success) return invalid(fieldErrors(parsed.error));
  const body = parsed.data;
  if ((body.gpu === undefined) === (body.cpu === undefined))
    return invalid(["$: exactly one of gpu or cpu is required"]);
  if (body.image === undefined && body.templateId === undefined)
    return invalid(["$.image: required unless templateId is set"]);
  const blank: EndpointConfig = {
    id: ctx.idRng.token(14),
    name: body.name,
    workload: inferWorkload(body.name),
    // REST v2's create defaults (CreateEndpointRequest): min 0, max 3, idle 10 s, timeout 300 s.
    workersMin: 0,
    workersMax: 3,
    idleTimeout: 10,
    executionTimeoutMs: 300_000,
    settings: {
      templateId: null,
      gpuIds: null,
      gpuCount: 1,
      locations: null,
      networkVolumeId: null,
      networkVolumeIds: [],
      minCudaVersion: null,
      allowedCudaVersions: null,
      flashBootType: "OFF",
      ...carriedOver(undefined),
    },
  };
  const config = apply(blank, body);
  const errors = crossFieldErrors(config, body);
  if (errors.length > 0) return invalid(errors);
  ctx.engine.upsertEndpoint(config);
  return json(201, restView(config, jobApiBase));
}

/** `ListEndpointWorkersResponse`: one entry per active worker and the counts by status. */
function workersView(ctx: SimContext, config: EndpointConfig): Record<string, unknown> {
  const STATUS = {
    initializing: "INITIALIZING",
    idle: "IDLE",
    running: "RUNNING",
    unhealthy: "UNHEALTHY",
  } as const;
  const version = config.settings.version ?? 1;
  const workers = ctx.engine.workers(config.id).map((w) => ({
    id: w.id,
    status: STATUS[w.state],
    isStale: false,
    version,
    gpuCount: typeof config.settings.gpuCount === "number" ? config.settings.gpuCount : 1,
    image: containerOf(config).image ?? `simulator/${config.workload}-worker:latest`,
    uptimeSeconds: null,
    gpuTypeId: null,
    dataCenterId: null,
    startedAt: null,
  }));
  const count = (status: string) => workers.filter((w) => w.status === status).length;
  return {
    endpointVersion: version,
    summary: {
      running: count("RUNNING"),
      idle: count("IDLE"),
      initializing: count("INITIALIZING"),
      // The simulator's workers are never throttled; unhealthy under the crashLoopWorkers fault.
      throttled: 0,
      unhealthy: count("UNHEALTHY"),
      total: workers.length,
    },
    workers,
  };
}
