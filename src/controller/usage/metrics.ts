// The usage reporter's metrics: what was metered, and the outbox's backlog (how many attempts, how
// old the oldest), which the chart's alert watches.
import { Counter, Gauge, type Registry } from "prom-client";

export class UsageMetrics {
  readonly meteredSeconds: Counter<"event_name">;
  readonly sends: Counter<"outcome">;
  readonly refused: Counter;
  readonly backlog: Gauge;
  readonly backlogOldestSeconds: Gauge;
  readonly accountMissing: Gauge;
  readonly droppedSeconds: Counter;
  readonly runsLeft: Counter<"followed">;
  readonly runsFollowed: Gauge;
  readonly meterMisconfigured: Gauge<"event_name">;
  readonly afterInvoice: Counter<"event_name">;

  /** `eventNames`: the configured meter event names, exposed at 0 from the start. */
  constructor(registry: Registry, eventNames: readonly string[] = []) {
    const registers = [registry];
    this.meteredSeconds = new Counter({
      name: "media_orchestrator_usage_metered_seconds_total",
      help: "GPU seconds the payment provider accepted as meter events, by event name",
      labelNames: ["event_name"] as const,
      registers,
    });
    for (const name of new Set(eventNames)) this.meteredSeconds.inc({ event_name: name }, 0);
    this.afterInvoice = new Counter({
      name: "media_orchestrator_usage_after_invoice_seconds_total",
      help: "GPU seconds the payment provider accepted after the invoice of their billing period was finalized: on no invoice",
      labelNames: ["event_name"] as const,
      registers,
    });
    for (const name of new Set(eventNames)) this.afterInvoice.inc({ event_name: name }, 0);
    // Set by the meter check (meter-check.ts) when metering is on; 0 for every configured name.
    this.meterMisconfigured = new Gauge({
      name: "media_orchestrator_usage_meter_misconfigured",
      help: "1 when the payment provider's meter of an event name would not bill what is sent (keys, formula, pre-aggregation, no active meter); its usage waits unsent",
      labelNames: ["event_name"] as const,
      registers,
    });
    for (const name of new Set(eventNames)) this.meterMisconfigured.set({ event_name: name }, 0);
    this.sends = new Counter({
      name: "media_orchestrator_usage_meter_sends_total",
      help: "Meter event sends by outcome (a stream batch counts each of its events): recorded, duplicate (recorded earlier), retry (429, 5xx, no answer), refused",
      labelNames: ["outcome"] as const,
      registers,
    });
    this.refused = new Counter({
      name: "media_orchestrator_usage_reports_refused_total",
      help: "Job attempts whose usage was not reported (refused by the provider, too old, or past the deduplication window)",
      registers,
    });
    this.backlog = new Gauge({
      name: "media_orchestrator_usage_unreported",
      help: "Job attempts whose usage waits in the outbox to be reported",
      registers,
    });
    this.backlogOldestSeconds = new Gauge({
      name: "media_orchestrator_usage_unreported_oldest_seconds",
      help: "Age of the oldest unreported usage (since its job attempt ended); 0 when none waits",
      registers,
    });
    this.droppedSeconds = new Counter({
      name: "media_orchestrator_usage_dropped_on_deletion_seconds_total",
      help: "GPU seconds not reported to the payment provider whose jobs were deleted without waiting longer (skip-usage-report, or DELETE_USAGE_TIMEOUT_SECONDS)",
      registers,
    });
    this.runsLeft = new Counter({
      name: "media_orchestrator_runs_left_at_provider_total",
      help: "MediaJobs deleted while their run may go on at the provider (skip-provider-cancel, or a cancel given up): followed and billed to their account (followed=true), or not billed (no account)",
      labelNames: ["followed"],
      registers,
    });
    this.runsFollowed = new Gauge({
      name: "media_orchestrator_runs_left_at_provider",
      help: "Runs of deleted MediaJobs followed at the provider until they end and are billed (BillingAccount status.orphans)",
      registers,
    });
    this.accountMissing = new Gauge({
      name: "media_orchestrator_usage_account_missing",
      help: "Job attempts whose usage waits to be counted into a BillingAccount that does not exist (their jobs are kept until it is back)",
      registers,
    });
  }
}
