// The chaos run's accounting (bench/chaos/jobs.ts): which runs at the provider a job was allowed,
// what counts as lost, and what counts as a duplicated pipeline step.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { PIPELINE_LABEL, STEP_LABEL } from "../../src/mediajob/pipeline.js";
import { checkJobs } from "../../bench/chaos/jobs.js";

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
