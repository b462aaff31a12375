// The in-flight windows as metrics: per endpoint (the provider's endpoint id) the window and our
// jobs in flight, per endpoint and account the jobs waiting for a slot, and how long jobs waited
// from creation to their first submission. Job names are never labels; accounts are, as few as
// the customers with work.
import { Gauge, Histogram, type Registry } from "prom-client";
import type { MediaJob } from "../../crds/mediajob.js";
import type { Dispatcher } from "./dispatcher.js";

export class DispatchMetrics {
  private dispatcher?: Dispatcher;
  private readonly window: Gauge<"endpoint">;
  private readonly inFlight: Gauge<"endpoint">;
  private readonly waiting: Gauge<"endpoint" | "account">;
  private readonly waited: Histogram;

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
    });
    this.waiting = new Gauge({
      name: "media_orchestrator_dispatch_waiting_jobs",
      help: 'Jobs waiting for a slot of the endpoint\'s window (Queued), per account ("": jobs without one)',
      labelNames: ["endpoint", "account"] as const,
      registers: [registry],
    });
    this.waited = new Histogram({
      name: "media_orchestrator_dispatch_wait_seconds",
      help: "Time from a job's creation to its first submission to the provider",
      buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600],
      registers: [registry],
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
      for (const [account, n] of Object.entries(v.waiting)) this.waiting.set({ endpoint: id, account }, n);
    }
  }

  /** A job's watch event: its first submission's intent tells how long it waited. */
  observe(job: MediaJob): void {
    const s = job.status;
    if (s?.attempts !== 1 || s.submission?.state !== "Sending" || !s.submittedAt) return;
    const created = Date.parse(String(job.metadata.creationTimestamp ?? ""));
    const sent = Date.parse(s.submittedAt);
    if (Number.isFinite(created) && Number.isFinite(sent) && sent >= created)
      this.waited.observe((sent - created) / 1000);
  }
}
