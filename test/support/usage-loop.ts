// The usage loop's executor on a real work queue (the runtime's), without the manager: unit tests
// drive UsageReporter through it as the controller does (resync at lead and at each tick, keys
// added from job events, failing keys backed off).
import { UsageReporter, type UsageReporterDeps } from "../../src/controller/usage/reporter.js";
import { WorkQueue } from "../../src/runtime/workqueue.js";

export function usageLoop(
  deps: Omit<UsageReporterDeps, "queue">,
  o: { tickMs?: number; baseDelayMs?: number; onError?: (key: string, err: unknown) => void } = {},
) {
  const queue = new WorkQueue({
    baseDelayMs: o.baseDelayMs ?? 1_000,
    maxDelayMs: 5 * 60_000,
    onError: (key, err) => o.onError?.(key, err),
  });
  const reporter = new UsageReporter({ ...deps, queue: () => queue });
  let running: Promise<void> | undefined;
  let tick: NodeJS.Timeout | undefined;
  return {
    reporter,
    queue,
    /** Starts the workers and resyncs, as the manager does when it starts leading. */
    start(): void {
      running = queue.run(2, reporter.reconcile);
      reporter.lead();
      if (o.tickMs !== undefined) tick = setInterval(() => reporter.resync(), o.tickMs);
    },
    async stop(): Promise<void> {
      if (tick) clearInterval(tick);
      queue.shutdown();
      await running;
    },
  };
}
