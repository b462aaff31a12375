// The controller's Prometheus metrics, on a registry of its own (one process may run both the
// controller and the sidecar).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export class ControllerMetrics {
  readonly registry = new Registry();
  readonly reconciles = new Counter({
    name: "media_orchestrator_reconcile_total",
    help: "Reconciles by controller and outcome",
    labelNames: ["controller", "outcome"] as const,
    registers: [this.registry],
  });
  readonly reconcileSeconds = new Histogram({
    name: "media_orchestrator_reconcile_duration_seconds",
    help: "Time per reconcile",
    labelNames: ["controller"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: "media_orchestrator_workqueue_depth",
    help: "Keys waiting in the work queue",
    labelNames: ["controller"] as const,
    registers: [this.registry],
  });
  readonly transitions = new Counter({
    name: "media_orchestrator_job_transitions_total",
    help: "MediaJob phase transitions",
    labelNames: ["from", "to"] as const,
    registers: [this.registry],
  });
  readonly submissions = new Counter({
    name: "media_orchestrator_submissions_total",
    help:
      "Submissions to the GPU provider by outcome: accepted, refused (provably not taken), unconfirmed " +
      "(answer lost: may be running), unconfirmed-resubmission (sent again past the confirmation " +
      "deadline: may have run twice), fenced (not the leader), intent-conflict",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly leader = new Gauge({
    name: "media_orchestrator_leader",
    help: "1 while this process holds the leader Lease",
    registers: [this.registry],
  });
  readonly cachedObjects = new Gauge({
    name: "media_orchestrator_cached_objects",
    help: "Objects in the informer caches",
    labelNames: ["resource"] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: "media_orchestrator_controller_" });
  }
}
