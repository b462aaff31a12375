// The running jobs of each account, for the plans' concurrency cap: from the cache's events, plus
// submissions planned and not yet in the cache. And the billed seconds of its ended jobs that its
// BillingAccount has not counted yet, which the plans' seconds add.
import { describe, expect, it } from "vitest";
import { makeBillingAccount, makeMediaJob } from "../support/builders.js";
import { accountFacts } from "../../src/controller/account-facts.js";
import { AccountJobs } from "../../src/controller/account-jobs.js";
import type { BillingAccount, BillingAccountUsage } from "../../src/crds/billingaccount.js";
import type { MediaJob, MediaJobStatus, UsageAttempt } from "../../src/crds/mediajob.js";
import { planLimits } from "../../src/mediajob/admission.js";
import { PlansSchema } from "../../src/mediajob/plans.js";

const job = (name: string, phase: MediaJobStatus["phase"], account: string | undefined = "acme"): MediaJob =>
  makeMediaJob(name).ns("ns").account(account).status({ phase }).build();

describe("AccountJobs", () => {
  it("counts the account's Processing jobs, except the one asking", () => {
    const a = new AccountJobs();
    a.observe("add", job("a", "Processing"));
    a.observe("add", job("b", "Pending"));
    a.observe("add", job("c", "Processing", "other"));
    a.observe("add", job("d", "Processing", ""));
    expect(a.count("acme", "ns/b")).toBe(1);
    expect(a.count("acme", "ns/a")).toBe(0);
    a.observe("update", job("a", "Completed"), job("a", "Processing"));
    expect(a.count("acme", "ns/b")).toBe(0);
    a.observe("add", job("e", "Processing"));
    a.observe("delete", job("e", "Processing"));
    expect(a.count("acme", "ns/b")).toBe(0);
  });

  it("counts a planned submission until the cache shows it, once", () => {
    const a = new AccountJobs();
    a.reserve("acme", "ns/b");
    expect(a.count("acme", "ns/x")).toBe(1);
    // A write of the still-Pending job (its finalizer) keeps the reservation.
    a.observe("update", job("b", "Pending"), job("b", "Pending"));
    expect(a.count("acme", "ns/x")).toBe(1);
    a.observe("update", job("b", "Processing"), job("b", "Pending"));
    expect(a.count("acme", "ns/x")).toBe(1);
    a.reserve("acme", "ns/c");
    a.release("acme", "ns/c");
    expect(a.count("acme", "ns/x")).toBe(1);
  });

  it("keeps a new job's planned submission through its first writes, made before it has a phase", () => {
    const a = new AccountJobs();
    a.reserve("acme", "ns/new");
    // The finalizer goes on in the pass that submits: the job has no status yet.
    const fresh = { ...job("new", "Pending"), status: undefined } as MediaJob;
    a.observe("add", fresh);
    a.observe("update", fresh, fresh);
    expect(a.count("acme", "ns/other")).toBe(1);
    a.observe("update", job("new", "Processing"), fresh);
    expect(a.count("acme", "ns/other")).toBe(1);
  });

  it("adds the billed seconds of ended attempts its account has not counted yet, each once", () => {
    const a = new AccountJobs();
    a.observe("add", ended("a", [attempt(1, 20)]));
    a.observe("add", ended("b", [attempt(1, 5, { counted: true }), attempt(2, 7)]));
    // Ended in the previous period: the reporter does not add it to this one.
    a.observe("add", ended("old", [attempt(1, 30, { endedAt: "2025-12-31T23:00:00.000Z" })]));
    a.observe("add", ended("other", [attempt(1, 11)], "other"));
    expect(a.uncountedSeconds("acme", PERIOD, NOW)).toBe(27);
    // The account's write listed b's second attempt (its seconds are in usedSeconds now).
    expect(a.uncountedSeconds("acme", { ...PERIOD, counting: ["mj_uid-b_2"] }, NOW)).toBe(20);
    // The job's write marks it counted; a deleted job's seconds are never counted.
    a.observe("update", ended("a", [attempt(1, 20, { counted: true })]), ended("a", [attempt(1, 20)]));
    a.observe("delete", ended("b", [attempt(1, 5, { counted: true }), attempt(2, 7)]));
    expect(a.uncountedSeconds("acme", PERIOD, NOW)).toBe(0);
    expect(a.uncountedSeconds("other", undefined, NOW)).toBe(11);
  });

  it("holds the account's next job once an ended job reaches its plan's seconds, before the count", () => {
    const plans = PlansSchema.parse({
      price_small: { gpuSecondsPerPeriod: 100, maxExecutionTimeoutMs: 600_000 },
    });
    const billing: BillingAccount = makeBillingAccount("acme")
      .named("acme")
      .status({
        subscriptionStatus: "active",
        priceIds: ["price_small"],
        usage: { ...PERIOD, usedSeconds: 90 },
      })
      .build();
    const a = new AccountJobs();
    const next = job("next", "Pending");
    const src = { accounts: { get: () => billing }, accountJobs: a, plans };
    expect(planLimits(next, "acme", plans, accountFacts(next, "acme", src, NOW)).admitted).toBe(true);
    // A job ends with 20 s billed; the usage reporter has not counted it into the account yet.
    a.observe("add", ended("a", [attempt(1, 20)]));
    expect(accountFacts(next, "acme", src, NOW)?.usedSeconds).toBe(110);
    const verdict = planLimits(next, "acme", plans, accountFacts(next, "acme", src, NOW));
    expect(verdict.admitted === false && verdict.condition.reason).toBe("UsageLimitReached");
  });
});

const NOW = Date.parse("2026-01-15T12:00:00.000Z");
const PERIOD: BillingAccountUsage = {
  periodStart: "2026-01-01T00:00:00.000Z",
  periodEnd: "2026-02-01T00:00:00.000Z",
  usedSeconds: 0,
  reportedSeconds: 0,
};

const attempt = (n: number, billedSeconds: number, o: Partial<UsageAttempt> = {}): UsageAttempt => ({
  attempt: n,
  providerJobId: `p-${n}`,
  providerStatus: "COMPLETED",
  endedAt: "2026-01-15T11:00:00.000Z",
  billedSeconds,
  meter: "Pending",
  ...o,
});

/** A job of `account` whose attempts ended with this usage, as the sidecar records it. */
function ended(name: string, attempts: UsageAttempt[], account = "acme"): MediaJob {
  const j = job(name, "Completed", account);
  return {
    ...j,
    metadata: { ...j.metadata, uid: `uid-${name}` },
    status: { ...j.status, usage: { workload: "asr", account, attempts } },
  };
}
