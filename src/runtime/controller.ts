// One controller of the runtime: a work queue and the reconcile its workers call, with the
// outcome of every reconcile logged and counted in one place (controller-runtime's
// reconcileHandler, pkg/internal/controller/controller.go). A loop builds one in its setup (its
// name, concurrency and retry ceiling); the manager starts its workers while it leads.
import type { Logger } from "pino";
import { describeError } from "../k8s/errors.js";
import type { ReconcileMetrics } from "./reconcile-metrics.js";
import { WorkQueue, type Reconciler } from "./workqueue.js";
import type { WorkQueueMetrics } from "./workqueue-metrics.js";

export interface ControllerOptions {
  /** The `controller` label of its metrics and logs, the `name` of its workqueue metrics. */
  name: string;
  reconcile: Reconciler;
  /** Workers at once: controller-runtime's MaxConcurrentReconciles. */
  concurrency: number;
  /** The first and the longest backoff of a failing key (the work queue's defaults unless given). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  log: Logger;
  metrics: { reconcile: ReconcileMetrics; workqueue: WorkQueueMetrics };
  /** Told of every reconcile (the idle compaction's clock). */
  onWork?: () => void;
}

export class Controller {
  readonly name: string;
  readonly queue: WorkQueue;
  private running?: Promise<void>;

  constructor(private readonly o: ControllerOptions) {
    const { name, log, metrics } = o;
    this.name = name;
    this.queue = new WorkQueue({
      ...(o.baseDelayMs !== undefined && { baseDelayMs: o.baseDelayMs }),
      ...(o.maxDelayMs !== undefined && { maxDelayMs: o.maxDelayMs }),
      // An error the reconcile returned was planned (its cause is in the object's conditions): info.
      // One it threw was not: warn.
      onError: (key, err, retryInMs) =>
        log[err instanceof Error ? "warn" : "info"](
          { controller: name, key, err: errorText(err), retryInMs },
          "reconcile failed; retrying with backoff",
        ),
      onTerminalError: (key, err) =>
        log.info(
          { controller: name, key, err: err.message },
          "reconcile ended on a terminal error; not retried",
        ),
      onDone: (_key, ms, outcome) => {
        o.onWork?.();
        metrics.reconcile.observe(name, outcome, ms);
      },
      metrics: metrics.workqueue.sink(name),
    });
    metrics.workqueue.track(name, this.queue);
  }

  /** Starts the workers (the leader's); resolves once shut down and the last reconcile is done. */
  run(): Promise<void> {
    this.running = this.queue.run(this.o.concurrency, this.o.reconcile);
    return this.running;
  }

  /** No key is handed out any more; workers finish their current key. */
  shutdown(): void {
    this.queue.shutdown();
  }
}

function errorText(err: unknown): string {
  return err instanceof Error || typeof err !== "object" || err === null
    ? describeError(err)
    : String((err as { message?: unknown }).message);
}
