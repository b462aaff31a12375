// The controller's Prometheus metrics, on a registry of its own (one process may run both the
// controller and the sidecar).
import { Counter, Gauge, Registry, collectDefaultMetrics } from "prom-client";
import { ReconcileMetrics } from "../runtime/reconcile-metrics.js";
import { ProviderMetrics } from "../provider/metrics.js";
import { DispatchMetrics } from "./dispatch/metrics.js";
import { ResourceMetrics } from "./resource-metrics.js";
import { WorkQueueMetrics } from "../runtime/workqueue-metrics.js";

export class ControllerMetrics {
  readonly registry = new Registry();
  /** Each reconcile's outcome and time, the project's and controller-runtime's metrics. */
  readonly reconcile = new ReconcileMetrics(this.registry, "media_orchestrator");
  /** media_orchestrator_reconcile_total{controller, outcome}. */
  readonly reconciles = this.reconcile.total;
  /** controller-runtime's workqueue_* metrics, label `name` per controller. */
  readonly workqueue = new WorkQueueMetrics(this.registry);
  /** MediaJobs and GpuEndpoints: gauges from the caches, what jobs went through. */
  readonly resources = new ResourceMetrics(this.registry);
  /** media_orchestrator_dispatch_*: the endpoints' in-flight windows (dispatch/dispatcher.ts). */
  readonly dispatch = new DispatchMetrics(this.registry);
  /** media_orchestrator_provider_*: the GpuProviderClient's onCall. */
  readonly provider = new ProviderMetrics(this.registry);
  readonly recoveries = new Counter({
    name: "media_orchestrator_recoveries_total",
    help:
      "Jobs the controller recovered, by kind: missed_callback (completed from the provider's status " +
      "API), provider_lost_job (replayed after a 404), unconfirmed_resubmission (sent again past its " +
      "confirmation deadline: may have run twice)",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  readonly leaderChanges = new Counter({
    name: "media_orchestrator_leader_changes_total",
    help: "Times this process became the leader (change=acquired) or stopped leading (change=lost)",
    labelNames: ["change"] as const,
    registers: [this.registry],
  });
  readonly transitions = new Counter({
    name: "media_orchestrator_job_transitions_total",
    help: "MediaJob phase transitions",
    labelNames: ["from", "to"] as const,
    registers: [this.registry],
  });
  readonly invalidObjects = new Counter({
    name: "media_orchestrator_invalid_objects_total",
    help: "Objects seen that fail their resource's schema: left out of the cache, acted on by nothing",
    labelNames: ["resource"] as const,
    registers: [this.registry],
  });
  readonly eventsDropped = new Counter({
    name: "media_orchestrator_events_dropped_total",
    help: "Kubernetes Events not written because the buffer of Events waiting to be written was full (Events are best effort)",
    registers: [this.registry],
  });
  readonly submissions = new Counter({
    name: "media_orchestrator_submissions_total",
    help:
      "Submissions to the GPU provider by outcome: accepted, refused (provably not taken), unconfirmed " +
      "(answer lost: may be running), unconfirmed-resubmission (sent again past the confirmation " +
      "deadline: may have run twice), unconfirmed-failed (Failed past the confirmation deadline, never " +
      "sent again: may have run once), fenced (not the leader), intent-conflict, held-elsewhere (the " +
      "answer named a provider job another MediaJob holds: not recorded, left unconfirmed), storage-unavailable " +
      "(not sent: the attempt's presigned URLs could not be signed)",
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
