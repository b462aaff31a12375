// What the caches say about MediaJobs and GpuEndpoints, as Prometheus metrics:
//  - gauges computed when Prometheus scrapes (how many jobs per phase and workload, stuck,
//    unconfirmed; endpoints per condition), on every replica: each has the same cache, so
//    dashboards and alerts take max() across replicas;
//  - counters and histograms of what the jobs went through (finished, failed by reason, time from
//    creation to submission and from submission to the end), from the watch events of the cache.
//    Every writer's changes pass through the watch (the sidecar's callbacks too), so nothing is
//    missed; only the leader counts them, so a sum across replicas counts each job once.
// Labels are phases, workloads, condition types and reasons: fixed sets, never job names or ids.
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { Workload, type Condition } from "../crds/common.js";
import type { GpuEndpoint } from "../crds/gpuendpoint.js";
import { JobPhase, type MediaJob } from "../crds/mediajob.js";
import { isTerminal } from "../mediajob/job.js";
import { isUnconfirmed } from "../mediajob/submission.js";
import { msUntilStuck } from "../mediajob/recovery.js";
import { runningAfterCancel } from "../mediajob/stop.js";
import type { InformerEvent } from "../runtime/informer.js";
import { jobPhase } from "../mediajob/job.js";

export interface CacheSource {
  jobs: () => MediaJob[];
  endpoints: () => GpuEndpoint[];
  defaultTimeoutSeconds: number;
}

/** The kind of a failure, from status.error's prefix (the lifecycle writes "<KIND>: message"). */
export function failureReason(error: string | undefined): string {
  const kind = /^([A-Za-z_]+):/.exec(error ?? "")?.[1];
  switch (kind) {
    case "FAILED":
    case "TIMED_OUT":
      return kind;
    case "ProviderLostJob":
    case "SubmissionUnconfirmed":
    case "Expired":
    case "DeadlineExceeded":
    case "StartDeadlineExceeded":
      return kind;
    default:
      return "Other";
  }
}

const seconds = (from: unknown, to: unknown): number | undefined => {
  const a = Date.parse(String(from instanceof Date ? from.toISOString() : (from ?? "")));
  const b = Date.parse(String(to instanceof Date ? to.toISOString() : (to ?? "")));
  return Number.isFinite(a) && Number.isFinite(b) && b >= a ? (b - a) / 1000 : undefined;
};

const LATENCY_BUCKETS = [1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400];

export class ResourceMetrics {
  private source?: CacheSource;
  private readonly finished: Counter<"workload" | "phase">;
  private readonly failures: Counter<"workload" | "reason">;
  private readonly toSubmission: Histogram<"workload">;
  private readonly toTerminal: Histogram<"workload" | "phase">;

  constructor(registry: Registry) {
    const registers = [registry];
    const fromCache = (
      name: string,
      help: string,
      labelNames: readonly string[],
      fill: (g: Gauge<string>, s: CacheSource) => void,
    ) =>
      new Gauge({
        name,
        help,
        labelNames,
        registers,
        collect: () => {
          const g = registry.getSingleMetric(name) as Gauge<string>;
          g.reset();
          if (this.source) fill(g, this.source);
        },
      });
    fromCache(
      "media_orchestrator_mediajobs",
      "MediaJobs in the cache, by phase and workload",
      ["phase", "workload"],
      (g, s) => {
        // Every phase and workload, zeros included: a query sees 0, not "no data".
        for (const phase of JobPhase.options)
          for (const workload of Workload.options) g.set({ phase, workload }, 0);
        for (const job of s.jobs()) g.inc({ phase: jobPhase(job.status), workload: job.spec.workload });
      },
    );
    fromCache(
      "media_orchestrator_mediajobs_stuck",
      "MediaJobs Processing past their timeout (spec.timeoutSeconds, else the default), by workload",
      ["workload"],
      (g, s) => {
        for (const workload of Workload.options) g.set({ workload }, 0);
        const now = Date.now();
        for (const job of s.jobs())
          if (job.status?.phase === "Processing" && msUntilStuck(job, now, s.defaultTimeoutSeconds) < 0)
            g.inc({ workload: job.spec.workload });
      },
    );
    fromCache(
      "media_orchestrator_mediajobs_unconfirmed",
      "MediaJobs whose current submission is unconfirmed (the answer of /run was lost; waiting for its callback), by workload",
      ["workload"],
      (g, s) => {
        for (const workload of Workload.options) g.set({ workload }, 0);
        for (const job of s.jobs())
          if (isUnconfirmed(job.status) && job.status?.submission?.state === "Unconfirmed")
            g.inc({ workload: job.spec.workload });
      },
    );
    fromCache(
      "media_orchestrator_mediajobs_running_after_cancel",
      "MediaJobs cancelled (spec.cancel, a suspension, the deadline) that the provider still reports running past CANCEL_FOLLOW_WARNING_SECONDS: still billed, by workload",
      ["workload"],
      (g, s) => {
        for (const workload of Workload.options) g.set({ workload }, 0);
        for (const job of s.jobs())
          if (runningAfterCancel(job.status)) g.inc({ workload: job.spec.workload });
      },
    );
    fromCache(
      "media_orchestrator_gpuendpoints",
      "GpuEndpoints by workload and by the status and reason of each condition",
      ["workload", "condition", "status", "reason"],
      (g, s) => {
        for (const ep of s.endpoints()) {
          const conditions: Condition[] = ep.status?.conditions ?? [];
          const ready = conditions.some((c) => c.type === "Ready");
          for (const c of conditions)
            g.inc({ workload: ep.spec.workload, condition: c.type, status: c.status, reason: c.reason });
          // A new endpoint not yet reconciled is not Ready either.
          if (!ready)
            g.inc({
              workload: ep.spec.workload,
              condition: "Ready",
              status: "Unknown",
              reason: "NotObserved",
            });
        }
      },
    );
    this.finished = new Counter({
      name: "media_orchestrator_mediajobs_finished_total",
      help: "MediaJobs that reached a final phase (Completed, Failed, Cancelled), by workload and phase",
      labelNames: ["workload", "phase"] as const,
      registers,
    });
    this.failures = new Counter({
      name: "media_orchestrator_mediajob_failures_total",
      help:
        "MediaJobs that failed, by workload and reason: FAILED or TIMED_OUT (the provider's verdict), " +
        "ProviderLostJob, SubmissionUnconfirmed (replays given up), Other",
      labelNames: ["workload", "reason"] as const,
      registers,
    });
    this.toSubmission = new Histogram({
      name: "media_orchestrator_mediajob_creation_to_submission_seconds",
      help: "Time from a MediaJob's creation to its first submission to the provider, by workload",
      labelNames: ["workload"] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.toTerminal = new Histogram({
      name: "media_orchestrator_mediajob_submission_to_terminal_seconds",
      help: "Time from a MediaJob's last submission to its final phase, by workload and phase",
      labelNames: ["workload", "phase"] as const,
      buckets: LATENCY_BUCKETS,
      registers,
    });
  }

  /** The caches the gauges read at scrape time. */
  readFrom(source: CacheSource): void {
    this.source = source;
  }

  /** An informer handler: counts what a watch event shows a job went through. */
  observe(event: InformerEvent, job: MediaJob, old: MediaJob | undefined): void {
    if (event !== "update" || !old) return;
    const before = old.status?.phase;
    const after = job.status?.phase;
    if (before === after) return;
    const workload = job.spec.workload;
    const status = job.status;
    if (after === "Processing" && status?.attempts === 1) {
      const s = seconds(job.metadata.creationTimestamp, status.submittedAt);
      if (s !== undefined) this.toSubmission.observe({ workload }, s);
    }
    if (after && isTerminal(after) && !isTerminal(before)) {
      this.finished.inc({ workload, phase: after });
      if (after === "Failed") this.failures.inc({ workload, reason: failureReason(status?.error) });
      const s = seconds(status?.submittedAt, status?.completedAt);
      if (s !== undefined) this.toTerminal.observe({ workload, phase: after }, s);
    }
  }
}
