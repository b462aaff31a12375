// How long after one customer's burst of ended jobs its usage is fully metered: N finished
// MediaJobs of one customer, each with one attempt's usage waiting in the outbox (meter=Pending),
// are written directly (as the controller leaves them when the jobs end), then the controller starts
// with metering on against the simulator's payment API, whose every meter call takes a set latency
// (Stripe answers in about 100-300 ms). Measured: seconds from the controller's start until every
// attempt is Reported (the backlog is 0), the meter calls it took, and that each identifier was
// recorded once with its value.
import { randomUUID } from "node:crypto";
import type { ChildProcess } from "node:child_process";
import { billingAccountName } from "../src/crds/billingaccount.js";
import { API_VERSION } from "../src/crds/common.js";
import type { MediaJob } from "../src/crds/mediajob.js";
import type { KubeApi, KubeObject } from "../src/k8s/api.js";
import { meterIdentifier } from "../src/mediajob/usage.js";
import { startSimulator } from "../tools/simulator/server.js";
import { freePort } from "../scripts/devstack-lib.js";
import { finishedJobStatus } from "./jobs.js";
import { pool, round, startProcess, stopChild, waitHttp } from "./lib.js";
import { changeBinding } from "../src/cli/bind.js";

export interface MeteringContext {
  api: KubeApi;
  namespace: (name: string) => Promise<string>;
  baseEnv: (ns: string, simUrl: string, extra?: Record<string, string>) => Record<string, string>;
  concurrency: number;
  log: (s: string) => void;
}

export interface MeteringResult {
  jobs: number;
  customers: 1;
  /** Real ms each meter call (v1 event, v2 session or stream batch) takes at the simulator. */
  meterCallLatencyMs: number;
  /** From the controller's start until every attempt was Reported. */
  secondsToMetered: number;
  /** Until the simulator had recorded every event (the rest is the Reported writes). */
  secondsToRecorded: number;
  meterCalls: { v1Events: number; v2StreamBatches: number; requests: number };
  eventsRecorded: number;
  identifiersRecordedTwice: number;
  valueMismatches: number;
}

const CUSTOMER = "cus_bench_burst";
const EVENT_NAME = "gpu_seconds";

export async function metering(c: MeteringContext, n: number, latencyMs: number): Promise<MeteringResult> {
  const ns = await c.namespace(`bench-metering-${Date.now().toString(36)}`);
  const sim = await startSimulator({
    meters: [{ id: "mtr_bench", event_name: EVENT_NAME, display_name: "GPU seconds" }],
    faults: { meterEventLatencyMs: latencyMs },
  });
  let controller: ChildProcess | undefined;
  try {
    await changeBinding(c.api, ns, CUSTOMER, "bind");
    const account = await c.api.create("billingaccounts", ns, {
      apiVersion: API_VERSION,
      kind: "BillingAccount",
      metadata: { name: billingAccountName(CUSTOMER) },
      spec: { customerId: CUSTOMER },
    } as KubeObject);
    await c.api.replaceStatus("billingaccounts", {
      ...account,
      status: { subscriptionStatus: "active" },
    } as KubeObject);
    c.log(`  metering: writing ${n} ended jobs of one customer with usage in the outbox...`);
    const expected = new Map<string, number>();
    const ended = new Date(Date.now() - 60_000).toISOString();
    await pool(
      Array.from({ length: n }, (_, i) => `burst-${i}`),
      c.concurrency,
      async (name, i) => {
        const created = await c.api.create<MediaJob>("mediajobs", ns, {
          apiVersion: API_VERSION,
          kind: "MediaJob",
          metadata: { name },
          spec: { workload: "asr", account: CUSTOMER, input: { audio: `s3://bench/${name}.wav` } },
        } as KubeObject);
        const uid = created.metadata.uid!;
        const identifier = meterIdentifier({ uid, attempt: 1 });
        const billedSeconds = 1 + (i % 37);
        expected.set(identifier, billedSeconds);
        await c.api.replaceStatus("mediajobs", {
          ...created,
          status: {
            ...finishedJobStatus(randomUUID(), ended),
            usage: {
              workload: "asr",
              account: CUSTOMER,
              billedSeconds,
              attempts: [
                {
                  attempt: 1,
                  providerJobId: `sim-${uid}`,
                  providerStatus: "COMPLETED",
                  executionTimeMs: billedSeconds * 1000,
                  delayTimeMs: 0,
                  endedAt: ended,
                  billedSeconds,
                  meter: "Pending",
                  eventName: EVENT_NAME,
                  identifier,
                },
              ],
            },
          },
        } as KubeObject);
      },
    );
    const ctrlPort = await freePort();
    const env = c.baseEnv(ns, sim.url, {
      CONTROLLER_METRICS_PORT: String(ctrlPort),
      PAYMENT_PROVIDER_API_URL: sim.url,
      PAYMENT_PROVIDER_API_KEY: "sim-payment-key",
      USAGE_METERING: "true",
      CALLBACK_BASE_URL: "http://127.0.0.1:9",
    });
    c.log(`  metering: starting the controller (meter calls take ${latencyMs} ms)...`);
    const started = Date.now();
    controller = startProcess("controller-metering", "controller", env);
    await waitHttp(`http://127.0.0.1:${ctrlPort}/readyz`, 120_000);
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    let recordedAt = 0;
    for (;;) {
      if (Date.now() - started > 90 * 60_000) throw new Error("usage not metered after 90 min");
      if (recordedAt === 0) {
        if (new Set(sim.meterEvents().map((e) => e.identifier)).size >= n) recordedAt = Date.now();
        else {
          await sleep(1000);
          continue;
        }
      }
      const jobs = (await c.api.list<MediaJob>("mediajobs", ns)).items;
      if (jobs.every((j) => j.status?.usage?.attempts.every((a) => a.meter === "Reported"))) break;
      await sleep(1000);
    }
    const meteredAt = Date.now();
    const events = sim.meterEvents();
    const seen = new Map<string, number>();
    for (const e of events) seen.set(e.identifier, (seen.get(e.identifier) ?? 0) + 1);
    const stats = sim.billingStats();
    return {
      jobs: n,
      customers: 1,
      meterCallLatencyMs: latencyMs,
      secondsToMetered: round((meteredAt - started) / 1000, 1),
      secondsToRecorded: round((recordedAt - started) / 1000, 1),
      meterCalls: {
        v1Events: stats.meterEventCalls,
        v2StreamBatches: stats.streamCalls,
        requests: stats.requests,
      },
      eventsRecorded: events.length,
      identifiersRecordedTwice: [...seen.values()].filter((k) => k > 1).length,
      valueMismatches: events.filter((e) => expected.get(e.identifier) !== e.value).length,
    };
  } finally {
    if (controller) await stopChild(controller);
    await sim.close();
  }
}
