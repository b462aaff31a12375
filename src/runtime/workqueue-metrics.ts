// The work queues' metrics under controller-runtime's names and meanings
// (https://github.com/kubernetes-sigs/controller-runtime/blob/main/pkg/metrics/workqueue.go), so
// dashboards and alerts written for any controller-runtime operator work here: label `name` is
// the controller. The gauges are read from the queues when Prometheus scrapes.
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { WorkQueue, WorkQueueMetricsSink } from "./workqueue.js";

/** controller-runtime's buckets: 10 ns to 1000 s, by tens. */
const BUCKETS = Array.from({ length: 12 }, (_, i) => 1e-8 * 10 ** i);

export class WorkQueueMetrics {
  private readonly queues = new Map<string, WorkQueue>();
  private readonly adds: Counter<"name">;
  private readonly retries: Counter<"name">;
  private readonly queueSeconds: Histogram<"name">;
  private readonly workSeconds: Histogram<"name">;

  constructor(registry: Registry) {
    const registers = [registry];
    const gauge = (
      name: string,
      help: string,
      read: (g: NonNullable<ReturnType<WorkQueue["gauges"]>>) => number,
    ) =>
      new Gauge({
        name,
        help,
        labelNames: ["name"] as const,
        registers,
        collect: () => {
          const g = registry.getSingleMetric(name) as Gauge<"name">;
          g.reset();
          for (const [queue, q] of this.queues) {
            const values = q.gauges();
            if (values) g.set({ name: queue }, read(values));
          }
        },
      });
    gauge("workqueue_depth", "Current depth of workqueue", (g) => g.depth);
    gauge(
      "workqueue_unfinished_work_seconds",
      "How many seconds of work has been done that is in progress and hasn't been observed by " +
        "work_duration. Large values indicate stuck threads.",
      (g) => g.unfinishedSeconds,
    );
    gauge(
      "workqueue_longest_running_processor_seconds",
      "How many seconds has the longest running processor for workqueue been running.",
      (g) => g.longestSeconds,
    );
    this.adds = new Counter({
      name: "workqueue_adds_total",
      help: "Total number of adds handled by workqueue",
      labelNames: ["name"] as const,
      registers,
    });
    this.retries = new Counter({
      name: "workqueue_retries_total",
      help: "Total number of retries handled by workqueue",
      labelNames: ["name"] as const,
      registers,
    });
    this.queueSeconds = new Histogram({
      name: "workqueue_queue_duration_seconds",
      help: "How long in seconds an item stays in workqueue before being requested",
      labelNames: ["name"] as const,
      buckets: BUCKETS,
      registers,
    });
    this.workSeconds = new Histogram({
      name: "workqueue_work_duration_seconds",
      help: "How long in seconds processing an item from workqueue takes.",
      labelNames: ["name"] as const,
      buckets: BUCKETS,
      registers,
    });
  }

  /** The calls one queue makes; its gauges are read from it once it is tracked. */
  sink(name: string): WorkQueueMetricsSink {
    return {
      added: () => this.adds.inc({ name }),
      queued: (s) => this.queueSeconds.observe({ name }, s),
      worked: (s) => this.workSeconds.observe({ name }, s),
      retried: () => this.retries.inc({ name }),
    };
  }

  track(name: string, queue: WorkQueue): void {
    this.queues.set(name, queue);
  }
}
