// The GPU provider's client: RunPod's job API (/run, /status, /cancel, /health) and its endpoint
// management, behind one class. One piece: every call shares the keep-alive pools, the
// redaction of keys and URLs, and the mapping of answers to errors (errors.ts).
import type { Logger } from "pino";
import { HttpRequestError, keepAlivePools, poolFor, send, text as readText } from "../http/client.js";
import type { z } from "zod";
import type { RestServerlessBilling } from "./schemas-rest.js";
import { callApi, observed, type ProviderCall } from "./calls.js";
import { ProviderError, errorFromResponse, redact } from "./errors.js";
import {
  graphqlUnavailable,
  type CallContext,
  type EndpointManagement,
  type HttpMethod,
  type KeyIdentity,
  type ManagementApi,
  type ManagementExchange,
  type RawAnswer,
  type WorkersChange,
} from "./management.js";
import { GraphQLManagement } from "./management-graphql.js";
import { RestManagement } from "./management-rest.js";
import { isProviderJobId } from "./job-id.js";
import { parseBody } from "./parse.js";
import { DEFAULT_RETRY_POLICY, withRetries, type RetryPolicy } from "./retry.js";
import {
  EndpointHealthReport,
  ProviderJob,
  SubmitResponse,
  type ProviderEndpoint,
  type ProviderJobStatus,
} from "./schemas.js";

export interface GpuProviderClientOptions {
  /** Base of the job API; requests go to {apiUrl}/v2/{endpoint}/... (RunPod: https://api.runpod.ai). */
  apiUrl: string;
  /**
   * Base of the management API: {managementUrl}/v2/serverless (REST v2) or {managementUrl}/graphql.
   * RunPod: https://api.runpod.io. Default: apiUrl (a simulator serves both on one port).
   */
  managementUrl?: string;
  /** Which management API manages endpoints. Default "rest" (REST v2). */
  managementApi?: ManagementApi;
  apiKey: string;
  /**
   * The base URL of a self-hosted endpoint (GpuEndpoint spec.baseUrl) by its endpoint id, else
   * undefined: its job API calls go to {base}/run, {base}/status/{id}, ... instead of the provider's.
   */
  endpointBaseUrl?: (endpointId: string) => string | undefined;
  /** Per attempt. Default 10000. */
  timeoutMs?: number;
  /** Total time for retries. Default 30000. */
  retryBudgetMs?: number;
  /** Default 10. */
  maxAttempts?: number;
  /** First backoff ceiling; doubles per retry up to 5000. Default 250. Tests shorten it. */
  retryBaseDelayMs?: number;
  logger?: Logger;
  /**
   * Told of every attempt at the provider (each retry is one), for metrics: which API and
   * operation, the outcome (ok or the error code), how long it took, the HTTP status if any.
   */
  onCall?: (call: ProviderCall) => void;
}

export interface SubmitRequest {
  id: string;
  input: Record<string, unknown>;
  webhook?: string;
  policy?: { executionTimeout?: number; ttl?: number; lowPriority?: boolean };
}

export type { WorkersChange } from "./management.js";

/** The key check of `kubectl media check-key`: which API answered, and why GraphQL did not. */
export interface KeyCheckResult extends KeyIdentity {
  graphqlProblem?: string;
}

/**
 * Client for a RunPod-Serverless-shaped GPU provider. Every call has a timeout, retries only
 * RATE_LIMITED and PROVIDER_UNAVAILABLE within a time budget, validates the answer with zod and
 * fails with a ProviderError. The API key is sent only in the Authorization header and is never
 * logged or put in an error message.
 */
export class GpuProviderClient {
  readonly #apiUrl: string;
  readonly #managementUrl: string;
  readonly #apiKey: string;
  readonly #policy: RetryPolicy;
  readonly #log: Logger | undefined;
  readonly #pools = keepAlivePools();
  readonly #graphqlApi: GraphQLManagement;
  readonly #restApi: RestManagement;
  /** The management API in use (GPU_PROVIDER_MANAGEMENT_API). */
  readonly management: EndpointManagement;
  readonly #onCall: ((call: ProviderCall) => void) | undefined;
  readonly #endpointBaseUrl: ((endpointId: string) => string | undefined) | undefined;

  constructor(opts: GpuProviderClientOptions) {
    this.#apiUrl = baseUrl(opts.apiUrl, "apiUrl");
    this.#managementUrl = baseUrl(opts.managementUrl ?? opts.apiUrl, "managementUrl");
    if (opts.apiKey.trim() === "") throw new Error("GPU provider API key is empty");
    this.#apiKey = opts.apiKey;
    this.#policy = {
      ...DEFAULT_RETRY_POLICY,
      ...(opts.timeoutMs !== undefined && { timeoutMs: opts.timeoutMs }),
      ...(opts.retryBudgetMs !== undefined && { budgetMs: opts.retryBudgetMs }),
      ...(opts.maxAttempts !== undefined && { maxAttempts: Math.max(1, opts.maxAttempts) }),
      ...(opts.retryBaseDelayMs !== undefined && { baseDelayMs: opts.retryBaseDelayMs }),
    };
    this.#log = opts.logger?.child({ component: "gpu-provider-client" });
    const transport = { baseUrl: this.#managementUrl, secret: this.#apiKey, exchange: this.#exchange };
    this.#graphqlApi = new GraphQLManagement(transport);
    this.#restApi = new RestManagement(transport);
    this.management = (opts.managementApi ?? "rest") === "rest" ? this.#restApi : this.#graphqlApi;
    this.#onCall = opts.onCall;
    this.#endpointBaseUrl = opts.endpointBaseUrl;
  }

  /**
   * Submits a job. RunPod ignores `id` and makes up its own, so a second POST of the same job is a
   * second (billed) run: /run is retried only where the provider provably did not take the request
   * (a 4xx such as 429, or no connection at all). A failure whose `mayHaveBeenAccepted` is true
   * (5xx, timeout, reset after sending) leaves the job possibly running: the caller must treat the
   * submission as unconfirmed, never resend it.
   */
  async submit(
    endpointId: string,
    req: SubmitRequest,
    opts: {
      signal?: AbortSignal;
      /** False: a 429 is not retried here but thrown at once (the caller waits out Retry-After). */
      retryRateLimited?: boolean;
    } = {},
  ): Promise<{ id: string; status: ProviderJobStatus }> {
    if (req.id === "") throw new ProviderError("BAD_REQUEST", "GPU provider submit: empty job id");
    // A self-hosted endpoint gets no webhook (its jobs are polled, providerReadDue): the callback
    // URL's token stays with the provider, and runpod-python's local server posts no job id to it.
    const webhook = this.#selfHosted(endpointId) ? undefined : req.webhook;
    const body = {
      id: req.id,
      input: req.input,
      ...(webhook !== undefined && { webhook }),
      ...(req.policy !== undefined && { policy: req.policy }),
    };
    const res = await this.#jobApi({ op: "submit", endpointId }, "POST", `/run`, SubmitResponse, body, {
      retryIf: (err) =>
        !err.mayHaveBeenAccepted && (opts.retryRateLimited !== false || err.code !== "RATE_LIMITED"),
      ...(opts.signal !== undefined && { signal: opts.signal }),
    });
    return { id: res.id, status: res.status };
  }

  async status(endpointId: string, jobId: string): Promise<ProviderJob> {
    const path = `/status/${jobIdSegment(jobId)}`;
    // RunPod documents GET; runpod-python's local API server (rp_fastapi.py) serves POST only.
    const method = this.#selfHosted(endpointId) ? "POST" : "GET";
    return this.#jobApi({ op: "status", endpointId, jobId }, method, path, ProviderJob);
  }

  async cancel(endpointId: string, jobId: string): Promise<ProviderJob> {
    const path = `/cancel/${jobIdSegment(jobId)}`;
    return this.#jobApi({ op: "cancel", endpointId, jobId }, "POST", path, ProviderJob);
  }

  /**
   * /health, plus REST v2's worker summary while jobs are queued: /health documents only idle and
   * running workers, and the summary says whether the others are initializing, throttled or
   * unhealthy (crash-looping), which is what explains a queue that does not drain. At rest it is
   * not read, so an idle endpoint costs one call per check. Over GraphQL those counts stay unknown.
   */
  async health(endpointId: string): Promise<EndpointHealthReport> {
    const report = await this.#jobApi({ op: "health", endpointId }, "GET", "/health", EndpointHealthReport);
    if (this.management !== this.#restApi || report.jobs.inQueue === 0) return report;
    try {
      const summary = await this.#restApi.workerSummary(endpointId);
      const { initializing, throttled, unhealthy } = summary;
      return { ...report, workers: { ...report.workers, initializing, throttled, unhealthy } };
    } catch (err) {
      this.#log?.debug(
        { endpointId, code: err instanceof ProviderError ? err.code : undefined },
        "worker summary unavailable; worker states beyond idle and running stay unknown",
      );
      return report;
    }
  }

  /**
   * The provider's billing of its serverless endpoints, hourly, over [startMs, endMs): REST v2
   * only (GraphQL has no billing history).
   */
  serverlessBilling(startMs: number, endMs: number): Promise<RestServerlessBilling> {
    return this.#restApi.serverlessBilling(startMs, endMs);
  }

  /** The key check over the management API in use. REST v2 names no account. */
  checkKey(): Promise<KeyIdentity> {
    return this.management.checkKey();
  }

  /**
   * The runbook's key check, GraphQL `query { myself { id } }`; when GraphQL is not there (retired,
   * moved, down) the key is checked over REST v2 instead. The answer says which API answered.
   */
  async checkKeyAnyApi(): Promise<KeyCheckResult> {
    try {
      return await this.#graphqlApi.checkKey();
    } catch (err) {
      if (!(err instanceof ProviderError) || !graphqlUnavailable(err)) throw err;
      return { ...(await this.#restApi.checkKey()), graphqlProblem: err.message };
    }
  }

  listEndpoints(): Promise<ProviderEndpoint[]> {
    return this.management.listEndpoints();
  }

  getEndpoint(endpointId: string): Promise<ProviderEndpoint> {
    return this.management.getEndpoint(endpointId);
  }

  /**
   * Without an id: creates the endpoint (name, templateId, gpuIds as a comma list, gpuCount,
   * workers). With one: GraphQL replaces the whole endpoint (pass an object read from
   * listEndpoints); REST v2 sets its name and workers and keeps the rest.
   */
  saveEndpoint(endpoint: ProviderEndpoint): Promise<ProviderEndpoint> {
    if (endpoint.id === undefined || endpoint.id === "") {
      const gpuIds = typeof endpoint.gpuIds === "string" ? endpoint.gpuIds.split(",") : [];
      return this.management.createEndpoint({
        name: endpoint.name,
        templateId: String(endpoint.templateId ?? ""),
        gpuIds: gpuIds.map((g) => g.trim()).filter((g) => g !== ""),
        workersMin: endpoint.workersMin,
        workersMax: endpoint.workersMax,
        idleTimeout: endpoint.idleTimeout,
        ...(typeof endpoint.gpuCount === "number" && { gpuCount: endpoint.gpuCount }),
      });
    }
    return this.management === this.#restApi
      ? this.#restApi.renameAndScale(endpoint)
      : this.#graphqlApi.saveEndpoint(endpoint);
  }

  /** Changes only the given worker settings (REST v2: a PATCH; GraphQL: read, change, write all). */
  updateEndpointWorkers(endpointId: string, change: WorkersChange): Promise<ProviderEndpoint> {
    return this.management.updateEndpointWorkers(endpointId, change);
  }

  async #jobApi<S extends z.ZodType>(
    ctx: CallContext & { endpointId: string },
    method: "GET" | "POST",
    suffix: string,
    schema: S,
    body?: unknown,
    call: { retryIf?: (err: ProviderError) => boolean; signal?: AbortSignal } = {},
  ): Promise<z.output<S>> {
    if (ctx.endpointId === "")
      throw new ProviderError("BAD_REQUEST", `GPU provider ${ctx.op}: empty endpoint id`);
    const selfHosted = this.#selfHosted(ctx.endpointId);
    const url = selfHosted
      ? `${selfHosted.base}${suffix}`
      : `${this.#apiUrl}/v2/${enc(ctx.endpointId)}${suffix}`;
    const withKey = !selfHosted || selfHosted.providerOrigin;
    return this.#withRetries(
      ctx,
      async (timeoutMs) => {
        const res = await this.#send(ctx.op, method, url, body, timeoutMs, call.signal, withKey);
        if (res.status < 200 || res.status > 299) {
          throw errorFromResponse(res.status, res.text, {
            op: ctx.op,
            ...(ctx.jobId !== undefined && { jobId: ctx.jobId }),
            retryAfter: res.headers["retry-after"],
            secret: this.#apiKey,
          });
        }
        // A 2xx whose body we cannot read: the provider acted, we just do not know the details.
        return parseBody(ctx.op, res.text, schema, { mayHaveBeenAccepted: true });
      },
      call.retryIf,
    );
  }

  /**
   * A self-hosted endpoint's base, and whether it is at the provider's own origin: the API key is
   * sent there only (docs/design.md, "Self-hosted endpoints"), never to a URL a GpuEndpoint names.
   */
  #selfHosted(endpointId: string): { base: string; providerOrigin: boolean } | undefined {
    const configured = this.#endpointBaseUrl?.(endpointId);
    if (configured === undefined) return undefined;
    const base = baseUrl(configured, "endpoint baseUrl");
    return { base, providerOrigin: new URL(base).origin === new URL(this.#apiUrl).origin };
  }

  readonly #exchange: ManagementExchange = (ctx, method, url, body, handle, opts) =>
    this.#withRetries(
      ctx,
      async (timeoutMs) => handle(await this.#send(ctx.op, method, url, body, timeoutMs)),
      // Not idempotent (a create): retried only where the provider provably did not act on it.
      opts?.notIdempotent === true ? (err) => !err.mayHaveBeenAccepted : undefined,
    );

  #withRetries<T>(
    ctx: CallContext,
    attempt: (timeoutMs: number) => Promise<T>,
    retryIf?: (err: ProviderError) => boolean,
  ): Promise<T> {
    return withRetries(this.#policy, observed(this.#onCall, callApi(ctx.op), ctx.op, attempt), {
      ...(retryIf !== undefined && { retryIf }),
      onRetry: (err, attemptNo, delayMs) =>
        this.#log?.debug(
          {
            op: ctx.op,
            endpointId: ctx.endpointId,
            jobId: ctx.jobId,
            attempt: attemptNo,
            code: err.code,
            status: err.status,
            delayMs,
          },
          "GPU provider call failed, retrying",
        ),
    });
  }

  /** One HTTP exchange. Network failures and timeouts become retryable PROVIDER_UNAVAILABLE. */
  async #send(
    op: string,
    method: HttpMethod,
    url: string,
    body: unknown,
    timeoutMs: number,
    signal?: AbortSignal,
    withKey = true,
  ): Promise<RawAnswer> {
    if (signal?.aborted)
      throw new ProviderError("PROVIDER_UNAVAILABLE", `GPU provider ${op}: aborted before sending`, {
        retryable: false,
      });
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    const onAbort = () => abort.abort();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const res = await send(url, {
        agent: poolFor(this.#pools, url),
        method,
        headers: {
          ...(withKey && { authorization: `Bearer ${this.#apiKey}` }),
          accept: "application/json",
          ...(body !== undefined && { "content-type": "application/json" }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal: abort.signal,
      });
      // Always read the body: the connection goes back to the pool only once it is consumed.
      const text = await readText(res.body);
      return { status: res.statusCode, headers: res.headers, text };
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      // Failed before its connection was open: the provider cannot have seen it.
      const notSent = err instanceof HttpRequestError && !err.sent;
      if (abort.signal.aborted) {
        throw new ProviderError(
          "PROVIDER_UNAVAILABLE",
          signal?.aborted
            ? `GPU provider ${op}: aborted while waiting for the answer`
            : `GPU provider ${op}: no answer within ${timeoutMs} ms`,
          { mayHaveBeenAccepted: !notSent },
        );
      }
      const reason = typeof code === "string" ? code : err instanceof Error ? err.message : String(err);
      throw new ProviderError(
        "PROVIDER_UNAVAILABLE",
        `GPU provider ${op}: network error: ${redact(reason, this.#apiKey)}`,
        { mayHaveBeenAccepted: !notSent && !(typeof code === "string" && NOT_SENT_CODES.has(code)) },
      );
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }
}

/**
 * Network errors raised before a single byte of the request left this process: the provider cannot
 * have acted on it. Everything else (a reset, a socket closed mid-answer) may follow the work.
 */
const NOT_SENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ENETUNREACH", "EHOSTUNREACH"]);

function enc(segment: string): string {
  return encodeURIComponent(segment);
}

/** A job id as a path segment, refused before any request when it is not of a job id's shape. */
function jobIdSegment(id: string): string {
  if (!isProviderJobId(id))
    throw new ProviderError("BAD_REQUEST", "not a provider job id", { retryable: false });
  return enc(id);
}

function baseUrl(value: string, name: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`GPU provider ${name} is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new Error(`GPU provider ${name} must be http(s)`);
  if (url.username !== "" || url.password !== "" || url.search !== "" || url.hash !== "")
    throw new Error(`GPU provider ${name} may carry no credentials, query or fragment`);
  return url.toString().replace(/\/+$/, "");
}
