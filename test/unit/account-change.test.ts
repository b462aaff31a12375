// Which changes of a BillingAccount send its jobs through a pass: what a pass reads of it, and no
// more (the usage reporter rewrites the usage with every batch it counts).
import { describe, expect, it } from "vitest";
import type { BillingAccount } from "../../src/crds/billingaccount.js";
import { accountChangeConcernsJobs } from "../../src/controller/account-facts.js";
import type { Plans } from "../../src/mediajob/plans.js";

const PLANS: Plans = { price_a: { gpuSecondsPerPeriod: 3600, maxExecutionTimeoutMs: 600_000 } };

const account = (status: NonNullable<BillingAccount["status"]>, customerId = "cus_1"): BillingAccount => ({
  apiVersion: "media-orchestrator.io/v1alpha1",
  kind: "BillingAccount",
  metadata: { name: "acct-cus-1", namespace: "billing", resourceVersion: "1" },
  spec: { customerId },
  status,
});

const usage = (usedSeconds: number) => ({
  periodStart: "2026-12-01T00:00:00Z",
  usedSeconds,
  reportedSeconds: usedSeconds,
});

const active = account({ subscriptionStatus: "active", priceIds: ["price_a"], usage: usage(10) });

describe("accountChangeConcernsJobs", () => {
  it.each([
    ["a new account", undefined, active, false, true],
    [
      "the subscription's state",
      active,
      account({ ...active.status, subscriptionStatus: "past_due" }),
      false,
      true,
    ],
    ["the customer", active, account({ ...active.status! }, "cus_2"), false, true],
    ["the usage count, no plans", active, account({ ...active.status, usage: usage(20) }), false, false],
    [
      "the usage count, an empty plan table",
      active,
      account({ ...active.status, usage: usage(20) }),
      "empty",
      false,
    ],
    ["the usage count, with plans", active, account({ ...active.status, usage: usage(20) }), true, true],
    ["the prices, no plans", active, account({ ...active.status, priceIds: ["price_b"] }), false, false],
    ["the prices, with plans", active, account({ ...active.status, priceIds: ["price_b"] }), true, true],
    [
      "the period, with plans",
      active,
      account({
        ...active.status,
        subscriptionPeriod: { start: "2026-12-01T00:00:00Z", end: "2027-01-01T00:00:00Z" },
      }),
      true,
      true,
    ],
    [
      "the event that set it, with plans",
      active,
      account({ ...active.status, lastEventId: "evt_2" }),
      true,
      false,
    ],
    ["nothing, with plans", active, account({ ...active.status! }), true, false],
  ] as const)("%s", (_name, old, now, plansOn, concerns) => {
    expect(accountChangeConcernsJobs(old, now, plansOn === "empty" ? {} : plansOn ? PLANS : undefined)).toBe(
      concerns,
    );
  });
});
