// The in-flight windows as metrics: per endpoint (the provider's endpoint id) the window and our
// jobs in flight, per endpoint and account the jobs waiting for a slot. Job names are never
// labels; accounts are, as few as the customers with work. How long jobs waited from creation to
// submission is media_orchestrator_mediajob_creation_to_submission_seconds (resource-metrics.ts).
import { Gauge, type Registry } from "prom-client";
import type { Dispatcher } from "./dispatcher.js";

export class DispatchMetrics {
  private dispatcher?: Dispatcher;
  private readonly window: Gauge<"endpoint">;
  private readonly inFlight: Gauge<"endpoint">;
  private readonly waiting: Gauge<"endpoint" | "account">;

  constructor(registry: Registry) {
    const read = () => this.refresh();
    this.window = new Gauge({
      name: "media_orchestrator_dispatch_window",
      help: "The in-flight window per provider endpoint: how many of our jobs may be at the provider at once",
      labelNames: ["endpoint"] as const,
      registers: [registry],
      collect: read,
    });
    this.inFlight = new Gauge({
      name: "media_orchestrator_dispatch_in_flight",
      help: "Our jobs submitted to the provider endpoint and not finished",
      labelNames: ["endpoint"] as const,
      registers: [registry],
      collect: read,
    });
    this.waiting = new Gauge({
      name: "media_orchestrator_dispatch_waiting_jobs",
      help: 'Jobs waiting for a slot of the endpoint\'s window (Queued), per account ("": jobs without one)',
      labelNames: ["endpoint", "account"] as const,
      registers: [registry],
      collect: read,
    });
  }

  readFrom(dispatcher: Dispatcher): void {
    this.dispatcher = dispatcher;
  }

  private refresh(): void {
    const d = this.dispatcher;
    if (!d?.isLeading) return;
    this.window.reset();
    this.inFlight.reset();
    this.waiting.reset();
    for (const id of d.endpointIds()) {
      const v = d.view(id);
      this.window.set({ endpoint: id }, v.window);
      this.inFlight.set({ endpoint: id }, v.inFlight);
      // The default account's count always, 0 when none waits: the series exists from the start.
      this.waiting.set({ endpoint: id, account: "" }, 0);
      for (const [account, n] of Object.entries(v.waiting)) this.waiting.set({ endpoint: id, account }, n);
    }
  }
}
