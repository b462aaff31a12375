// A Pending job of an account with a plan: admitted within the plan's seconds, concurrency and
// executionTimeout, told to wait (Admitted=False, one Event on the change) when not, and submitted
// with policy.executionTimeout from spec or the plan, never above the plan's.
import { describe, expect, it } from "vitest";
import { makeGpuEndpoint, trackedJob } from "../support/builders.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { planJob } from "../../src/mediajob/plan.js";
import { type AccountFacts, type Facts } from "../../src/mediajob/pass.js";
import { PlansSchema, usedSecondsNow } from "../../src/mediajob/plans.js";
import { waitOf } from "../../src/cli/waiting.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const plans = PlansSchema.parse({
  price_small: { gpuSecondsPerPeriod: 3600, maxConcurrentJobs: 2, maxExecutionTimeoutMs: 600_000 },
});
const ready: GpuEndpoint = makeGpuEndpoint("asr").ns("ns").ready("ep-1", undefined).build();

const job = (spec: Partial<MediaJob["spec"]> = {}, status?: MediaJobStatus): MediaJob =>
  trackedJob().account("cus_1").spec(spec).status(status).build();
const account = (o: Partial<AccountFacts> = {}): AccountFacts => ({
  priceIds: ["price_small"],
  usedSeconds: 0,
  runningJobs: 0,
  ...o,
});
const facts = (o: Partial<Facts> = {}, withPlans = true): Facts => ({
  now: NOW,
  settings: { defaultTimeoutSeconds: 600, tickMs: 30_000, ...(withPlans && { plans }) },
  newSubmissionId: "fresh",
  subscriptionState: "active",
  endpoint: ready,
  account: account(),
  boundAccounts: ["cus_1"],
  ...o,
});

const submitted = (j: MediaJob, f: Facts) => {
  const plan = planJob(j, f);
  const submit = plan.actions.find((a) => a.type === "submit");
  return submit?.type === "submit" ? submit.submission.request.policy : undefined;
};

describe("a Pending job under its account's plan", () => {
  it("is submitted with the plan's executionTimeout when it sets none", () => {
    expect(submitted(job(), facts())?.executionTimeout).toBe(600_000);
  });

  it("keeps its own shorter executionTimeout", () => {
    expect(submitted(job({ executionTimeoutSeconds: 30 }), facts())?.executionTimeout).toBe(30_000);
  });

  it("takes the smaller of its timeout and what is left of its active deadline", () => {
    // A fresh job's deadline counts from this submission: 120 s < the plan's 600 s.
    expect(submitted(job({ activeDeadlineSeconds: 120 }), facts())?.executionTimeout).toBe(120_000);
    expect(
      submitted(job({ activeDeadlineSeconds: 3600, executionTimeoutSeconds: 60 }), facts())?.executionTimeout,
    ).toBe(60_000);
  });

  it("without plans, sends its own executionTimeout only", () => {
    expect(submitted(job({ executionTimeoutSeconds: 45 }), facts({}, false))?.executionTimeout).toBe(45_000);
    // Nothing bounds the run but the provider's 7 days (the endpoint's timeout is not reported):
    // the ttl covers that, never less.
    expect(submitted(job(), facts({}, false))).toEqual({ ttl: 7 * 24 * 3600 * 1000 });
  });

  it.each<[string, Partial<AccountFacts>, Partial<MediaJob["spec"]>, string]>([
    ["its plan's seconds used up", { usedSeconds: 3600 }, {}, "UsageLimitReached"],
    ["its plan's concurrent jobs running", { runningJobs: 2 }, {}, "ConcurrencyLimitReached"],
    ["its timeout above the plan's", {}, { executionTimeoutSeconds: 601 }, "ExecutionTimeoutAbovePlan"],
    ["no price recorded", { priceIds: [] }, {}, "NoPlan"],
  ])("waits with %s: Admitted=False, one Warning, no submission", (_n, acct, spec, reason) => {
    const first = planJob(job(spec), facts({ account: account(acct) }));
    expect(first.actions).toEqual([]);
    expect(first.requeueAfterMs).toBe(30_000);
    expect(first.status.phase).toBe("Pending");
    expect(first.status.conditions?.find((c) => c.type === "Admitted")).toMatchObject({
      status: "False",
      reason,
    });
    expect(first.status.reason).toBe(reason);
    expect(first.events.map((e) => e[1])).toEqual([reason]);
    // The next tick, the same world: no Event, the same status (so no write).
    const again = planJob(job(spec, first.status), facts({ account: account(acct) }));
    expect(again.events).toEqual([]);
    expect(again.status).toEqual(first.status);
    // More usage meanwhile changes nothing the job shows.
    const more = planJob(
      job(spec, first.status),
      facts({ account: account({ ...acct, usedSeconds: (acct.usedSeconds ?? 0) + 50 }) }),
    );
    expect(more.status).toEqual(first.status);
  });

  it("is admitted again (a Normal Event) once the period rolled over", () => {
    const waiting = planJob(job(), facts({ account: account({ usedSeconds: 4000 }) })).status;
    const next = planJob(job({}, waiting), facts({ account: account({ usedSeconds: 0 }) }));
    expect(next.actions.map((a) => a.type)).toEqual(["submit"]);
    expect(next.events).toContainEqual(["Normal", "AccountActive", expect.any(String)]);
  });

  it("a job naming no account is not held by plans", () => {
    expect(
      submitted(job({ account: undefined }), facts({ account: undefined }))?.executionTimeout,
    ).toBeUndefined();
  });
});

describe("usedSecondsNow", () => {
  const now = Date.parse("2026-02-01T00:00:00Z");
  const from = (periodStart: string, periodEnd?: string) => ({ usedSeconds: 120, periodStart, periodEnd });
  const sub = { start: "2026-01-15T00:00:00Z", end: "2026-02-15T00:00:00Z" };
  it.each<[string, Parameters<typeof usedSecondsNow>[0], Parameters<typeof usedSecondsNow>[2], number]>([
    ["nothing recorded", undefined, undefined, 0],
    ["the current period", from("2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z"), undefined, 120],
    ["a period with no end given", from("2026-01-01T00:00:00Z"), undefined, 120],
    ["a period that has ended", from("2026-01-01T00:00:00Z", "2026-01-31T23:59:59Z"), undefined, 0],
    ["a period ending now", from("2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"), undefined, 0],
    ["the subscription's period", from("2026-01-15T00:00:00Z", "2026-02-15T00:00:00Z"), sub, 120],
    // Counted over the calendar month before the first subscription event gave the period.
    [
      "a calendar month beside the subscription's period",
      from("2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"),
      sub,
      0,
    ],
  ])("%s", (_n, usage, period, used) => {
    expect(usedSecondsNow(usage, now, period)).toBe(used);
  });
});

describe("what kubectl media says of a job its plan holds", () => {
  it.each([
    ["UsageLimitReached", /billing period rolls over/],
    ["ConcurrencyLimitReached", /running jobs ends/],
    ["ExecutionTimeoutAbovePlan", /lower spec.executionTimeoutSeconds/],
    ["NoPlan", /add a plan for the subscription's price/],
  ])("%s: the fix", (reason, fix) => {
    const held = planJob(
      job({ executionTimeoutSeconds: reason === "ExecutionTimeoutAbovePlan" ? 601 : undefined }),
      facts({
        account: account({
          usedSeconds: reason === "UsageLimitReached" ? 3600 : 0,
          runningJobs: reason === "ConcurrencyLimitReached" ? 2 : 0,
          priceIds: reason === "NoPlan" ? [] : ["price_small"],
        }),
      }),
    );
    const wait = waitOf(job({}, held.status));
    expect(wait?.condition.reason).toBe(reason);
    expect(wait?.fix).toMatch(fix);
  });
});
