// A plan's limits against the real control plane, the sidecar and the simulator over HTTP, where
// the controller's own records lag: the account's count (status.usage.usedSeconds) is written by
// the usage reporter's pass, which waits on the payment provider's answers, yet a job of the
// account that ends at the plan's cap stops the account's next job at once; and jobs created at
// once, before any has a status, still run no more at a time than the plan allows.
import { describe, expect, it } from "vitest";
import { billingAccountName, type BillingAccount } from "../../src/crds/index.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import {
  condition,
  controllerStackForTests,
  mediaJob,
  meteredStackOptions,
  waitForPhase,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);

const PLANS = {
  // One job's run (at least 1 s billed) reaches it; one job at a time.
  price_tiny: { gpuSecondsPerPeriod: 1, maxConcurrentJobs: 1, maxExecutionTimeoutMs: 600_000 },
  price_roomy: { gpuSecondsPerPeriod: 1_000_000, maxExecutionTimeoutMs: 600_000 },
  price_single: { gpuSecondsPerPeriod: 1_000_000, maxConcurrentJobs: 1, maxExecutionTimeoutMs: 600_000 },
};
/** How long the payment provider takes to answer a meter event: the reporter's pass waits on it. */
const METER_LATENCY_MS = 6_000;

const stack = controllerStackForTests(
  kc,
  meteredStackOptions("plans-lag", {
    env: { MEDIA_PLANS: JSON.stringify(PLANS) },
    accounts: [
      { customer: "cus_busy", status: { priceIds: ["price_roomy"] } },
      { customer: "cus_tiny", status: { priceIds: ["price_tiny"] } },
      { customer: "cus_single", status: { priceIds: ["price_single"] } },
    ],
  }),
);

const getJob = (name: string) => api.get<MediaJob>("mediajobs", stack.ns, name);
const usedSeconds = async (customer: string) =>
  (await api.get<BillingAccount>("billingaccounts", stack.ns, billingAccountName(customer)))?.status?.usage
    ?.usedSeconds ?? 0;

describe("a plan's seconds while the account's count lags", () => {
  it("holds the account's next job once a job ends at the cap, before the count shows it", async () => {
    stack.sim.setFaults({ meterEventLatencyMs: METER_LATENCY_MS });
    // Another customer's job ends: the reporter's pass sends its meter event, and waits.
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("busy", { workload: "asr", account: "cus_busy" }) as never,
    );
    await waitForPhase(api, stack.ns, "busy", "Completed");
    // Its attempt billed and Pending: the usage loop calls the meter now.
    await eventually(async () => {
      const a = (await getJob("busy"))?.status?.usage?.attempts[0];
      return a?.meter === "Pending" && a.billedSeconds !== undefined;
    });
    const sending = Date.now();

    // Meanwhile the tiny plan's customer creates two jobs: one at a time, the first to run
    // reaches the cap.
    for (const name of ["one", "two"])
      await api.create(
        "mediajobs",
        stack.ns,
        mediaJob(name, { workload: "asr", account: "cus_tiny" }) as never,
      );
    const ran = await eventually(async () => {
      for (const name of ["one", "two"]) if ((await getJob(name))?.status?.phase === "Completed") return name;
      return undefined;
    });
    const ranJob = await getJob(ran);
    expect(ranJob?.status?.usage?.attempts[0]?.billedSeconds).toBeGreaterThanOrEqual(1);
    const other = ran === "one" ? "two" : "one";

    let last: MediaJob | undefined;
    const held = await eventually(
      async () => {
        last = await getJob(other);
        return condition(last, "Admitted")?.reason === "UsageLimitReached" ? last : undefined;
      },
      {
        message: () =>
          `${other} held at the limit (last: ${JSON.stringify({ ...last?.status, output: undefined })}; ${ran}: ${JSON.stringify({ ...ranJob?.status, output: undefined })})`,
      },
    );
    expect(held.status?.attempts ?? 0).toBe(0);
    // Held before the reporter's pass could count the first job into the account.
    expect(Date.now() - sending).toBeLessThan(METER_LATENCY_MS);
    expect(await usedSeconds("cus_tiny")).toBe(0);

    // The count catches up; the job still waits, never submitted.
    await eventually(async () => (await usedSeconds("cus_tiny")) >= 1, { timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 2_000));
    const after = await getJob(other);
    expect(after?.status?.phase).toBe("Pending");
    expect(after?.status?.attempts ?? 0).toBe(0);
    expect(condition(after, "Admitted")?.reason).toBe("UsageLimitReached");
    stack.sim.setFaults({});
  }, 90_000);

  it("runs new jobs created in a burst one at a time under maxConcurrentJobs 1", async () => {
    const names = Array.from({ length: 12 }, (_, i) => `single-${i}`);
    // One after the other, a few ms apart: each lands while the one before is being submitted.
    for (const name of names)
      await api.create(
        "mediajobs",
        stack.ns,
        mediaJob(name, { workload: "asr", account: "cus_single", id: name }) as never,
      );
    for (const name of names) await waitForPhase(api, stack.ns, name, "Completed", 60_000);
    // At the provider: from when it took each job to when the job ended, none overlapped another.
    const spans = names
      .map((name) => stack.sim.getJob(name)!.timeline)
      .map((t) => [t.submitted, t.ended!] as const)
      .sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < spans.length; i++)
      expect(spans[i]![0], `job ${i} taken before job ${i - 1} ended`).toBeGreaterThanOrEqual(
        spans[i - 1]![1],
      );
  }, 90_000);
});
