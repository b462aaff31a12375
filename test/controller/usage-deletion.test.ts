// Deleting a MediaJob never drops its unreported usage silently, against the real control plane,
// the sidecar and the simulator's GPU and payment sides over HTTP: a job whose meter report waits
// (the payment provider failing) stays until the report lands, then goes, its event recorded once;
// a running job's deletion waits for the usage its cancel recorded; an annotation lets an operator
// delete without waiting, told by a Warning naming the seconds lost.
import { afterEach, describe, expect, it } from "vitest";
import { billingAccountName, type BillingAccount } from "../../src/crds/billingaccount.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { SKIP_USAGE_REPORT_ANNOTATION } from "../../src/mediajob/deletion.js";
import { USAGE_FINALIZER } from "../../src/mediajob/usage-hold.js";
import { activeAccount } from "../support/accounts.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { controllerStackForTests, mediaJob, meteredStackOptions, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const CUSTOMER = "cus_delete";
// The job's own finalizer waits 1 s for the report (USAGE_SETTLE_WAIT_SECONDS), so a report that
// waits longer hands over to the usage report's finalizer within the tests' waits.
const stack = controllerStackForTests(
  kc,
  meteredStackOptions("usage-deletion", { accounts: [CUSTOMER], env: { USAGE_SETTLE_WAIT_SECONDS: "1" } }),
);

// A case that fails leaves no payment outage to the next (each sets its own faults).
afterEach(() => stack.sim?.setFaults({}));

const getJob = (name: string) => api.get<MediaJob>("mediajobs", stack.ns, name);
const gone = (name: string, timeoutMs = 60_000) =>
  eventually(async () => (await getJob(name)) === undefined, {
    timeoutMs,
    message: `MediaJob ${name} to be deleted`,
  });
const meteredFor = (job: MediaJob) =>
  stack.sim.meterEvents().filter((e) => e.identifier === `mj_${job.metadata.uid}_1`);
/**
 * The job as the usage loop left it once a send was tried and failed: still Pending, its used
 * seconds counted (a key backing off counts what it could not send), the provider's 5xx seen.
 */
const tried = async (name: string): Promise<MediaJob> => {
  let job: MediaJob | undefined;
  await eventually(
    async () => {
      job = await getJob(name);
      const a = job?.status?.usage?.attempts[0];
      return a?.meter === "Pending" && a.counted === true && stack.sim.billingStats().serverErrors > 0;
    },
    { timeoutMs: 30_000 },
  );
  return job!;
};

describe("a deletion waits for the job's usage report", () => {
  it("a finished job is kept by the usage report's finalizer only until its usage is reported", async () => {
    stack.sim.setFaults({ paymentServerErrorsFirst: 1_000_000 });
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("kept", { workload: "asr", account: CUSTOMER }) as never,
    );
    await waitForPhase(api, stack.ns, "kept", "Completed");
    await eventually(async () => (await getJob("kept"))?.metadata.finalizers?.includes(USAGE_FINALIZER));
    stack.sim.setFaults({});
    await eventually(async () => {
      const job = await getJob("kept");
      return job?.status?.usage?.attempts[0]?.countedReported === true && !job.metadata.finalizers?.length;
    });
    expect((await getJob("kept"))?.metadata.deletionTimestamp).toBeUndefined();
  }, 120_000);

  it("a finished job deleted while the payment provider fails stays until its usage is reported, then goes; metered once", async () => {
    stack.sim.setFaults({ paymentServerErrorsFirst: 1_000_000 });
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("done-1", { workload: "asr", account: CUSTOMER }) as never,
    );
    await waitForPhase(api, stack.ns, "done-1", "Completed");
    const job = await tried("done-1");
    const seconds = job.status!.usage!.billedSeconds!;
    expect(seconds).toBeGreaterThan(0);
    // Let go of by the run's finalizer, kept by the usage report's.
    await eventually(async () => (await getJob("done-1"))?.metadata.finalizers?.includes(USAGE_FINALIZER));
    await api.delete("mediajobs", stack.ns, "done-1");
    await eventually(async () =>
      (await eventsOf(kc, stack.ns, "done-1")).some((e) => e.reason === "DeletionWaitsForUsage"),
    );
    // Still there a while later, its report still in the outbox.
    await new Promise((r) => setTimeout(r, 3_000));
    const waiting = await getJob("done-1");
    expect(waiting?.metadata.deletionTimestamp).toBeDefined();
    expect(waiting?.status?.usage?.attempts[0]?.meter).toBe("Pending");
    expect(meteredFor(job)).toEqual([]);
    // The payment provider is back: reported once, then the object goes.
    stack.sim.setFaults({});
    await gone("done-1");
    expect(meteredFor(job).map((e) => e.value)).toEqual([seconds]);
    const reasons = (await eventsOf(kc, stack.ns, "done-1")).map((e) => e.reason);
    expect(reasons).not.toContain("UsageUnreportedOnDeletion");
  }, 120_000);

  it("a running job's deletion: the cancel records its usage, and the object waits for that report", async () => {
    stack.sim.setFaults({ paymentServerErrorsFirst: 1_000_000 });
    stack.sim.holdJob("run-1");
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("run", { workload: "asr", account: CUSTOMER, id: "run-1" }) as never,
    );
    await waitForPhase(api, stack.ns, "run", "Processing");
    await eventually(async () => (await getJob("run"))?.status?.providerJobId);
    await new Promise((r) => setTimeout(r, 1_200)); // it runs a while: a second or two to bill
    await api.delete("mediajobs", stack.ns, "run");
    const job = await tried("run");
    expect(job.status?.phase).toBe("Cancelled");
    expect(stack.sim.getJob("run-1")?.status).toBe("CANCELLED");
    const seconds = job.status!.usage!.billedSeconds!;
    expect(seconds).toBeGreaterThan(0);
    expect(job.metadata.deletionTimestamp).toBeDefined();
    stack.sim.setFaults({});
    await gone("run");
    expect(meteredFor(job).map((e) => e.value)).toEqual([seconds]);
    stack.sim.releaseJob("run-1");
  }, 120_000);

  it(`${SKIP_USAGE_REPORT_ANNOTATION}=true: goes at once, with a Warning naming the seconds lost`, async () => {
    stack.sim.setFaults({ paymentServerErrorsFirst: 1_000_000 });
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("skip", { workload: "asr", account: CUSTOMER }) as never,
    );
    await waitForPhase(api, stack.ns, "skip", "Completed");
    const job = await tried("skip");
    const seconds = job.status!.usage!.billedSeconds!;
    await api.mergePatch("mediajobs", stack.ns, "skip", {
      metadata: { annotations: { [SKIP_USAGE_REPORT_ANNOTATION]: "true" } },
    });
    await api.delete("mediajobs", stack.ns, "skip");
    await gone("skip", 20_000);
    const lost = (await eventsOf(kc, stack.ns, "skip")).find((e) => e.reason === "UsageUnreportedOnDeletion");
    expect(lost?.type).toBe("Warning");
    expect(lost?.message).toContain(`${seconds} GPU seconds not reported`);
    expect(lost?.message).toContain(`mj_${job.metadata.uid}_1`);
    expect(
      await stack.manager.metrics.registry.getSingleMetricAsString(
        "media_orchestrator_usage_dropped_on_deletion_seconds_total",
      ),
    ).toMatch(new RegExp(`^media_orchestrator_usage_dropped_on_deletion_seconds_total ${seconds}$`, "m"));
    stack.sim.setFaults({});
  }, 120_000);
});

describe("usage whose BillingAccount is gone", () => {
  it("is surfaced (Event, gauge), keeps its job past the TTL, and is counted once the account is back", async () => {
    const customer = "cus_gone";
    const name = billingAccountName(customer);
    await activeAccount(api, stack.ns, customer);
    stack.sim.holdJob("orphan-1");
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("orphan", {
        workload: "asr",
        account: customer,
        id: "orphan-1",
        ttlSecondsAfterFinished: 0,
      }) as never,
    );
    await waitForPhase(api, stack.ns, "orphan", "Processing");
    // The account goes while its job runs (an operator's cleanup).
    await api.delete("billingaccounts", stack.ns, name);
    await eventually(async () => (await api.get("billingaccounts", stack.ns, name)) === undefined);
    stack.sim.releaseJob("orphan-1");
    await waitForPhase(api, stack.ns, "orphan", "Completed");
    await eventually(async () =>
      (await eventsOf(kc, stack.ns, "orphan")).some((e) => e.reason === "UsageAccountMissing"),
    );
    const missing = (await eventsOf(kc, stack.ns, "orphan")).find((e) => e.reason === "UsageAccountMissing")!;
    expect(missing.type).toBe("Warning");
    expect(missing.message).toContain(`BillingAccount ${name} (customer ${customer})`);
    await eventually(async () =>
      /media_orchestrator_usage_account_missing 1\b/.test(
        await stack.manager.metrics.registry.getSingleMetricAsString(
          "media_orchestrator_usage_account_missing",
        ),
      ),
    );
    // Reported to the meter all the same (the customer id is the job's), but kept past its TTL of 0.
    const job = (await getJob("orphan"))!;
    const seconds = job.status!.usage!.billedSeconds!;
    await eventually(async () => (await getJob("orphan"))?.status?.usage?.attempts[0]?.meter === "Reported");
    expect((await getJob("orphan"))?.status?.usage?.attempts[0]?.counted).not.toBe(true);
    // Back (the sidecar recreates it from the customer's next subscription event): counted once, then the TTL.
    await activeAccount(api, stack.ns, customer);
    await gone("orphan");
    const usage = (await api.get<BillingAccount>("billingaccounts", stack.ns, name))?.status?.usage;
    expect(usage).toMatchObject({ usedSeconds: seconds, reportedSeconds: seconds });
    expect(meteredFor(job).map((e) => e.value)).toEqual([seconds]);
    await eventually(async () =>
      /media_orchestrator_usage_account_missing 0\b/.test(
        await stack.manager.metrics.registry.getSingleMetricAsString(
          "media_orchestrator_usage_account_missing",
        ),
      ),
    );
  }, 120_000);
});
