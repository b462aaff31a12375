// Usage metered exactly once, against the real control plane, the sidecar (callbacks confirmed at
// the provider's /status) and the simulator's GPU and payment sides over HTTP: each ended job's
// GPU time is recorded on the MediaJob, billed, sent as one meter event per attempt, counted into
// its BillingAccount's period usage, and a payment provider that is down for a while (and loses
// answers) leaves a visible backlog that drains with every identifier recorded once.
import { execFileSync } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { billingAccountName, type BillingAccount } from "../../src/crds/billingaccount.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import type { Manager } from "../../src/controller/manager.js";
import { activeAccount } from "../support/accounts.js";
import { changeBinding } from "../../src/cli/bind.js";
import { eventsOf, eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import {
  controllerStackForTests,
  mediaJob,
  startManager,
  waitForPhase,
  meteredStackOptions,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const CUSTOMER = "cus_meter";
const stack = controllerStackForTests(kc, meteredStackOptions("usage", { accounts: [CUSTOMER] }));
/** The controller that takes over from the stack's in the outage test (a leader change). */
let successor: Manager | undefined;

// Hooks after a file's run go last-registered first: the successor stops before the stack.
afterAll(async () => {
  await successor?.stop();
});

const getJob = (name: string) => api.get<MediaJob>("mediajobs", stack.ns, name);
const getAccount = () => api.get<BillingAccount>("billingaccounts", stack.ns, billingAccountName(CUSTOMER));
const billed = (executionMs: number) => Math.ceil(executionMs / 1000);

async function reported(name: string): Promise<MediaJob> {
  let job: MediaJob | undefined;
  await eventually(
    async () => {
      job = await getJob(name);
      const a = job?.status?.usage?.attempts ?? [];
      return (
        a.length > 0 &&
        a.every((x) => x.meter === "Reported" && x.counted === true && x.countedReported === true)
      );
    },
    { timeoutMs: 60_000 },
  );
  return job!;
}

describe("usage recorded and metered once", () => {
  it("records the provider's times on the job, meters them once and counts them into the account", async () => {
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("clip-1", { workload: "asr", account: CUSTOMER }) as never,
    );
    await waitForPhase(api, stack.ns, "clip-1", "Completed");
    const job = await reported("clip-1");
    const atProvider = stack.sim.getJob(job.status!.providerJobId!)!;
    expect(atProvider.executionTime).toBeGreaterThan(0);
    const seconds = billed(atProvider.executionTime!);
    expect(job.status?.usage).toMatchObject({
      workload: "asr",
      account: CUSTOMER,
      billedSeconds: seconds,
      attempts: [
        {
          attempt: 1,
          providerJobId: atProvider.id,
          endpointId: job.status?.endpointId,
          providerStatus: "COMPLETED",
          executionTimeMs: atProvider.executionTime,
          delayTimeMs: atProvider.delayTime,
          billedSeconds: seconds,
          meter: "Reported",
          eventName: "gpu_seconds",
          identifier: `mj_${job.metadata.uid}_1`,
        },
      ],
    });
    const events = stack.sim.meterEvents().filter((e) => e.identifier === `mj_${job.metadata.uid}_1`);
    expect(events).toMatchObject([
      { customer: CUSTOMER, value: seconds, eventName: "gpu_seconds", meterId: "mtr_gpu" },
    ]);
    await eventually(async () => (await getAccount())?.status?.usage?.reportedSeconds === seconds);
    expect((await getAccount())?.status?.usage).toMatchObject({
      usedSeconds: seconds,
      reportedSeconds: seconds,
    });
    // kubectl get mj -o wide shows the billed seconds.
    const wide = execFileSync(
      "kubectl",
      ["--kubeconfig", testKubeconfigPath(), "-n", stack.ns, "get", "mj", "clip-1", "-o", "wide"],
      {
        encoding: "utf8",
      },
    );
    expect(wide.split("\n")[0]).toMatch(/GPU SECONDS/);
    expect(wide.split("\n")[1]).toMatch(new RegExp(`\\s${seconds}\\s*$`));
  }, 90_000);

  it("a payment provider down for a while: the backlog waits (the TTL too), shows, and drains once, despite lost answers", async () => {
    const before = (await getAccount())?.status?.usage?.usedSeconds ?? 0;
    stack.sim.setFaults({ paymentServerErrorsFirst: 1_000_000 });
    const names = ["outage-1", "outage-2", "outage-3"];
    for (const name of names)
      await api.create(
        "mediajobs",
        stack.ns,
        mediaJob(name, { workload: "asr", account: CUSTOMER, ttlSecondsAfterFinished: 0 }) as never,
      );
    for (const name of names) await waitForPhase(api, stack.ns, name, "Completed");
    // Unreported: kept past their TTL, in the outbox, counted as used but not reported.
    await eventually(
      async () => {
        const jobs = await Promise.all(names.map(getJob));
        return jobs.every(
          (j) =>
            j?.status?.usage?.attempts[0]?.counted === true && j.status.usage.attempts[0].meter === "Pending",
        );
      },
      { timeoutMs: 30_000 },
    );
    await eventually(async () =>
      /media_orchestrator_usage_unreported 3\b/.test(
        await stack.manager.metrics.registry.getSingleMetricAsString("media_orchestrator_usage_unreported"),
      ),
    );
    // The customer's meter was tried and not recorded: it backs off, its attempts counted meanwhile.
    const waiting = await Promise.all(names.map(getJob));
    const seconds = waiting.map((j) => j!.status!.usage!.billedSeconds!);
    const account = (await getAccount())!.status!.usage!;
    expect(account.usedSeconds).toBe(before + seconds.reduce((a, b) => a + b, 0));
    expect(account.reportedSeconds).toBe(before);
    expect(stack.sim.billingStats().serverErrors).toBeGreaterThan(0);
    // The leader goes; another controller takes over the outbox from the jobs alone.
    await stack.manager.stop();
    successor = startManager(kc, stack.sim, { ...stack.env, PAYMENT_PROVIDER_API_URL: stack.sim.url });
    await successor.start();
    // Back, losing half its answers: every report lands once, then the TTL deletes the jobs.
    stack.sim.setFaults({ lostMeterEventAnswers: 0.5 });
    await eventually(async () => (await Promise.all(names.map(getJob))).every((j) => j === undefined), {
      timeoutMs: 90_000,
    });
    for (const [i, j] of waiting.entries()) {
      const events = stack.sim.meterEvents().filter((e) => e.identifier === `mj_${j!.metadata.uid}_1`);
      expect(events.map((e) => e.value)).toEqual([seconds[i]]);
    }
    await eventually(async () => {
      const u = (await getAccount())?.status?.usage;
      return u?.reportedSeconds === u?.usedSeconds && u?.counting === undefined;
    });
    expect((await getAccount())?.status?.usage?.usedSeconds).toBe(
      before + seconds.reduce((a, b) => a + b, 0),
    );
    // The simulator's seeded faults did lose answers: the resends were replayed, not recorded again.
    expect(stack.sim.billingStats()).toMatchObject({ lostAnswers: expect.any(Number) as number });
    expect(stack.sim.billingStats().lostAnswers).toBeGreaterThan(0);
    stack.sim.setFaults({});
  }, 150_000);

  it("a report the payment provider may have forgotten, or would refuse as too old, is not sent: it is surfaced", async () => {
    const now = Date.now();
    const iso = (hoursAgo: number) => new Date(now - hoursAgo * 3_600_000).toISOString();
    const cases = [
      { name: "tried-yesterday", endedAt: iso(26), firstSentAt: iso(25), message: /23 hours/ },
      { name: "ended-long-ago", endedAt: iso(36 * 24), message: /ended too long ago/ },
    ];
    for (const c of cases) {
      // An account with no BillingAccount: the job waits and is never submitted; its status is ours.
      await changeBinding(api, stack.ns, "cus_unknown", "bind");
      const created = await api.create<MediaJob>(
        "mediajobs",
        stack.ns,
        mediaJob(c.name, { workload: "asr", account: "cus_unknown" }) as never,
      );
      await eventually(async () => (await getJob(c.name))?.status?.phase === "Pending");
      const identifier = `mj_${created.metadata.uid}_1`;
      await api.updateStatusWithRetry<MediaJob>("mediajobs", stack.ns, c.name, (cur) => ({
        ...cur,
        status: {
          ...cur.status,
          phase: "Completed",
          completedAt: c.endedAt,
          usage: {
            workload: "asr",
            account: "cus_unknown",
            billedSeconds: 5,
            attempts: [
              {
                attempt: 1,
                providerJobId: `p-${c.name}`,
                providerStatus: "COMPLETED",
                executionTimeMs: 5_000,
                endedAt: c.endedAt,
                billedSeconds: 5,
                meter: "Pending",
                eventName: "gpu_seconds",
                identifier,
                ...(c.firstSentAt !== undefined && { firstSentAt: c.firstSentAt }),
              },
            ],
          },
        },
      }));
      await eventually(async () => (await getJob(c.name))?.status?.usage?.attempts[0]?.meter === "Refused");
      const attempt = (await getJob(c.name))!.status!.usage!.attempts[0]!;
      expect(attempt.message).toMatch(c.message);
      expect(stack.sim.meterEvents().filter((e) => e.identifier === identifier)).toEqual([]);
      await eventually(async () =>
        (await eventsOf(kc, stack.ns, c.name)).some(
          (e) => e.type === "Warning" && e.reason === "UsageNotReported",
        ),
      );
    }
  }, 60_000);

  it("usage accepted after its period's invoice was finalized is marked afterInvoice, with a Warning; within the grace it is plain Reported", async () => {
    // The subscription's period ended 2 h ago: its invoice finalized 1 h later (Stripe's default
    // grace). A job of the period after it is reported now, and one of the running period.
    const customerId = "cus_late_invoice";
    const hours = (h: number) => new Date(Date.now() + h * 3_600_000).toISOString();
    await activeAccount(api, stack.ns, customerId, {
      subscriptionPeriod: { start: hours(-30 * 24), end: hours(-2) },
    });
    const cases = [
      { name: "ended-last-period", endedAt: hours(-3), late: true },
      { name: "ended-this-period", endedAt: hours(-1), late: false },
    ];
    // The jobs name an account with no BillingAccount: they wait, never submitted; their status is ours.
    await changeBinding(api, stack.ns, "cus_unknown", "bind");
    for (const c of cases) {
      const created = await api.create<MediaJob>(
        "mediajobs",
        stack.ns,
        mediaJob(c.name, { workload: "asr", account: "cus_unknown" }) as never,
      );
      await eventually(async () => (await getJob(c.name))?.status?.phase === "Pending");
      await api.updateStatusWithRetry<MediaJob>("mediajobs", stack.ns, c.name, (cur) => ({
        ...cur,
        status: {
          ...cur.status,
          phase: "Completed",
          completedAt: c.endedAt,
          usage: {
            workload: "asr",
            account: customerId,
            billedSeconds: 4,
            attempts: [
              {
                attempt: 1,
                providerJobId: `p-${c.name}`,
                providerStatus: "COMPLETED",
                executionTimeMs: 4_000,
                endedAt: c.endedAt,
                billedSeconds: 4,
                meter: "Pending",
                eventName: "gpu_seconds",
                identifier: `mj_${created.metadata.uid}_1`,
              },
            ],
          },
        },
      }));
    }
    for (const c of cases) {
      await eventually(async () => (await getJob(c.name))?.status?.usage?.attempts[0]?.meter === "Reported");
      const attempt = (await getJob(c.name))!.status!.usage!.attempts[0]!;
      expect(attempt.afterInvoice === true, c.name).toBe(c.late);
    }
    await eventually(async () =>
      (await eventsOf(kc, stack.ns, "ended-last-period")).some(
        (e) =>
          e.type === "Warning" && e.reason === "UsageAfterInvoice" && /on no invoice/.test(e.message ?? ""),
      ),
    );
    expect((await eventsOf(kc, stack.ns, "ended-this-period")).map((e) => e.reason)).not.toContain(
      "UsageAfterInvoice",
    );
  }, 60_000);

  it("a period that ended starts over at 0 without any job ending (a customer held at its limit is admitted again)", async () => {
    const customerId = "cus_rollover";
    await activeAccount(api, stack.ns, customerId, {
      usage: {
        periodStart: "2026-01-01T00:00:00Z",
        periodEnd: "2026-02-01T00:00:00Z",
        usedSeconds: 3600,
        reportedSeconds: 3600,
        limitSeconds: 3600,
      },
    });
    const now = new Date();
    const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString();
    await eventually(async () => {
      const u = (await api.get<BillingAccount>("billingaccounts", stack.ns, billingAccountName(customerId)))
        ?.status?.usage;
      return u?.periodStart === monthStart;
    });
    const u = (await api.get<BillingAccount>("billingaccounts", stack.ns, billingAccountName(customerId)))!
      .status!.usage!;
    expect(u).toMatchObject({ usedSeconds: 0, reportedSeconds: 0 });
    // No plans are configured here, so the account shows no plan limit (account-limits.ts).
    expect(u.limitSeconds).toBeUndefined();
  }, 30_000);
});
