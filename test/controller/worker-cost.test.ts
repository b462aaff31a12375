// The worker-cost rule against the real control plane and the simulator's own records: once an
// hour of the provider's bill is settled, each account is metered its share of it (cold starts and
// idle tails included) to the worker-cost meter, each share once, and the shares add up to what the
// provider billed for that hour. The payment provider answers 5xx meanwhile (some after recording
// the event): the settled figures wait, and the same events go again under the same identifiers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { billingAccountName, type BillingAccount } from "../../src/crds/billingaccount.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { kubectlMedia } from "../support/cli.js";
import { providerBuckets } from "../support/provider-billing.js";
import { eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import {
  GPU_SECONDS_METER,
  mediaJob,
  meteredStackOptions,
  startControllerStack,
  waitForPhase,
  type ControllerStack,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const H = 3_600_000;
const WORKER_COST_METER = {
  id: "mtr_worker_cost",
  event_name: "gpu_worker_cost",
  display_name: "GPU worker cost",
};
let stack: ControllerStack;
/** How far the cost loop's clock is ahead of the wall clock: past the hour the jobs ran in. */
let ahead = 0;

beforeAll(async () => {
  const base = meteredStackOptions("worker-cost", {
    sim: { meters: [GPU_SECONDS_METER, WORKER_COST_METER], coldStartMs: 500 },
    env: {
      USAGE_WORKER_COST_METER_EVENT_NAME: WORKER_COST_METER.event_name,
      COST_RECONCILE_INTERVAL_SECONDS: "1",
      COST_SETTLE_AFTER_SECONDS: "0",
    },
    accounts: ["cus_wc_sparse", "cus_wc_busy"],
  });
  stack = await startControllerStack(kc, {
    ...base,
    endpoints: [{ workload: "asr", minWorkers: 0, maxWorkers: 2, idleTimeoutSeconds: 1 }],
    manager: (env, sim) => ({ ...base.manager!(env, sim), costClock: () => Date.now() + ahead }),
  });
}, 120_000);
afterAll(async () => stack?.stop());

const account = (c: string) => api.get<BillingAccount>("billingaccounts", stack.ns, billingAccountName(c));
const workerCostEvents = () =>
  stack.sim.meterEvents().filter((e) => e.eventName === WORKER_COST_METER.event_name);

describe("the worker-cost rule", () => {
  it("meters each account's share of a settled hour once, the shares adding up to the provider's bill", async () => {
    const jobs = [
      ["sparse-1", "cus_wc_sparse"],
      ["busy-1", "cus_wc_busy"],
      ["busy-2", "cus_wc_busy"],
      ["busy-3", "cus_wc_busy"],
    ] as const;
    for (const [name, acct] of jobs)
      await api.create("mediajobs", stack.ns, mediaJob(name, { workload: "asr", account: acct }) as never);
    const done: MediaJob[] = [];
    for (const [name] of jobs) done.push(await waitForPhase(api, stack.ns, name, "Completed", 60_000));
    const endpointId = done[0]!.status!.usage!.attempts[0]!.endpointId!;
    await eventually(
      () => stack.sim.workerLedger(endpointId).every((r) => r.stoppedAt !== undefined) || undefined,
      { timeoutMs: 30_000 },
    );
    // The hour is still open: its cost is allocated (status.cost) but nothing is metered yet.
    await eventually(
      async () => ((await account("cus_wc_busy"))?.status?.cost?.allocatedMicros ?? 0) > 0 || undefined,
      {
        timeoutMs: 30_000,
      },
    );
    expect(workerCostEvents()).toEqual([]);

    // The payment provider fails half its calls (some after recording); the hour ends.
    stack.sim.setFaults({ paymentServerErrors: 0.5 });
    ahead = Math.ceil(Date.now() / H) * H - Date.now() + 60_000;
    const metered = async (c: string) => (await account(c))?.status?.cost?.workerCostMeteredMicros;
    await eventually(
      async () =>
        (((await metered("cus_wc_sparse")) ?? 0) > 0 && ((await metered("cus_wc_busy")) ?? 0) > 0) ||
        undefined,
      {
        timeoutMs: 60_000,
      },
    );
    stack.sim.setFaults({});
    // A few more passes: nothing more is sent.
    await new Promise((r) => setTimeout(r, 3_000));

    const events = workerCostEvents();
    const identifiers = events.map((e) => e.identifier);
    expect(new Set(identifiers).size).toBe(identifiers.length);
    const sum = (c: string) => events.filter((e) => e.customer === c).reduce((n, e) => n + e.value, 0);
    expect(await metered("cus_wc_sparse")).toBe(sum("cus_wc_sparse"));
    expect(await metered("cus_wc_busy")).toBe(sum("cus_wc_busy"));
    // Against the provider's record: the hours the jobs ran in, billed whole to the two accounts.
    const billed = await providerBuckets(stack.sim.url, endpointId, Date.now() - 2 * H, Date.now() + H);
    const ranIn = new Set(done.map((j) => Math.floor(Date.parse(j.status!.completedAt!) / H) * H));
    const providerAmount = [...ranIn].reduce((n, start) => n + (billed.get(start) ?? 0), 0);
    expect(providerAmount).toBeGreaterThan(0);
    expect(sum("cus_wc_sparse") + sum("cus_wc_busy")).toBe(providerAmount);
    // The settled figures are what was metered: settled and metered advance together.
    const sparse = await account("cus_wc_sparse");
    expect(sparse!.status!.cost!.settledMicros).toBe(sum("cus_wc_sparse"));
    // kubectl media usage shows it, per customer.
    const shown = await kubectlMedia(["usage", "-o", "json", "-n", stack.ns], {
      KUBECONFIG: testKubeconfigPath(),
    });
    const items = (
      JSON.parse(shown.stdout) as { items: Array<{ customer: string; workerCostMeteredMicros: number }> }
    ).items;
    expect(items.find((i) => i.customer === "cus_wc_busy")?.workerCostMeteredMicros).toBe(sum("cus_wc_busy"));
  }, 180_000);
});
