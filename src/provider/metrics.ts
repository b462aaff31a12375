// media_orchestrator_provider_*: every attempt at the GPU provider, by API, operation and outcome,
// its latency, and the rate-limit answers (429) received. The controller and the sidecar each keep
// their own on their registry (one process may run both).
import { Counter, Histogram, type Metric, type Registry } from "prom-client";
import type { ProviderCall } from "./calls.js";

function registered<T extends Metric>(registry: Registry, name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

export class ProviderMetrics {
  private readonly calls: Counter<"api" | "operation" | "outcome">;
  private readonly seconds: Histogram<"api" | "operation">;
  private readonly rateLimited: Counter<"api" | "operation">;

  constructor(registry: Registry) {
    const registers = [registry];
    this.calls = registered(
      registry,
      "media_orchestrator_provider_requests_total",
      () =>
        new Counter({
          name: "media_orchestrator_provider_requests_total",
          help: "Requests to the GPU provider (each retry counts), by API (job, management), operation and outcome (ok or the error code)",
          labelNames: ["api", "operation", "outcome"] as const,
          registers,
        }),
    );
    this.seconds = registered(
      registry,
      "media_orchestrator_provider_request_duration_seconds",
      () =>
        new Histogram({
          name: "media_orchestrator_provider_request_duration_seconds",
          help: "Time per request to the GPU provider, by API and operation",
          labelNames: ["api", "operation"] as const,
          buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
          registers,
        }),
    );
    this.rateLimited = registered(
      registry,
      "media_orchestrator_provider_rate_limited_total",
      () =>
        new Counter({
          name: "media_orchestrator_provider_rate_limited_total",
          help: "HTTP 429 answers received from the GPU provider, by API and operation",
          labelNames: ["api", "operation"] as const,
          registers,
        }),
    );
  }

  /** The client's onCall option. */
  readonly onCall = (call: ProviderCall): void => {
    const { api, op: operation } = call;
    this.calls.inc({ api, operation, outcome: call.outcome });
    this.seconds.observe({ api, operation }, call.seconds);
    if (call.status === 429) this.rateLimited.inc({ api, operation });
  };
}
