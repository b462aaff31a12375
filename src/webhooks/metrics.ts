// The sidecar's Prometheus metrics, on the registry it is given (one process may run the controller
// and the sidecar side by side, each with its own registry). Label values come from fixed sets
// (route templates, outcome words, signature failure reasons), never from request data.
import { Counter, Histogram, Registry, collectDefaultMetrics, type Metric } from "prom-client";

const PREFIX = "media_orchestrator_webhooks_";

/** Meter events refused after they were accepted (payments.ts): an alert watches them. */
const METER_ERROR_TYPES = ["v1.billing.meter.error_report_triggered", "v1.billing.meter.no_meter_found"];

/**
 * The payment event types counted by name: the subscription events the sidecar acts on, and the
 * payment provider's meter error reports. Others are
 * "other", so a provider that adds types (or a sender with a valid signature) cannot grow the label.
 */
const COUNTED_PAYMENT_TYPES: ReadonlySet<string> = new Set([
  "customer.subscription.created",
  "customer.subscription.updated",
  "customer.subscription.deleted",
  "customer.subscription.paused",
  "customer.subscription.resumed",
  "customer.subscription.trial_will_end",
  ...METER_ERROR_TYPES,
]);

export const paymentTypeLabel = (type: string): string => (COUNTED_PAYMENT_TYPES.has(type) ? type : "other");

function registered<T extends Metric>(registry: Registry, name: string, make: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? make();
}

export class WebhookMetrics {
  readonly requests: Counter<"route" | "outcome" | "code">;
  readonly duration: Histogram<"route">;
  readonly signatureFailures: Counter<"reason">;
  readonly duplicates: Counter<"route">;
  readonly conflicts: Counter<"resource">;
  readonly paymentOutcomes: Counter<"type" | "outcome">;
  readonly gcDeleted: Counter;

  constructor(readonly registry: Registry = new Registry()) {
    const registers = [registry];
    this.requests = registered(
      registry,
      `${PREFIX}requests_total`,
      () =>
        new Counter({
          name: `${PREFIX}requests_total`,
          help: "HTTP requests by route template, outcome and status code",
          labelNames: ["route", "outcome", "code"] as const,
          registers,
        }),
    );
    this.duration = registered(
      registry,
      `${PREFIX}request_duration_seconds`,
      () =>
        new Histogram({
          name: `${PREFIX}request_duration_seconds`,
          help: "Time from the request's arrival to the response, by route template",
          labelNames: ["route"] as const,
          buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
          registers,
        }),
    );
    this.signatureFailures = registered(
      registry,
      `${PREFIX}signature_failures_total`,
      () =>
        new Counter({
          name: `${PREFIX}signature_failures_total`,
          help: "Payment webhooks refused by the signature check, by reason",
          labelNames: ["reason"] as const,
          registers,
        }),
    );
    this.duplicates = registered(
      registry,
      `${PREFIX}duplicates_total`,
      () =>
        new Counter({
          name: `${PREFIX}duplicates_total`,
          help: "Deliveries that repeated one already handled or in flight (answered without new effects)",
          labelNames: ["route"] as const,
          registers,
        }),
    );
    this.conflicts = registered(
      registry,
      `${PREFIX}patch_conflicts_total`,
      () =>
        new Counter({
          name: `${PREFIX}patch_conflicts_total`,
          help: "Optimistic-concurrency conflicts (HTTP 409) on status writes, by resource",
          labelNames: ["resource"] as const,
          registers,
        }),
    );
    this.paymentOutcomes = registered(
      registry,
      `${PREFIX}payment_events_total`,
      () =>
        new Counter({
          name: `${PREFIX}payment_events_total`,
          help:
            "Processing attempts of payment events, by event type (the subscription types the product " +
            "acts on and the meter error reports; every other type is counted as other) and the outcome recorded",
          labelNames: ["type", "outcome"] as const,
          registers,
        }),
    );
    // At 0 from the start, so the first report ever is an increase an alert sees.
    for (const type of METER_ERROR_TYPES) this.paymentOutcomes.inc({ type, outcome: "Processed" }, 0);
    this.gcDeleted = registered(
      registry,
      `${PREFIX}payment_events_gc_deleted_total`,
      () =>
        new Counter({
          name: `${PREFIX}payment_events_gc_deleted_total`,
          help: "PaymentEvents deleted by the retention garbage collector",
          registers,
        }),
    );
    if (!registry.getSingleMetric(`${PREFIX}process_cpu_seconds_total`)) {
      collectDefaultMetrics({ register: registry, prefix: PREFIX });
    }
  }
}
