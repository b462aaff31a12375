import fc from "fast-check";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { GpuProviderClient, TERMINAL_STATUSES, type ProviderJobStatus } from "../../src/provider/index.js";
import { startSimulator } from "../../src/simulator/server.js";

// Whatever the fault rates (5xx before or after the job is accepted, failed jobs, dropped,
// duplicated and failing callbacks), every id the client submitted executes exactly once, even
// when it is submitted several times, concurrently, and again after it finished.

const rate = (max: number) => fc.double({ min: 0, max, noNaN: true });

// The simulator deduplicates an id only while it still knows the job: up to statusRetentionMs
// (simulated, so multiplied by TIME_SCALE) after the job ended. The client retries in real time.
// A copy of the first submitAll can still be retrying RETRY_BUDGET_MS after the job ended (a dozen
// 5xx in a row is rare but happens with serverErrors near 0.5), then the terminal wait, then the
// second submitAll with the same budget. The default retention, 30 min x 0.002 = 3.6 s real, is
// shorter than that: such a late retry re-created the finished job and it ran twice. Exactly once
// holds only while retention outlasts every retry, as it does at real speed (30 min against 30 s).
const TIME_SCALE = 0.002;
const RETRY_BUDGET_MS = 20_000;
const TERMINAL_WAIT_MS = 10_000;
const RETENTION_REAL_MS = 2 * RETRY_BUDGET_MS + TERMINAL_WAIT_MS + 10_000;

describe("exactly-once submission", () => {
  it("every submitted id executes exactly once, whatever the faults", async () => {
    // A receiver that fails one callback in three, so callback retries run too.
    let hits = 0;
    const receiver = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.statusCode = ++hits % 3 === 0 ? 500 : 200;
        res.end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    const webhookBase = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/cb`;

    try {
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            serverErrors: rate(0.5),
            failJob: rate(0.5),
            dropCallback: rate(1),
            duplicateCallback: rate(1),
            failCallbackDelivery: rate(1),
            reorderCallbacks: fc.boolean(),
          }),
          fc.integer({ min: 1, max: 6 }),
          fc.integer({ min: 1, max: 3 }),
          fc.integer({ min: 0, max: 2 ** 31 - 1 }),
          async (faults, jobs, copies, seed) => {
            const sim = await startSimulator({
              seed,
              timeScale: TIME_SCALE,
              statusRetentionMs: RETENTION_REAL_MS / TIME_SCALE,
              faults,
              endpoints: [{ id: "ep", name: "media-render-prop", workersMax: 3 }],
            });
            try {
              const client = new GpuProviderClient({
                apiUrl: sim.url,
                apiKey: "sim-key",
                timeoutMs: 2_000,
                retryBudgetMs: RETRY_BUDGET_MS,
                retryBaseDelayMs: 5,
                maxAttempts: 50,
              });
              const ids = Array.from({ length: jobs }, (_, i) => `job-${seed}-${i}`);
              const submitAll = () =>
                Promise.all(
                  ids.flatMap((id) =>
                    Array.from({ length: copies }, () =>
                      client.submit("ep", {
                        id,
                        input: { id, frames: 3 },
                        webhook: `${webhookBase}?job=${id}`,
                      }),
                    ),
                  ),
                );
              const answers = await submitAll();
              for (const a of answers) expect(ids).toContain(a.id);
              await waitAllTerminal(sim.getJob, ids);
              // Submitting again after the end (within retention) must not run anything again.
              await submitAll();
              for (const id of ids) expect(sim.executions(id)).toBe(1);
              expect([...sim.allExecutions().values()].every((n) => n === 1)).toBe(true);
            } finally {
              await sim.close();
            }
          },
        ),
        // A failure shrinks through slow cases (long 5xx streaks): stop it before the vitest timeout
        // so the report shows the counterexample and fast-check seed instead of a bare timeout.
        { numRuns: 25, interruptAfterTimeLimit: 50_000, markInterruptAsFailure: true },
      );
    } finally {
      await new Promise<void>((r) => receiver.close(() => r()));
    }
  }, 90_000);
});

async function waitAllTerminal(
  getJob: (id: string) => { status: ProviderJobStatus } | undefined,
  ids: string[],
): Promise<void> {
  const deadline = Date.now() + TERMINAL_WAIT_MS;
  while (!ids.every((id) => TERMINAL_STATUSES.has(getJob(id)?.status ?? "IN_QUEUE"))) {
    if (Date.now() > deadline) throw new Error("jobs did not finish");
    await new Promise((r) => setTimeout(r, 5));
  }
}
