// The GPU provider's bill allocated to accounts, against the real control plane and the
// simulator's own billing (its worker ledger, served as RunPod serves GET /v2/billing/serverless):
// each account's status.cost is its share of the provider's amounts by its jobs' execution time,
// and what the accounts were given plus what no job took is the provider's total, to the micro-USD.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { billingAccountName, type BillingAccount } from "../../src/crds/billingaccount.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import { providerBuckets } from "../support/provider-billing.js";
import { mediaJob, startControllerStack, waitForPhase, type ControllerStack } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let stack: ControllerStack;
const H = 3_600_000;

beforeAll(async () => {
  stack = await startControllerStack(kc, {
    name: "cost",
    sidecar: true,
    sim: { coldStartMs: 500 },
    endpoints: [{ workload: "asr", minWorkers: 0, maxWorkers: 2, idleTimeoutSeconds: 1 }],
    accounts: ["cus_cost_a", "cus_cost_b"],
    env: { COST_RECONCILE_INTERVAL_SECONDS: "1" },
  });
}, 120_000);
afterAll(async () => stack?.stop());

const account = (c: string) => api.get<BillingAccount>("billingaccounts", stack.ns, billingAccountName(c));

/** The provider's own record: its billing history for the endpoint over the last day, micro-USD. */
async function providerTotalMicros(endpointId: string): Promise<number> {
  const buckets = await providerBuckets(stack.sim.url, endpointId, Date.now() - 24 * H, Date.now());
  return [...buckets.values()].reduce((n, m) => n + m, 0);
}

describe("cost allocated from the provider's billing", () => {
  it("gives each account its jobs' share, and with what no job took adds up to the provider's bill", async () => {
    const jobs = [
      ["a-1", "cus_cost_a"],
      ["a-2", "cus_cost_a"],
      ["b-1", "cus_cost_b"],
    ] as const;
    for (const [name, acct] of jobs)
      await api.create("mediajobs", stack.ns, mediaJob(name, { workload: "asr", account: acct }) as never);
    const done: MediaJob[] = [];
    for (const [name] of jobs) done.push(await waitForPhase(api, stack.ns, name, "Completed", 60_000));
    const endpointId = done[0]!.status!.usage!.attempts[0]!.endpointId!;
    // The workers stop after their idle timeout: the provider's bill stops growing.
    await eventually(
      () => stack.sim.workerLedger(endpointId).every((r) => r.stoppedAt !== undefined) || undefined,
      {
        timeoutMs: 30_000,
      },
    );
    const executionMs = (acct: string) =>
      done
        .filter((j) => j.status?.usage?.account === acct)
        .reduce((n, j) => n + (j.status!.usage!.attempts[0]!.executionTimeMs ?? 0), 0);
    const total = await providerTotalMicros(endpointId);
    expect(total).toBeGreaterThan(0);
    const unallocated = async () => {
      const text = await stack.manager.metrics.registry.getSingleMetricAsString(
        "media_orchestrator_cost_unallocated_micros",
      );
      return Number(new RegExp(`endpoint="${endpointId}"} (\\d+)`).exec(text)?.[1] ?? NaN);
    };
    let a: BillingAccount | undefined;
    let b: BillingAccount | undefined;
    await eventually(
      async () => {
        a = await account("cus_cost_a");
        b = await account("cus_cost_b");
        const given = (a?.status?.cost?.allocatedMicros ?? 0) + (b?.status?.cost?.allocatedMicros ?? 0);
        return given + (await unallocated()) === total || undefined;
      },
      {
        timeoutMs: 30_000,
        message: () => `allocations ${JSON.stringify([a?.status?.cost, b?.status?.cost])} vs ${total}`,
      },
    );
    // Each account's execution time is its jobs' (the provider's executionTime, as the jobs recorded it).
    expect(a!.status!.cost!.executionMs).toBe(executionMs("cus_cost_a"));
    expect(b!.status!.cost!.executionMs).toBe(executionMs("cus_cost_b"));
    // In proportion to that time (one bucket, or a few if the run crossed an hour: a micro-USD each).
    const [ca, cb] = [a!.status!.cost!.allocatedMicros, b!.status!.cost!.allocatedMicros];
    expect(ca).toBeGreaterThan(0);
    expect(cb).toBeGreaterThan(0);
    const share = executionMs("cus_cost_a") / (executionMs("cus_cost_a") + executionMs("cus_cost_b"));
    expect(Math.abs(ca - share * (ca + cb))).toBeLessThanOrEqual(3);
    // At rest, nothing is written again: once the usage loop has dropped the jobs' count ids from
    // the account (its drain, a couple of seconds after the jobs are marked counted), the account
    // is not written by either loop.
    await eventually(async () => !(await account("cus_cost_a"))?.status?.usage?.counting?.length, {
      timeoutMs: 15_000,
    });
    const rv = (await account("cus_cost_a"))!.metadata.resourceVersion;
    await new Promise((r) => setTimeout(r, 2_500));
    expect((await account("cus_cost_a"))!.metadata.resourceVersion).toBe(rv);
  }, 120_000);
});
