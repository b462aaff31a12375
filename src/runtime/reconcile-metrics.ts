// What became of each reconcile, per controller: controller-runtime's reconcile metrics under
// their names and meanings (https://github.com/kubernetes-sigs/controller-runtime/blob/main/pkg/internal/controller/metrics/metrics.go),
// so dashboards and alerts written for any controller-runtime operator read them, beside the
// project's own `<prefix>_reconcile_total{outcome}` and `<prefix>_reconcile_duration_seconds`.
import { Counter, Histogram, type Registry } from "prom-client";
import type { ReconcileOutcome } from "./workqueue.js";

/** The project's outcome label: `requeue` for a requeue-after, as its alerts and dashboards read it. */
const OUTCOME: Record<ReconcileOutcome, string> = {
  success: "success",
  requeue_after: "requeue",
  error: "error",
  terminal_error: "terminal_error",
};

export class ReconcileMetrics {
  /** `<prefix>_reconcile_total{controller, outcome}`: success, requeue, error, terminal_error. */
  readonly total: Counter<"controller" | "outcome">;
  private readonly seconds: Histogram<"controller">;
  private readonly runtimeTotal: Counter<"controller" | "result">;
  private readonly errors: Counter<"controller">;
  private readonly terminalErrors: Counter<"controller">;

  constructor(registry: Registry, prefix: string) {
    const registers = [registry];
    this.total = new Counter({
      name: `${prefix}_reconcile_total`,
      help: "Reconciles by controller and outcome (success, requeue, error: retried, terminal_error: not retried)",
      labelNames: ["controller", "outcome"] as const,
      registers,
    });
    this.seconds = new Histogram({
      name: `${prefix}_reconcile_duration_seconds`,
      help: "Time per reconcile",
      labelNames: ["controller"] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.runtimeTotal = new Counter({
      name: "controller_runtime_reconcile_total",
      help: "Total number of reconciliations per controller",
      labelNames: ["controller", "result"] as const,
      registers,
    });
    this.errors = new Counter({
      name: "controller_runtime_reconcile_errors_total",
      help: "Total number of reconciliation errors per controller",
      labelNames: ["controller"] as const,
      registers,
    });
    this.terminalErrors = new Counter({
      name: "controller_runtime_terminal_reconcile_errors_total",
      help: "Total number of terminal reconciliation errors per controller",
      labelNames: ["controller"] as const,
      registers,
    });
  }

  /** One reconcile of `controller`, of this outcome and duration. */
  observe(controller: string, outcome: ReconcileOutcome, durationMs: number): void {
    this.total.inc({ controller, outcome: OUTCOME[outcome] });
    this.seconds.observe({ controller }, durationMs / 1000);
    const failed = outcome === "error" || outcome === "terminal_error";
    // controller-runtime counts a terminal error as an error too (result="error").
    this.runtimeTotal.inc({ controller, result: failed ? "error" : outcome });
    if (failed) this.errors.inc({ controller });
    if (outcome === "terminal_error") this.terminalErrors.inc({ controller });
  }
}
