// The in-flight windows as metrics: per endpoint (the provider's endpoint id) the window, our jobs
// in flight and the jobs waiting for a slot. Neither job names nor accounts are labels: /metrics
// is reachable from any pod where network policies are off, and a customer id is a customer's
// (which accounts wait, and how many, is `kubectl media queue`, behind RBAC). How long jobs waited
// from creation to submission is media_orchestrator_mediajob_creation_to_submission_seconds
// (resource-metrics.ts).
import { Gauge, type Registry } from "prom-client";
import type { Dispatcher } from "./dispatcher.js";

export class DispatchMetrics {
  private dispatcher?: Dispatcher;
  private readonly window: Gauge<"endpoint">;
  private readonly inFlight: Gauge<"endpoint">;
  private readonly waiting: Gauge<"endpoint">;

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
      help: "Jobs waiting for a slot of the endpoint's window (Queued), every account's",
      labelNames: ["endpoint"] as const,
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
      // 0 when none waits: the series exists from the start.
      const waiting = Object.values(v.waiting).reduce((sum, n) => sum + n, 0);
      this.waiting.set({ endpoint: id }, waiting);
    }
  }
}
