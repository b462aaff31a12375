// A burst of metered jobs for two customers while the payment provider fails a third of its meter
// event calls (5xx, half of them after recording the event), loses a further part of its answers
// and refuses a second concurrent call for one customer and meter (429): with the product's default reporting interval, the outbox drains within seconds of the
// last job's end (a failed call is tried again when its backoff ends, not at the next tick), and
// every attempt is recorded once with its billed seconds.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import { controllerStackForTests, mediaJob, waitForPhase, GPU_SECONDS_METER } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const CUSTOMERS = ["cus_drain_a", "cus_drain_b"];
const JOBS = 12;

const stack = controllerStackForTests(kc, {
  name: "usage-drain",
  sidecar: true,
  endpoints: ["asr"],
  sim: { meters: [GPU_SECONDS_METER] },
  // USAGE_REPORT_INTERVAL_SECONDS stays at its default (10 s).
  env: { PAYMENT_PROVIDER_API_KEY: "sim-payment-key" },
  manager: (env, sim) => ({ env: { ...env, PAYMENT_PROVIDER_API_URL: sim.url } }),
  accounts: CUSTOMERS,
});

describe("usage backlog under payment provider faults", () => {
  it("drains within seconds of the burst's end, each attempt recorded once", async () => {
    // Each call holds its customer and meter 100 ms: a second call for them meanwhile would get 429.
    stack.sim.setFaults({ paymentServerErrors: 0.35, lostMeterEventAnswers: 0.2, meterEventLatencyMs: 100 });
    const names = Array.from({ length: JOBS }, (_, i) => `burst-${i}`);
    for (const [i, name] of names.entries())
      await api.create(
        "mediajobs",
        stack.ns,
        mediaJob(name, { workload: "asr", account: CUSTOMERS[i % 2] }) as never,
      );
    for (const name of names) await waitForPhase(api, stack.ns, name, "Completed");
    const ended = Date.now();
    await eventually(
      async () => {
        const jobs = await Promise.all(names.map((n) => api.get<MediaJob>("mediajobs", stack.ns, n)));
        return jobs.every((j) => j?.status?.usage?.attempts.every((a) => a.meter === "Reported"));
      },
      { timeoutMs: 60_000 },
    );
    const drainedInMs = Date.now() - ended;
    // Well under the 10 s tick times the failed calls it took.
    expect(drainedInMs).toBeLessThan(25_000);
    const jobs = await Promise.all(names.map((n) => api.get<MediaJob>("mediajobs", stack.ns, n)));
    const events = stack.sim.meterEvents();
    for (const j of jobs) {
      const a = j!.status!.usage!.attempts[0]!;
      expect(events.filter((e) => e.identifier === a.identifier).map((e) => e.value)).toEqual([
        a.billedSeconds,
      ]);
    }
    expect(stack.sim.billingStats().serverErrors).toBeGreaterThan(0);
    // One call at a time per customer and meter: never refused for concurrency.
    expect(stack.sim.billingStats().concurrencyRefused).toBe(0);
    stack.sim.setFaults({});
  }, 150_000);
});
