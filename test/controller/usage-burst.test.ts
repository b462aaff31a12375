// One customer's burst of ended jobs, metered through the payment provider's v2 meter event stream,
// against the real control plane and the simulator's payment API over HTTP: the backlog drains in
// batches of up to 100 (a few calls, not one per job), and with 5xx, lost answers and 429 on the
// way every attempt is still recorded once, with its billed seconds, and marked Reported.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { meterIdentifier } from "../../src/mediajob/usage.js";
import { makeMediaJob } from "../support/builders.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import { controllerStackForTests, GPU_SECONDS_METER } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const CUSTOMER = "cus_burst";
const stack = controllerStackForTests(kc, {
  name: "usage-burst",
  sim: {
    meters: [GPU_SECONDS_METER],
    // Down while the burst is written, so the whole burst waits in the outbox at once.
    faults: { paymentServerErrorsFirst: 1_000_000 },
  },
  env: { PAYMENT_PROVIDER_API_KEY: "sim-payment-key", USAGE_REPORT_INTERVAL_SECONDS: "1" },
  manager: (env, sim) => ({ env: { ...env, PAYMENT_PROVIDER_API_URL: sim.url } }),
  accounts: [CUSTOMER],
});

/** Writes `n` ended jobs of the customer, each one attempt's usage in the outbox; their identifiers and values. */
async function endedJobs(prefix: string, n: number): Promise<Map<string, number>> {
  const expected = new Map<string, number>();
  const ended = new Date(Date.now() - 60_000).toISOString();
  const names = Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
  for (let i = 0; i < names.length; i += 25)
    await Promise.all(
      names.slice(i, i + 25).map(async (name, k) => {
        const job = await api.create<MediaJob>(
          "mediajobs",
          stack.ns,
          makeMediaJob(name)
            .account(CUSTOMER)
            .input({ audio: `s3://in/${name}.wav` })
            .build(),
        );
        const identifier = meterIdentifier({ uid: job.metadata.uid!, attempt: 1 });
        const billedSeconds = 1 + ((i + k) % 7);
        expected.set(identifier, billedSeconds);
        // The controller may have written the new job's first status: the ended one replaces it.
        await api.updateStatusWithRetry<MediaJob>("mediajobs", stack.ns, name, (cur) => ({
          ...cur,
          status: {
            phase: "Completed",
            jobId: job.metadata.uid,
            providerJobId: `sim-${name}`,
            attempts: 1,
            completedAt: ended,
            updatedAt: ended,
            usage: {
              workload: "asr",
              account: CUSTOMER,
              billedSeconds,
              attempts: [
                {
                  attempt: 1,
                  providerJobId: `sim-${name}`,
                  providerStatus: "COMPLETED",
                  executionTimeMs: billedSeconds * 1000,
                  endedAt: ended,
                  billedSeconds,
                  meter: "Pending",
                  eventName: "gpu_seconds",
                  identifier,
                },
              ],
            },
          },
        }));
      }),
    );
  return expected;
}

async function allReported(prefix: string): Promise<MediaJob[]> {
  let jobs: MediaJob[] = [];
  await eventually(
    async () => {
      jobs = (await api.list<MediaJob>("mediajobs", stack.ns)).items.filter((j) =>
        j.metadata.name.startsWith(`${prefix}-`),
      );
      return jobs.every((j) => j.status?.usage?.attempts.every((a) => a.meter === "Reported"));
    },
    { timeoutMs: 90_000 },
  );
  return jobs;
}

/** Every expected identifier recorded exactly once with its value, and no other of these jobs'. */
function expectRecordedOnce(expected: Map<string, number>): void {
  const recorded = stack.sim.meterEvents().filter((e) => expected.has(e.identifier));
  expect(recorded.map((e) => [e.identifier, e.value]).sort()).toEqual([...expected.entries()].sort());
}

describe("one customer's burst, metered through the v2 stream", () => {
  it("drains 250 waiting attempts in a few calls", async () => {
    const expected = await endedJobs("burst", 250);
    const before = stack.sim.billingStats();
    stack.sim.setFaults({});
    const jobs = await allReported("burst");
    expect(jobs).toHaveLength(250);
    expectRecordedOnce(expected);
    const after = stack.sim.billingStats();
    // Batches of up to 100: three stream calls (and a few more if a pass began mid-burst), not 250.
    expect(after.streamCalls - before.streamCalls).toBeLessThanOrEqual(6);
    expect(after.meterEventCalls - before.meterEventCalls).toBeLessThanOrEqual(2);
    expect(
      stack.sim.meterEvents().filter((e) => expected.has(e.identifier) && e.via === "v2").length,
    ).toBeGreaterThan(240);
  }, 180_000);

  it("with lost answers, 5xx and 429 on the way, records each attempt once", async () => {
    stack.sim.setFaults({ paymentServerErrorsFirst: 1_000_000 });
    const expected = await endedJobs("faulty", 220);
    const start = stack.sim.billingStats();
    const grown = (k: "lostAnswers" | "serverErrors", by: number) =>
      eventually(() => stack.sim.billingStats()[k] - start[k] >= by, { timeoutMs: 60_000 });
    // Batches recorded whose answers are lost: sent again, the same identifiers.
    stack.sim.setFaults({ lostMeterEventAnswers: 1 });
    await grown("lostAnswers", 2);
    // Then 500s, half of them after the batch was recorded.
    stack.sim.setFaults({ paymentServerErrors: 1 });
    await grown("serverErrors", 2);
    // Then a rate limit that refuses most calls with 429.
    stack.sim.setFaults({ paymentRateLimit: { requestsPerSecond: 0.2 } });
    await allReported("faulty");
    stack.sim.setFaults({});
    expectRecordedOnce(expected);
    expect(stack.sim.billingStats().rateLimited - start.rateLimited).toBeGreaterThan(0);
    // Resent batches were dropped as duplicates; nothing else was refused after the 200.
    expect(stack.sim.meterErrors().filter((e) => e.code !== "duplicate_meter_event")).toEqual([]);
  }, 180_000);
});
