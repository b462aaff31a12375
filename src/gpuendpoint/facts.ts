// What one GpuEndpoint pass is planned from (plan.ts), as the executor gathered it: the object,
// the clock, the provider's answers (the key check, the endpoint listing, the resolved endpoint's
// health) as values, never as errors to catch. Own types, so the domain needs no provider client.
import type { GpuEndpoint } from "../crds/gpuendpoint.js";

/** A provider endpoint as its listing, creation or update reports it (worker settings, scaler). */
export interface LiveEndpoint {
  id: string;
  name: string;
  workersMin: number;
  workersMax: number;
  idleTimeout: number;
  [setting: string]: unknown;
}

/** A provider call that failed, as the diagnosis reads it. */
export interface ProviderFailure {
  /** The provider refused the key (401) or its account (billing, quota, suspension). */
  refused?: "INVALID_API_KEY" | "ACCOUNT_PROBLEM";
  /** The provider answered 404 (a health check: the endpoint may be gone). */
  notFound?: boolean;
  /** One line, with no secret in it. */
  message: string;
}

/** The provider's /health report (and, while jobs are queued, its worker summary). */
export interface HealthReport {
  jobs: { completed: number; failed: number; inProgress: number; inQueue: number };
  workers: { idle: number; initializing?: number; running: number; throttled?: number; unhealthy?: number };
}

export type KeyRead = { valid: true; accountId?: string } | { failed: ProviderFailure };
type ListingRead = { endpoints: readonly LiveEndpoint[] } | { failed: ProviderFailure };
export type HealthRead = { report: HealthReport } | { failed: ProviderFailure };

/** Where an endpoint id may come from besides spec.endpointId, and the conventional name. */
export interface EndpointNaming {
  /** GPU_PROVIDER_ENDPOINT_<WORKLOAD>, when set. */
  fromEnv?: string;
  /** <MEDIA_ENDPOINT_PREFIX>-<workload>-<MEDIA_ENV>. */
  conventionalName: string;
}

export interface EndpointFacts {
  endpoint: GpuEndpoint;
  now: Date;
  /** MEDIA_ENV: a production endpoint should keep a worker warm. */
  mediaEnv: string;
  naming: EndpointNaming;
  /** The reconciliation tick: a failed worker update is retried sooner, within it. */
  tickMs: number;
  key: KeyRead;
  /** Read once the key is valid. */
  listing?: ListingRead;
  /** Read once the listing resolves the GpuEndpoint to a live endpoint (resolution.ts). */
  health?: HealthRead;
}
