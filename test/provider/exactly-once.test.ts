import fc from "fast-check";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import {
  GpuProviderClient,
  TERMINAL_STATUSES,
  type ProviderError,
  type ProviderJobStatus,
} from "../../src/provider/index.js";
import { startSimulator } from "../../tools/simulator/server.js";

// At a provider that ignores our ids (RunPod, the simulator's default), whatever the fault rates
// (5xx before or after the job is accepted, answers lost after acceptance, rate limits, failed
// jobs, dropped, duplicated and failing callbacks), one submit call runs a job at most once: a
// call that succeeded ran it exactly once, one refused for sure (mayHaveBeenAccepted false) ran
// nothing, and none ran twice. Executions are counted by the provider (per our job id, which the
// webhook URL carries), never by the client.

const rate = (max: number) => fc.double({ min: 0, max, noNaN: true });
const TIME_SCALE = 0.002;
const TERMINAL_WAIT_MS = 10_000;

describe("at-most-once submission at a provider that ignores ids", () => {
  it("one submit call never runs a job twice, whatever the faults", async () => {
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
            lostRunAnswers: rate(0.3),
            failJob: rate(0.5),
            dropCallback: rate(1),
            duplicateCallback: rate(1),
            failCallbackDelivery: rate(1),
            reorderCallbacks: fc.boolean(),
          }),
          fc.integer({ min: 1, max: 8 }),
          fc.integer({ min: 0, max: 2 ** 31 - 1 }),
          async (faults, jobs, seed) => {
            const sim = await startSimulator({
              seed,
              timeScale: TIME_SCALE,
              faults,
              endpoints: [{ id: "ep", name: "media-render-prop", workersMax: 3 }],
            });
            try {
              const client = new GpuProviderClient({
                apiUrl: sim.url,
                apiKey: "sim-key",
                timeoutMs: 2_000,
                retryBudgetMs: 5_000,
                retryBaseDelayMs: 5,
                maxAttempts: 50,
              });
              const ids = Array.from({ length: jobs }, (_, i) => `job-${seed}-${i}`);
              const results = await Promise.all(
                ids.map((id) =>
                  client
                    .submit("ep", { id, input: { id, frames: 3 }, webhook: `${webhookBase}?job=${id}` })
                    .then(
                      (ok) => ({ id, ok: true as const, providerId: ok.id }),
                      (err: ProviderError) => ({ id, ok: false as const, maybe: err.mayHaveBeenAccepted }),
                    ),
                ),
              );
              const running = results.filter((r) => r.ok || r.maybe).map((r) => r.id);
              await waitAllSettled(sim, running);
              for (const r of results) {
                const n = sim.executions(r.id);
                if (r.ok) expect(n, `${r.id} was accepted`).toBe(1);
                else if (!r.maybe) expect(n, `${r.id} was refused`).toBe(0);
                else expect(n, `${r.id} is unconfirmed`).toBeLessThanOrEqual(1);
              }
              expect([...sim.allExecutions().values()].every((n) => n <= 1)).toBe(true);
            } finally {
              await sim.close();
            }
          },
        ),
        // A failure shrinks through slow cases: stop it before the vitest timeout so the report
        // shows the counterexample and fast-check seed instead of a bare timeout.
        { numRuns: 25, interruptAfterTimeLimit: 50_000, markInterruptAsFailure: true },
      );
    } finally {
      await new Promise<void>((r) => receiver.close(() => r()));
    }
  }, 90_000);
});

/** Every job the provider holds has ended, so every execution that will happen has happened. */
async function waitAllSettled(
  sim: { jobs(): Array<{ status: ProviderJobStatus }> },
  _ids: string[],
): Promise<void> {
  const deadline = Date.now() + TERMINAL_WAIT_MS;
  while (!sim.jobs().every((j) => TERMINAL_STATUSES.has(j.status))) {
    if (Date.now() > deadline) throw new Error("jobs did not finish");
    await new Promise((r) => setTimeout(r, 5));
  }
}
