// The provider's management surface (endpoint settings and the key check) as one interface, with
// two implementations: RunPod's REST API v2 (the default) and its deprecated GraphQL API.
import type { ProviderError } from "./errors.js";
import type { ProviderEndpoint } from "./schemas.js";

export type ManagementApi = "rest" | "graphql";

export interface WorkersChange {
  workersMin?: number;
  workersMax?: number;
  idleTimeout?: number;
}

/** What the operator sets when it creates an endpoint (GpuEndpoint spec.create). */
export interface NewEndpoint {
  name: string;
  templateId: string;
  /** GPU pool ids in order of preference (GraphQL gpuIds, REST v2 gpu.pools). */
  gpuIds: string[];
  gpuCount?: number;
  workersMin: number;
  workersMax: number;
  idleTimeout: number;
}

/** A key that works. GraphQL names the account; REST v2 has no call that does. */
export interface KeyIdentity {
  accountId?: string;
  via: ManagementApi;
}

export interface EndpointManagement {
  readonly api: ManagementApi;
  checkKey(): Promise<KeyIdentity>;
  listEndpoints(): Promise<ProviderEndpoint[]>;
  getEndpoint(id: string): Promise<ProviderEndpoint>;
  /** Changes only the given worker settings; every other setting of the endpoint is kept. */
  updateEndpointWorkers(id: string, change: WorkersChange): Promise<ProviderEndpoint>;
  createEndpoint(spec: NewEndpoint): Promise<ProviderEndpoint>;
}

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export interface CallContext {
  op: string;
  endpointId?: string;
  jobId?: string;
}

export type HttpMethod = "GET" | "POST" | "PATCH";

/**
 * One management call through the client's HTTP stack: timeout, retries of RATE_LIMITED and
 * PROVIDER_UNAVAILABLE within the budget, key redaction. `handle` turns an answer into a value or
 * throws a ProviderError. With `notIdempotent` a failure after which the provider may have acted
 * (timeout, 5xx, reset) is not retried: for calls such as creating an endpoint.
 */
export type ManagementExchange = <T>(
  ctx: CallContext,
  method: HttpMethod,
  url: string,
  body: unknown,
  handle: (res: RawAnswer) => T,
  opts?: { notIdempotent?: boolean },
) => Promise<T>;

export interface ManagementTransport {
  /** Base URL without a trailing slash, e.g. https://api.runpod.io. */
  baseUrl: string;
  /** Only to redact it from error messages. */
  secret: string;
  exchange: ManagementExchange;
}

/**
 * Whether a GraphQL failure means "this API is not there" (retired, moved, down) rather than
 * something about the key: then the key is checked over REST instead.
 */
export function graphqlUnavailable(err: ProviderError): boolean {
  if (err.code === "PROVIDER_UNAVAILABLE" || err.code === "BAD_RESPONSE") return true;
  return err.status === 404 || err.status === 405 || err.status === 410 || err.status === 501;
}
