// The chaos run's accounting (bench/chaos/jobs.ts): which runs at the provider a job was allowed,
// what counts as lost, and what counts as a duplicated pipeline step.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { PIPELINE_LABEL, STEP_LABEL } from "../../src/mediajob/pipeline.js";
import { checkJobs } from "../../bench/chaos/jobs.js";
import { checkMetering } from "../../bench/chaos/metering.js";
import { checkCost, providerTotalMicros, unallocatedFromMetrics } from "../../bench/chaos/cost.js";

function job(
  name: string,
  status: MediaJob["status"],
  extra: Partial<MediaJob["spec"]> = {},
  labels?: Record<string, string>,
): MediaJob {
  return {
    apiVersion: "media-orchestrator.io/v1alpha1",
    kind: "MediaJob",
    metadata: { name, ...(labels && { labels }) },
    spec: { workload: "asr", maxAttempts: 2, ...extra },
    status: { jobId: `id-${name}`, ...status },
  };
}

describe("chaos accounting", () => {
  it("allows one run per attempt: a second after a FAILED result the job may retry, not a third", () => {
    const jobs = [
      job("once", { phase: "Completed" }),
      job("retried", { phase: "Completed", failures: 1 }),
      job("failed-twice", { phase: "Failed", failures: 2 }),
      job("ran-twice", { phase: "Completed" }),
      job("ran-thrice", { phase: "Completed", failures: 2 }),
    ];
    const runs = {
      "id-once": 1,
      "id-retried": 2,
      "id-failed-twice": 2,
      "id-ran-twice": 2,
      "id-ran-thrice": 3,
    };
    const check = checkJobs(jobs, runs, [], []);
    expect(check.executedMoreThanOnce.map((j) => j.name)).toEqual(["ran-twice", "ran-thrice"]);
    expect(check.jobsFailedOnce).toBe(3);
    expect(check.lost).toEqual([]);
  });

  it("counts a second run after an unconfirmed resubmission as run more than once, and tells a dropped callback from a late or ignored one", () => {
    const at = (iso: string) => Date.parse(iso);
    const jobs = [
      job("dropped", { phase: "Completed", unconfirmedResubmissions: 1 }),
      job("late", { phase: "Completed", unconfirmedResubmissions: 1, submittedAt: "2026-01-01T00:01:00Z" }),
      job("ignored", {
        phase: "Completed",
        unconfirmedResubmissions: 1,
        submittedAt: "2026-01-01T00:01:00Z",
      }),
    ];
    const runs = { "id-dropped": 2, "id-late": 2, "id-ignored": 2 };
    const deliveries = [
      { key: "id-late", ok: true, at: at("2026-01-01T00:01:30Z") },
      { key: "id-ignored", ok: false, at: at("2026-01-01T00:00:10Z") },
      { key: "id-ignored", ok: true, at: at("2026-01-01T00:00:20Z") },
    ];
    const check = checkJobs(jobs, runs, ["id-dropped"], deliveries);
    // Run twice is run twice, whatever the cause: an unconfirmed resubmission breaks the invariant too.
    expect(check.executedMoreThanOnce.map((j) => j.name)).toEqual(["dropped", "late", "ignored"]);
    expect(check.executedAgainAfterUnconfirmed).toBe(3);
    expect(check.executedAgainCallbackDropped).toBe(1);
    expect(check.executedAgainCallbackLate.map((j) => j.name)).toEqual(["late", "ignored"]);
    expect(check.answeredBeforeResubmission.map((j) => j.name)).toEqual(["ignored"]);
    expect(check.unconfirmedResubmissions).toBe(3);
  });

  it("reports jobs Failed with SubmissionUnconfirmed apart, and whether their submission ran", () => {
    const unconfirmed = (attempt: number): MediaJob["status"] => ({
      phase: "Failed",
      error: "SubmissionUnconfirmed: attempt was never confirmed",
      submission: {
        attempt,
        id: `sub-${attempt}-aaaaaaaa`,
        startedAt: "2026-01-01T00:00:00Z",
        state: "Unconfirmed",
      },
    });
    const jobs = [
      job("ran", unconfirmed(1)),
      job("never-ran", unconfirmed(1)),
      job("ran-after-retry", { ...unconfirmed(2), failures: 1 }),
      job("failed-by-provider", { phase: "Failed", failures: 2, providerJobId: "rp-1" }),
    ];
    const runs = { "id-ran": 1, "id-ran-after-retry": 2, "id-failed-by-provider": 2 };
    const check = checkJobs(jobs, runs, ["id-ran", "id-never-ran"], []);
    expect(check.endedUnconfirmed).toEqual([
      { name: "ran", jobId: "id-ran", executed: true },
      { name: "never-ran", jobId: "id-never-ran", executed: false },
      { name: "ran-after-retry", jobId: "id-ran-after-retry", executed: true },
    ]);
    expect(check.executedMoreThanOnce).toEqual([]);
    expect(check.lost).toEqual([]);
  });

  it("counts unfinished jobs and next steps never created as lost, and two jobs for one step as duplicated", () => {
    const then = { then: [{ workload: "tts" as const }] };
    const step = (name: string) =>
      job(name, { phase: "Completed" }, {}, { [PIPELINE_LABEL]: "p", [STEP_LABEL]: "1" });
    const jobs = [
      job("p", { phase: "Completed", nextJob: "p-1-tts" }, then),
      step("p-1-tts"),
      step("p-1-tts-again"),
      job("q", { phase: "Completed" }, then),
      job("r", { phase: "Processing" }),
    ];
    const check = checkJobs(jobs, {}, [], []);
    expect(check.lost).toEqual([
      { name: "r", phase: "Processing", reason: "not terminal" },
      { name: "q", phase: "Completed", reason: "next step never created" },
    ]);
    expect(check.duplicateSteps).toEqual([{ pipeline: "p", step: "1", jobs: ["p-1-tts", "p-1-tts-again"] }]);
  });
});

describe("chaos metering accounting", () => {
  const usage = (account: string, attempts: Array<[string, number, number]>) => ({
    workload: "asr" as const,
    account,
    attempts: attempts.map(([identifier, billedSeconds, executionTimeMs], i) => ({
      attempt: i + 1,
      providerJobId: `p-${identifier}`,
      providerStatus: "COMPLETED" as const,
      executionTimeMs,
      endedAt: "2026-11-25T00:00:00Z",
      billedSeconds,
      meter: "Reported" as const,
      identifier,
    })),
  });
  const jobs = [
    job(
      "a",
      {
        phase: "Completed",
        failures: 1,
        usage: usage("cus_1", [
          ["mj_a_1", 2, 1_500],
          ["mj_a_2", 3, 2_001],
        ]),
      },
      { account: "cus_1" },
    ),
    job("b", { phase: "Completed", usage: usage("cus_2", [["mj_b_1", 4, 3_999]]) }, { account: "cus_2" }),
    job("free", { phase: "Completed" }),
  ];
  // The provider's record of what ran: both attempts of a (by their submission ids), b, a job of nobody's.
  const ended = [
    { id: "p1", key: "id-a", status: "FAILED", executionTime: 1_500 },
    { id: "p2", key: "id-a-retry-1", status: "COMPLETED", executionTime: 2_001, delayTime: 9_000 },
    { id: "p3", key: "id-b", status: "COMPLETED", executionTime: 3_999 },
    { id: "p4", key: "id-free", status: "COMPLETED", executionTime: 60_000 },
  ];

  it("matches each customer's metered seconds with the provider's billable seconds for its jobs", () => {
    const events = [
      { identifier: "mj_a_1", customer: "cus_1", value: 2 },
      { identifier: "mj_a_2", customer: "cus_1", value: 3 },
      { identifier: "mj_b_1", customer: "cus_2", value: 4 },
    ];
    const c = checkMetering(jobs, ["cus_1", "cus_2"], ended, events);
    expect(c).toMatchObject({
      meteredSeconds: 9,
      meteredSecondsDiff: 0,
      executionSecondsDiff: 0,
      meterEventsDuplicated: 0,
      meterEventsLost: 0,
      meteredJobs: 2,
    });
  });

  it("compares the execution time the jobs recorded with the provider's, to the millisecond", () => {
    // b recorded 3,500 ms of a run the provider timed at 3,999: both bill 4 s, and still differ.
    const b = job(
      "b",
      { phase: "Completed", usage: usage("cus_2", [["mj_b_1", 4, 3_500]]) },
      { account: "cus_2" },
    );
    const c = checkMetering([jobs[0]!, b], ["cus_1", "cus_2"], ended, [
      { identifier: "mj_a_1", customer: "cus_1", value: 2 },
      { identifier: "mj_a_2", customer: "cus_1", value: 3 },
      { identifier: "mj_b_1", customer: "cus_2", value: 4 },
    ]);
    expect(c.meteredSecondsDiff).toBe(0);
    expect(c.executionSecondsDiff).toBe(0.499);
  });

  it("counts an attempt marked reported that the payment provider has no event for as lost", () => {
    const c = checkMetering(jobs, ["cus_1", "cus_2"], ended, [
      { identifier: "mj_a_1", customer: "cus_1", value: 2 },
      { identifier: "mj_b_1", customer: "cus_2", value: 4 },
    ]);
    expect(c.meterEventsLost).toBe(1);
    expect(c.examples).toContainEqual({ job: "a", attempt: 2, meter: "Reported", identifier: "mj_a_2" });
  });

  it("counts a missing report as a difference, and a repeated or changed identifier as duplicated", () => {
    const c = checkMetering(jobs, ["cus_1", "cus_2"], ended, [
      { identifier: "mj_a_1", customer: "cus_1", value: 2 },
      { identifier: "mj_a_1", customer: "cus_1", value: 2 },
      { identifier: "mj_b_1", customer: "cus_2", value: 5 },
    ]);
    expect(c.meterEventsDuplicated).toBe(2);
    // cus_1: metered 2 of 5; cus_2: metered 5 of 4.
    expect(c.meteredSecondsDiff).toBe(3 + 1);
  });
});

describe("chaos cost accounting", () => {
  const ours = new Set(["ep-a", "ep-b"]);
  it("sums the provider's records of our endpoints as the product reads them, to the micro-USD", () => {
    const records = [
      { serverlessId: "ep-a", totalAmount: 0.000123 },
      { serverlessId: "ep-b", totalAmount: 1.5 },
      { serverlessId: "someone-elses", totalAmount: 99 },
    ];
    expect(providerTotalMicros(records, ours)).toBe(1_500_123);
  });
  it("reads the leader's unallocated gauge of our endpoints", () => {
    const text = [
      "# TYPE media_orchestrator_cost_unallocated_micros gauge",
      'media_orchestrator_cost_unallocated_micros{endpoint="ep-a"} 40',
      'media_orchestrator_cost_unallocated_micros{endpoint="ep-b"} 2',
      'media_orchestrator_cost_unallocated_micros{endpoint="other"} 1000',
    ].join("\n");
    expect(unallocatedFromMetrics(text, ours)).toBe(42);
  });
  it("is 0 only when allocated and unallocated make up the bill exactly", () => {
    expect(checkCost(1_000, 958, 42).allocatedCostDiffMicros).toBe(0);
    expect(checkCost(1_000, 958, 41).allocatedCostDiffMicros).toBe(1);
    expect(checkCost(1_000, 1_000, 42).allocatedCostDiffMicros).toBe(42);
  });
});
