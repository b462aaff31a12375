// Plans keyed by price id, and the admission verdict they give a job.
import { describe, expect, it } from "vitest";
import {
  PlansSchema,
  admission,
  planFor,
  type AdmissionInput,
  type Plans,
} from "../../src/mediajob/plans.js";

const plans: Plans = PlansSchema.parse({
  price_small: { gpuSecondsPerPeriod: 3600, maxConcurrentJobs: 2, maxExecutionTimeoutMs: 600_000 },
  price_large: { gpuSecondsPerPeriod: 36_000, maxConcurrentJobs: 10, maxExecutionTimeoutMs: 3_600_000 },
  price_pack: { gpuSecondsPerPeriod: 1000, maxExecutionTimeoutMs: 60_000 },
});

const base: AdmissionInput = { plans, priceIds: ["price_small"], usedSeconds: 0, runningJobs: 0 };

describe("admission", () => {
  it.each<[string, Partial<AdmissionInput>, ReturnType<typeof admission>]>([
    ["a fresh account starts with the plan's timeout", {}, { admitted: true, executionTimeoutMs: 600_000 }],
    [
      "a job's own shorter timeout is kept",
      { executionTimeoutMs: 30_000 },
      { admitted: true, executionTimeoutMs: 30_000 },
    ],
    ["one second left still admits", { usedSeconds: 3599 }, { admitted: true, executionTimeoutMs: 600_000 }],
    [
      "the plan's seconds used up: UsageLimitReached",
      { usedSeconds: 3600 },
      {
        admitted: false,
        reason: "UsageLimitReached",
        message: expect.stringContaining("used the 3600 GPU seconds its plan allows") as string,
      },
    ],
    [
      "over the plan (jobs that were running) stays refused",
      { usedSeconds: 5000 },
      expect.objectContaining({ reason: "UsageLimitReached" }),
    ],
    [
      "the usage limit comes before concurrency",
      { usedSeconds: 3600, runningJobs: 5 },
      expect.objectContaining({ reason: "UsageLimitReached" }),
    ],
    [
      "at the concurrency cap: waits",
      { runningJobs: 2 },
      expect.objectContaining({ reason: "ConcurrencyLimitReached" }),
    ],
    ["below the cap: admitted", { runningJobs: 1 }, expect.objectContaining({ admitted: true })],
    [
      "a timeout above the plan's: waits for a plan that allows it",
      { executionTimeoutMs: 600_001 },
      expect.objectContaining({ reason: "ExecutionTimeoutAbovePlan" }),
    ],
    [
      "an unknown price: NoPlan",
      { priceIds: ["price_other"] },
      expect.objectContaining({ reason: "NoPlan" }),
    ],
    ["no price recorded: NoPlan", { priceIds: [] }, expect.objectContaining({ reason: "NoPlan" })],
    [
      "a bigger plan lifts the limit",
      { priceIds: ["price_large"], usedSeconds: 3600 },
      expect.objectContaining({ admitted: true }),
    ],
    [
      "no plans configured: admitted as before, no timeout imposed",
      { plans: {}, usedSeconds: 1e9, runningJobs: 1000 },
      { admitted: true },
    ],
    [
      "no plans configured keeps the job's own timeout",
      { plans: {}, executionTimeoutMs: 9000 },
      { admitted: true, executionTimeoutMs: 9000 },
    ],
  ])("%s", (_name, input, verdict) => {
    expect(admission({ ...base, ...input })).toEqual(verdict);
  });
});

describe("planFor", () => {
  it("adds the seconds of several priced items; concurrency and timeout take the largest", () => {
    expect(planFor(plans, ["price_small", "price_pack"])).toEqual({
      gpuSecondsPerPeriod: 4600,
      maxExecutionTimeoutMs: 600_000,
    });
    expect(planFor(plans, ["price_small", "price_large"])).toEqual({
      gpuSecondsPerPeriod: 39_600,
      maxConcurrentJobs: 10,
      maxExecutionTimeoutMs: 3_600_000,
    });
  });
  it("gives the subscription the largest fair-share weight of its plans, none when no plan sets one", () => {
    const weighted = {
      ...plans,
      price_gold: { gpuSecondsPerPeriod: 10, maxExecutionTimeoutMs: 60_000, fairShareWeight: 3 },
    };
    expect(planFor(weighted, ["price_small", "price_gold"])?.fairShareWeight).toBe(3);
    expect(planFor(weighted, ["price_small"])).not.toHaveProperty("fairShareWeight");
    expect(() =>
      PlansSchema.parse({ p: { gpuSecondsPerPeriod: 1, maxExecutionTimeoutMs: 60_000, fairShareWeight: 0 } }),
    ).toThrow();
  });
  it("counts a price listed twice once", () => {
    expect(planFor(plans, ["price_small", "price_small"])?.gpuSecondsPerPeriod).toBe(3600);
  });
  it("ignores unknown prices and inherited keys", () => {
    expect(planFor(plans, ["toString", "constructor"])).toBeUndefined();
    expect(planFor(plans, ["price_other", "price_small"])?.gpuSecondsPerPeriod).toBe(3600);
  });
});

describe("PlansSchema", () => {
  it.each([
    ["fractional seconds", { p: { gpuSecondsPerPeriod: 1.5, maxExecutionTimeoutMs: 60_000 } }],
    ["a timeout below the provider's 5 s", { p: { gpuSecondsPerPeriod: 1, maxExecutionTimeoutMs: 1000 } }],
    ["a timeout above 7 days", { p: { gpuSecondsPerPeriod: 1, maxExecutionTimeoutMs: 8 * 24 * 3_600_000 } }],
    [
      "zero concurrency",
      { p: { gpuSecondsPerPeriod: 1, maxConcurrentJobs: 0, maxExecutionTimeoutMs: 60_000 } },
    ],
    ["an unknown field", { p: { gpuSecondsPerPeriod: 1, maxExecutionTimeoutMs: 60_000, gpuHours: 1 } }],
  ])("rejects %s", (_name, value) => {
    expect(PlansSchema.safeParse(value).success).toBe(false);
  });
});
