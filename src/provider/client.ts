import type { Logger } from "pino";
import { request, type Dispatcher } from "undici";
import type { z } from "zod";
import { ProviderError, errorFromGraphQL, errorFromResponse, redact } from "./errors.js";
import { DEFAULT_RETRY_POLICY, withRetries, type RetryPolicy } from "./retry.js";
import {
  ENDPOINT_FIELDS,
  ENDPOINT_SELECTION,
  EndpointHealthReport,
  GraphQLResponse,
  MyselfEndpoints,
  MyselfId,
  ProviderJob,
  SavedEndpoint,
  SubmitResponse,
  type ProviderEndpoint,
  type ProviderJobStatus,
} from "./schemas.js";

export interface GpuProviderClientOptions {
  /** Base of the job API; requests go to {apiUrl}/v2/{endpoint}/... (RunPod: https://api.runpod.ai). */
  apiUrl: string;
  /** Base of the management API; requests go to {managementUrl}/graphql. Default: apiUrl. */
  managementUrl?: string;
  apiKey: string;
  /** Per attempt. Default 10000. */
  timeoutMs?: number;
  /** Total time for retries. Default 30000. */
  retryBudgetMs?: number;
  /** Default 10. */
  maxAttempts?: number;
  /** First backoff ceiling; doubles per retry up to 5000. Default 250. Tests shorten it. */
  retryBaseDelayMs?: number;
  logger?: Logger;
  dispatcher?: Dispatcher;
}

export interface SubmitRequest {
  id: string;
  input: Record<string, unknown>;
  webhook?: string;
  policy?: { executionTimeout?: number; ttl?: number };
}

export interface WorkersChange {
  workersMin?: number;
  workersMax?: number;
  idleTimeout?: number;
}

const CHECK_KEY_QUERY = "query { myself { id } }";
const LIST_ENDPOINTS_QUERY = `query Endpoints { myself { endpoints { ${ENDPOINT_SELECTION} } } }`;
const SAVE_ENDPOINT_MUTATION = `mutation SaveEndpoint($input: EndpointInput!) { saveEndpoint(input: $input) { ${ENDPOINT_SELECTION} } }`;

interface CallContext {
  op: string;
  endpointId?: string;
  jobId?: string;
}

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
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
  readonly #dispatcher: Dispatcher | undefined;

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
    this.#dispatcher = opts.dispatcher;
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
    opts: { signal?: AbortSignal } = {},
  ): Promise<{ id: string; status: ProviderJobStatus }> {
    if (req.id === "") throw new ProviderError("BAD_REQUEST", "GPU provider submit: empty job id");
    const body = {
      id: req.id,
      input: req.input,
      ...(req.webhook !== undefined && { webhook: req.webhook }),
      ...(req.policy !== undefined && { policy: req.policy }),
    };
    const res = await this.#jobApi({ op: "submit", endpointId }, "POST", `/run`, SubmitResponse, body, {
      retryIf: (err) => !err.mayHaveBeenAccepted,
      ...(opts.signal !== undefined && { signal: opts.signal }),
    });
    return { id: res.id, status: res.status };
  }

  status(endpointId: string, jobId: string): Promise<ProviderJob> {
    return this.#jobApi({ op: "status", endpointId, jobId }, "GET", `/status/${enc(jobId)}`, ProviderJob);
  }

  cancel(endpointId: string, jobId: string): Promise<ProviderJob> {
    return this.#jobApi({ op: "cancel", endpointId, jobId }, "POST", `/cancel/${enc(jobId)}`, ProviderJob);
  }

  health(endpointId: string): Promise<EndpointHealthReport> {
    return this.#jobApi({ op: "health", endpointId }, "GET", "/health", EndpointHealthReport);
  }

  /**
   * The key check (docs/design.md, GPU provider APIs). A key that authenticates but has no identity
   * counts as invalid.
   */
  async checkKey(): Promise<{ accountId: string }> {
    const data = await this.#graphql({ op: "checkKey" }, CHECK_KEY_QUERY, undefined, MyselfId);
    if (data.myself === null) {
      throw new ProviderError("INVALID_API_KEY", "GPU provider checkKey: the key has no account");
    }
    return { accountId: data.myself.id };
  }

  async listEndpoints(): Promise<ProviderEndpoint[]> {
    const data = await this.#graphql(
      { op: "listEndpoints" },
      LIST_ENDPOINTS_QUERY,
      undefined,
      MyselfEndpoints,
    );
    if (data.myself === null) {
      throw new ProviderError("INVALID_API_KEY", "GPU provider listEndpoints: the key has no account");
    }
    return data.myself.endpoints ?? [];
  }

  /**
   * saveEndpoint is a full replace: every field of ENDPOINT_FIELDS that `endpoint` carries is sent
   * back, so pass an object read from listEndpoints. Fields outside that set are not sent (the
   * provider's EndpointInput would reject them).
   */
  async saveEndpoint(endpoint: ProviderEndpoint): Promise<ProviderEndpoint> {
    const input: Record<string, unknown> = {};
    for (const field of ENDPOINT_FIELDS) {
      const value = endpoint[field];
      if (value === undefined) continue;
      // Read as [{networkVolumeId, dataCenterId?}], written as [{networkVolumeId}] (runpodctl).
      input[field] =
        field === "networkVolumeIds" && Array.isArray(value)
          ? value.map((v: unknown) => ({
              networkVolumeId: (v as { networkVolumeId?: unknown }).networkVolumeId,
            }))
          : value;
    }
    const ctx = { op: "saveEndpoint", endpointId: endpoint.id };
    const data = await this.#graphql(ctx, SAVE_ENDPOINT_MUTATION, { input }, SavedEndpoint);
    if (data.saveEndpoint === null) {
      throw new ProviderError("BAD_RESPONSE", "GPU provider saveEndpoint: no endpoint in the answer");
    }
    return data.saveEndpoint;
  }

  /** Read, change, write back every field: the only safe way to change workers with a full replace. */
  async updateEndpointWorkers(endpointId: string, change: WorkersChange): Promise<ProviderEndpoint> {
    const current = (await this.listEndpoints()).find((e) => e.id === endpointId);
    if (current === undefined) {
      throw new ProviderError(
        "ENDPOINT_NOT_FOUND",
        `GPU provider updateEndpointWorkers: no endpoint ${endpointId}`,
      );
    }
    const next: ProviderEndpoint = { ...current };
    if (change.workersMin !== undefined) next.workersMin = change.workersMin;
    if (change.workersMax !== undefined) next.workersMax = change.workersMax;
    if (change.idleTimeout !== undefined) next.idleTimeout = change.idleTimeout;
    if (next.workersMin > next.workersMax) {
      throw new ProviderError(
        "BAD_REQUEST",
        `GPU provider updateEndpointWorkers: workersMin ${next.workersMin} exceeds workersMax ${next.workersMax}`,
      );
    }
    return this.saveEndpoint(next);
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
    const url = `${this.#apiUrl}/v2/${enc(ctx.endpointId)}${suffix}`;
    return this.#withRetries(
      ctx,
      async (timeoutMs) => {
        const res = await this.#send(ctx.op, method, url, body, timeoutMs, call.signal);
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

  async #graphql<S extends z.ZodType>(
    ctx: CallContext,
    query: string,
    variables: Record<string, unknown> | undefined,
    dataSchema: S,
  ): Promise<z.output<S>> {
    const url = `${this.#managementUrl}/graphql`;
    const body = variables === undefined ? { query } : { query, variables };
    return this.#withRetries(ctx, async (timeoutMs) => {
      const res = await this.#send(ctx.op, "POST", url, body, timeoutMs);
      const parsed =
        res.status >= 200 && res.status <= 400 ? GraphQLResponse.safeParse(safeJson(res.text)) : undefined;
      // GraphQL errors ride on 200 (and on 400 for validation); map them by message.
      if (parsed?.success && parsed.data.errors !== undefined && parsed.data.errors.length > 0) {
        const err = errorFromGraphQL(
          parsed.data.errors.map((e) => e.message),
          { op: ctx.op, secret: this.#apiKey },
        );
        throw res.status === 400 && err.code === "PROVIDER_UNAVAILABLE"
          ? new ProviderError("BAD_REQUEST", err.message, { status: 400 })
          : err;
      }
      if (res.status < 200 || res.status > 299) {
        throw errorFromResponse(res.status, res.text, {
          op: ctx.op,
          retryAfter: res.headers["retry-after"],
          secret: this.#apiKey,
        });
      }
      if (!parsed?.success)
        throw new ProviderError("BAD_RESPONSE", `GPU provider ${ctx.op}: answer is not GraphQL JSON`);
      const data = dataSchema.safeParse(parsed.data.data);
      if (!data.success) throw badShape(ctx.op, data.error);
      return data.data;
    });
  }

  #withRetries<T>(
    ctx: CallContext,
    attempt: (timeoutMs: number) => Promise<T>,
    retryIf?: (err: ProviderError) => boolean,
  ): Promise<T> {
    return withRetries(this.#policy, attempt, {
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
    method: "GET" | "POST",
    url: string,
    body: unknown,
    timeoutMs: number,
    signal?: AbortSignal,
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
      const res = await request(url, {
        method,
        headers: {
          authorization: `Bearer ${this.#apiKey}`,
          accept: "application/json",
          ...(body !== undefined && { "content-type": "application/json" }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal: abort.signal,
        dispatcher: this.#dispatcher,
      });
      // Always read the body: undici keeps the socket busy until it is consumed.
      const text = await res.body.text();
      return { status: res.statusCode, headers: res.headers, text };
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (abort.signal.aborted) {
        throw new ProviderError(
          "PROVIDER_UNAVAILABLE",
          signal?.aborted
            ? `GPU provider ${op}: aborted while waiting for the answer`
            : `GPU provider ${op}: no answer within ${timeoutMs} ms`,
          { mayHaveBeenAccepted: true },
        );
      }
      const reason = typeof code === "string" ? code : err instanceof Error ? err.message : String(err);
      throw new ProviderError(
        "PROVIDER_UNAVAILABLE",
        `GPU provider ${op}: network error: ${redact(reason, this.#apiKey)}`,
        { mayHaveBeenAccepted: !(typeof code === "string" && NOT_SENT_CODES.has(code)) },
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
const NOT_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ENETUNREACH",
  "EHOSTUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

function parseBody<S extends z.ZodType>(
  op: string,
  text: string,
  schema: S,
  details: { mayHaveBeenAccepted?: boolean } = {},
): z.output<S> {
  const result = schema.safeParse(safeJson(text));
  if (!result.success) throw badShape(op, result.error, details);
  return result.data;
}

function badShape(
  op: string,
  error: z.ZodError,
  details: { mayHaveBeenAccepted?: boolean } = {},
): ProviderError {
  const where = error.issues
    .slice(0, 3)
    .map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`)
    .join("; ");
  return new ProviderError("BAD_RESPONSE", `GPU provider ${op}: unexpected answer (${where})`, details);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function enc(segment: string): string {
  return encodeURIComponent(segment);
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
  return url.toString().replace(/\/+$/, "");
}
