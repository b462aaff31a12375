// Endpoint management over RunPod's REST API v2 ({baseUrl}/v2/serverless), the API RunPod names as
// the way forward (https://docs.runpod.io/api-reference-v2/overview). Paths, bodies and status
// codes follow its OpenAPI document; see docs/provider.md for where RunPod's pages disagree.
import type { z } from "zod";
import { ProviderError, errorFromRestResponse, type ProviderErrorCode } from "./errors.js";
import type {
  CallContext,
  EndpointManagement,
  HttpMethod,
  KeyIdentity,
  ManagementTransport,
  NewEndpoint,
  RawAnswer,
  WorkersChange,
} from "./management.js";
import { parseBody } from "./parse.js";
import type { ProviderEndpoint } from "./schemas.js";
import {
  RestEndpointAnswer,
  RestEndpointList,
  RestEndpointWorkersAnswer,
  RestServerlessBilling,
  type RestWorkerSummary,
} from "./schemas-rest.js";

// RunPod's documented defaults for a queue-based endpoint's scaler (endpoint-configurations page:
// "Queue delay ... default: 4 seconds"); REST v2 requires `scaling` on create.
const DEFAULT_SCALING = { type: "QUEUE_DELAY", queueDelay: 4 } as const;

// How long the key check's list may stand in for the next listEndpoints.
const PRIMED_MS = 5_000;

export class RestManagement implements EndpointManagement {
  readonly api = "rest" as const;
  readonly #base: string;
  #primed: { at: number; list: Promise<ProviderEndpoint[]> } | undefined;

  constructor(private readonly t: ManagementTransport) {
    this.#base = `${t.baseUrl}/v2/serverless`;
  }

  /**
   * REST v2 has no "who am I" call: a key that may list the account's endpoints is a working key.
   * The answer names no account. The list it fetched answers the next listEndpoints (once, within
   * a few seconds), so a controller tick that checks the key and then lists costs one request.
   */
  async checkKey(): Promise<KeyIdentity> {
    const list = this.#list("checkKey");
    this.#primed = { at: Date.now(), list };
    await list;
    return { via: "rest" };
  }

  listEndpoints(): Promise<ProviderEndpoint[]> {
    const primed = this.#primed;
    this.#primed = undefined;
    if (primed !== undefined && Date.now() - primed.at < PRIMED_MS) return primed.list;
    return this.#list("listEndpoints");
  }

  #list(op: string): Promise<ProviderEndpoint[]> {
    return this.#call({ op }, "GET", this.#base, undefined, RestEndpointList);
  }

  getEndpoint(id: string): Promise<ProviderEndpoint> {
    const ctx = { op: "getEndpoint", endpointId: id };
    return this.#call(ctx, "GET", this.#endpointUrl(ctx), undefined, RestEndpointAnswer);
  }

  /** PATCH with only the fields to change; REST v2 leaves every omitted field as it is. */
  async updateEndpointWorkers(id: string, change: WorkersChange): Promise<ProviderEndpoint> {
    const ctx = { op: "updateEndpointWorkers", endpointId: id };
    const workers = {
      ...(change.workersMin !== undefined && { min: change.workersMin }),
      ...(change.workersMax !== undefined && { max: change.workersMax }),
      ...(change.idleTimeout !== undefined && { idleTimeout: change.idleTimeout }),
    };
    if (workers.min !== undefined && workers.max !== undefined && workers.min > workers.max) {
      throw new ProviderError(
        "BAD_REQUEST",
        `GPU provider updateEndpointWorkers: workersMin ${workers.min} exceeds workersMax ${workers.max}`,
      );
    }
    if (Object.keys(workers).length === 0) return this.getEndpoint(id);
    return this.#call(ctx, "PATCH", this.#endpointUrl(ctx), { workers }, RestEndpointAnswer);
  }

  /** Sets the name and the workers of an existing endpoint (PATCH); other settings stay. */
  renameAndScale(endpoint: ProviderEndpoint): Promise<ProviderEndpoint> {
    const ctx = { op: "saveEndpoint", endpointId: endpoint.id };
    const body = {
      name: endpoint.name,
      workers: { min: endpoint.workersMin, max: endpoint.workersMax, idleTimeout: endpoint.idleTimeout },
    };
    return this.#call(ctx, "PATCH", this.#endpointUrl(ctx), body, RestEndpointAnswer);
  }

  /**
   * POST /v2/serverless (201). Not idempotent, so it is retried only where RunPod provably did not
   * act (a 429, no connection): after a timeout or a 5xx the endpoint may exist, and the next
   * reconcile finds it by its name instead of creating another.
   */
  createEndpoint(spec: NewEndpoint): Promise<ProviderEndpoint> {
    const body = {
      name: spec.name,
      type: "QUEUE",
      templateId: spec.templateId,
      gpu: { pools: spec.gpuIds, ...(spec.gpuCount !== undefined && { count: spec.gpuCount }) },
      workers: { min: spec.workersMin, max: spec.workersMax, idleTimeout: spec.idleTimeout },
      scaling: DEFAULT_SCALING,
    };
    // A 404 here is the template (unknown or not accessible), not an endpoint.
    return this.#call({ op: "createEndpoint" }, "POST", this.#base, body, RestEndpointAnswer, {
      notFound: "BAD_REQUEST",
      notIdempotent: true,
    });
  }

  /** GET /v2/serverless/{id}/workers: worker counts by status, unhealthy ones included. */
  /** The account's serverless billing, hourly buckets over [startMs, endMs) (edges on whole hours). */
  serverlessBilling(startMs: number, endMs: number): Promise<RestServerlessBilling> {
    const q = new URLSearchParams({
      bucketSize: "hour",
      startTime: new Date(startMs).toISOString(),
      endTime: new Date(endMs).toISOString(),
    });
    const url = `${this.t.baseUrl}/v2/billing/serverless?${q.toString()}`;
    return this.#call({ op: "serverlessBilling" }, "GET", url, undefined, RestServerlessBilling);
  }

  async workerSummary(id: string): Promise<RestWorkerSummary> {
    const ctx = { op: "workerSummary", endpointId: id };
    const url = `${this.#endpointUrl(ctx)}/workers`;
    return (await this.#call(ctx, "GET", url, undefined, RestEndpointWorkersAnswer)).summary;
  }

  #endpointUrl(ctx: CallContext & { endpointId: string }): string {
    if (ctx.endpointId === "")
      throw new ProviderError("BAD_REQUEST", `GPU provider ${ctx.op}: empty endpoint id`);
    return `${this.#base}/${encodeURIComponent(ctx.endpointId)}`;
  }

  #call<S extends z.ZodType>(
    ctx: CallContext,
    method: HttpMethod,
    url: string,
    body: unknown,
    schema: S,
    opts: { notFound?: ProviderErrorCode; notIdempotent?: boolean } = {},
  ): Promise<z.output<S>> {
    const handle = (res: RawAnswer): z.output<S> => {
      if (res.status < 200 || res.status > 299) {
        throw errorFromRestResponse(res.status, res.text, {
          op: ctx.op,
          retryAfter: res.headers["retry-after"],
          secret: this.t.secret,
          notFound: opts.notFound ?? "ENDPOINT_NOT_FOUND",
        });
      }
      return parseBody(ctx.op, res.text, schema);
    };
    return this.t.exchange(ctx, method, url, body, handle, { notIdempotent: opts.notIdempotent ?? false });
  }
}
