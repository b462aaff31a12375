// Plans against the real control plane and the simulator over HTTP: a job of an account that has
// used its plan's seconds waits (Admitted=False, UsageLimitReached, one Event) until the period
// rolls over; a plan's concurrency cap holds jobs back while another runs; and every job goes to
// the provider with policy.executionTimeout (its own, else the plan's), which the provider
// enforces: a job that runs longer ends TIMED_OUT, billed no more than the limit.
import { describe, expect, it } from "vitest";
import type { BillingAccountStatus } from "../../src/crds/index.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { activeAccount } from "../support/accounts.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { condition, controllerStackForTests, mediaJob, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);

const PLANS = {
  price_small: { gpuSecondsPerPeriod: 100, maxConcurrentJobs: 1, maxExecutionTimeoutMs: 5_000 },
  price_roomy: { gpuSecondsPerPeriod: 1_000_000, maxExecutionTimeoutMs: 600_000 },
};

const stack = controllerStackForTests(kc, {
  name: "plans",
  // Jobs run 20 simulated seconds (±20 %): longer than price_small's 5 s executionTimeout.
  sim: { executionMs: 20_000 },
  env: { JOB_TIMEOUT_SECONDS: "1", MEDIA_PLANS: JSON.stringify(PLANS) },
  endpoints: ["asr"],
});

/** An account as the sidecar and the usage recorder leave it (the controller writes on it too). */
const account = (customer: string, status: Partial<BillingAccountStatus>) =>
  activeAccount(api, stack.ns, customer, status);

const inAnHour = () => new Date(Date.now() + 3_600_000).toISOString();
const anHourAgo = () => new Date(Date.now() - 3_600_000).toISOString();

describe("plans", () => {
  it("holds a job of an account past its plan's seconds until the period rolls over", async () => {
    const c = "cus_used_up";
    await account(c, {
      priceIds: ["price_small"],
      usage: { periodStart: anHourAgo(), periodEnd: inAnHour(), usedSeconds: 100, reportedSeconds: 100 },
    });
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("over", { workload: "asr", account: c, id: "over-1" }) as never,
    );
    const waiting = await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", stack.ns, "over");
      return condition(j!, "Admitted")?.reason === "UsageLimitReached" ? j : undefined;
    });
    expect(waiting.status?.phase).toBe("Pending");
    expect(condition(waiting, "Admitted")?.status).toBe("False");
    expect(waiting.status?.reason).toBe("UsageLimitReached");
    // Several ticks (1 s each) later: still waiting, never submitted, one Event, no write per tick.
    const rv = waiting.metadata.resourceVersion;
    await new Promise((r) => setTimeout(r, 3_000));
    const later = await api.get<MediaJob>("mediajobs", stack.ns, "over");
    expect(later?.metadata.resourceVersion).toBe(rv);
    expect(stack.sim.getJob("over-1")).toBeUndefined();
    const warnings = (await eventsOf(kc, stack.ns, "over")).filter((e) => e.reason === "UsageLimitReached");
    expect(warnings).toHaveLength(1);
    // The period ended: the seconds count from 0 again, and the job runs.
    await account(c, {
      usage: {
        periodStart: anHourAgo(),
        periodEnd: new Date(Date.now() - 1000).toISOString(),
        usedSeconds: 100,
        reportedSeconds: 100,
      },
    });
    await eventually(() => stack.sim.getJob("over-1"));
  });

  it("sends the plan's executionTimeout, which the provider enforces: TIMED_OUT after 5 s", async () => {
    const c = "cus_small";
    await account(c, { priceIds: ["price_small"] });
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("capped", { workload: "asr", account: c, id: "capped-1" }) as never,
    );
    const job = await waitForPhase(api, stack.ns, "capped", "Failed");
    expect(job.status?.error).toContain("TIMED_OUT");
    const atProvider = stack.sim.getJob("capped-1");
    expect(atProvider).toMatchObject({ status: "TIMED_OUT", executionTime: 5_000 });
  });

  it("sends the job's own shorter executionTimeout, and refuses one above the plan's", async () => {
    const c = "cus_roomy";
    await account(c, { priceIds: ["price_roomy"] });
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("own-timeout", {
        workload: "asr",
        account: c,
        id: "own-1",
        executionTimeoutSeconds: 6,
      }) as never,
    );
    await waitForPhase(api, stack.ns, "own-timeout", "Failed");
    expect(stack.sim.getJob("own-1")).toMatchObject({ status: "TIMED_OUT", executionTime: 6_000 });

    const small = "cus_small_long";
    await account(small, { priceIds: ["price_small"] });
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("too-long", {
        workload: "asr",
        account: small,
        id: "long-1",
        executionTimeoutSeconds: 60,
      }) as never,
    );
    await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", stack.ns, "too-long");
      return condition(j!, "Admitted")?.reason === "ExecutionTimeoutAbovePlan";
    });
    expect(stack.sim.getJob("long-1")).toBeUndefined();
  });

  it("runs an account's jobs one at a time under a plan with maxConcurrentJobs 1", async () => {
    const c = "cus_one_at_a_time";
    await account(c, { priceIds: ["price_small"] });
    stack.sim.holdJob("first-1");
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("first", { workload: "asr", account: c, id: "first-1", executionTimeoutSeconds: 5 }) as never,
    );
    await waitForPhase(api, stack.ns, "first", "Processing");
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("second", {
        workload: "asr",
        account: c,
        id: "second-1",
        executionTimeoutSeconds: 5,
      }) as never,
    );
    await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", stack.ns, "second");
      return condition(j!, "Admitted")?.reason === "ConcurrencyLimitReached";
    });
    expect(stack.sim.getJob("second-1")).toBeUndefined();
    stack.sim.releaseJob("first-1");
    await waitForPhase(api, stack.ns, "first", "Failed");
    // The next tick sees the slot free.
    await eventually(() => stack.sim.getJob("second-1"));
  });
});
