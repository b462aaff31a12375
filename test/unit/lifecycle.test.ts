// The MediaJob lifecycle as pure transitions, and the idempotency property: any number of
// duplicate, late or reordered provider results converge to the state of one delivery.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import {
  MAX_ATTEMPTS_AFTER_LOSS,
  afterProviderLostJob,
  applyProviderResult,
  concernsCurrentSubmission,
  initialStatus,
  msUntilStuck,
  nextStepName,
  nextStepObject,
  recordSubmission,
  resetToPending,
  submissionId,
  withPhaseConditions,
} from "../../src/mediajob/lifecycle.js";
import { setCondition } from "../../src/controller/conditions.js";

const NOW = "2026-11-22T10:00:00.000Z";
const job = (status?: MediaJobStatus, spec: Partial<MediaJob["spec"]> = {}): MediaJob => ({
  apiVersion: "media-orchestrator.io/v1alpha1",
  kind: "MediaJob",
  metadata: { name: "j", namespace: "ns", uid: "uid-1", generation: 1 },
  spec: { workload: "asr", ...spec },
  status,
});
const processing = (extra: MediaJobStatus = {}): MediaJobStatus => ({
  phase: "Processing",
  jobId: "j1",
  providerJobId: "j1",
  attempts: 1,
  submittedAt: "2026-11-22T09:59:00.000Z",
  ...extra,
});

describe("job ids", () => {
  it("uses spec.id, else the uid, and keeps status.jobId once set", () => {
    expect(initialStatus(job(undefined, { id: "order-1" }), NOW).jobId).toBe("order-1");
    expect(initialStatus(job(), NOW)).toMatchObject({ jobId: "uid-1", phase: "Pending", attempts: 0 });
    expect(initialStatus(job({ jobId: "kept" }, { id: "other" }), NOW).jobId).toBe("kept");
  });

  it("resubmits resets with the same id and retries after failures with a fresh one", () => {
    expect(submissionId({ jobId: "j1" }, "j1")).toBe("j1");
    expect(submissionId({ jobId: "j1", failures: 2 }, "j1")).toBe("j1-retry-2");
  });
});

describe("applyProviderResult", () => {
  it("completes with the output", () => {
    const next = applyProviderResult(
      job(processing()),
      { id: "j1", status: "COMPLETED", output: { text: "hi" } },
      NOW,
    );
    expect(next).toMatchObject({ phase: "Completed", output: { text: "hi" }, completedAt: NOW });
  });

  it("wraps a non-object output", () => {
    expect(
      applyProviderResult(job(processing()), { id: "j1", status: "COMPLETED", output: "x" }, NOW)?.output,
    ).toEqual({ value: "x" });
  });

  it("retries while attempts remain, then fails", () => {
    const retry = applyProviderResult(
      job(processing(), { maxAttempts: 2 }),
      { id: "j1", status: "FAILED", error: "oom" },
      NOW,
    );
    expect(retry).toMatchObject({ phase: "Pending", failures: 1, error: "FAILED: oom" });
    expect(retry?.providerJobId).toBeUndefined();
    const failed = applyProviderResult(
      job(processing({ attempts: 2, failures: 1, providerJobId: "j1-retry-1" }), { maxAttempts: 2 }),
      { id: "j1-retry-1", status: "TIMED_OUT" },
      NOW,
    );
    expect(failed).toMatchObject({ phase: "Failed", failures: 2 });
  });

  it("never moves a finished job backwards and ignores other submissions and non-terminal states", () => {
    const done = job(processing({ phase: "Completed" }));
    expect(applyProviderResult(done, { id: "j1", status: "FAILED" }, NOW)).toBeUndefined();
    expect(
      applyProviderResult(job(processing()), { id: "someone-else", status: "COMPLETED" }, NOW),
    ).toBeUndefined();
    expect(applyProviderResult(job(processing()), { id: "j1", status: "IN_PROGRESS" }, NOW)).toBeUndefined();
  });

  it("accepts the result of a submission whose status write was lost (Pending, no providerJobId)", () => {
    const pending: MediaJobStatus = { phase: "Pending", jobId: "j1", attempts: 0 };
    expect(concernsCurrentSubmission(pending, { id: "j1", status: "COMPLETED" })).toBe(true);
    expect(applyProviderResult(job(pending), { id: "j1", status: "COMPLETED", output: {} }, NOW)?.phase).toBe(
      "Completed",
    );
  });

  it("accepts a callback that beats the controller's first status write (no status yet)", () => {
    const fresh = job(undefined, { id: "order-9" });
    expect(
      applyProviderResult(fresh, { id: "order-9", status: "COMPLETED", output: { t: 1 } }, NOW),
    ).toMatchObject({
      phase: "Completed",
      jobId: "order-9",
      output: { t: 1 },
    });
    expect(applyProviderResult(fresh, { id: "someone-else", status: "COMPLETED" }, NOW)).toBeUndefined();
  });

  it("converges whatever the order and multiplicity of results (fast-check)", () => {
    const result = fc.constantFrom(
      { id: "j1", status: "COMPLETED", output: { text: "ok" } },
      { id: "j1", status: "IN_PROGRESS" },
      { id: "old-attempt", status: "FAILED" },
      { id: "j1", status: "IN_QUEUE" },
    );
    fc.assert(
      fc.property(fc.array(result, { minLength: 1, maxLength: 12 }), (results) => {
        let current = job(processing());
        for (const r of results) {
          const next = applyProviderResult(current, r, NOW);
          if (next) current = { ...current, status: next };
        }
        const once = applyProviderResult(
          job(processing()),
          { id: "j1", status: "COMPLETED", output: { text: "ok" } },
          NOW,
        )!;
        const sawCompleted = results.some((r) => r.status === "COMPLETED");
        expect(current.status).toEqual(sawCompleted ? once : processing());
      }),
    );
  });
});

describe("recordSubmission (a callback beat the controller's status write)", () => {
  const sub = {
    providerJobId: "j1",
    endpointId: "ep-1",
    submittedAt: "2026-11-22T09:59:59.000Z",
    attempts: 1,
  };

  it("adds when, where and which attempt to a job the callback already completed, keeping its outcome", () => {
    const completedByCallback = applyProviderResult(
      job(undefined, { id: "j1" }),
      { id: "j1", status: "COMPLETED", output: { text: "hi" } },
      NOW,
    )!;
    expect(completedByCallback).toMatchObject({ phase: "Completed", attempts: 0 });
    expect(completedByCallback.submittedAt).toBeUndefined();
    const recorded = recordSubmission(completedByCallback, sub)!;
    expect(recorded).toEqual({
      ...completedByCallback,
      providerJobId: "j1",
      endpointId: "ep-1",
      submittedAt: sub.submittedAt,
      attempts: 1,
    });
  });

  it("counts the attempt on a job a FAILED callback sent back to Pending, so the retry policy holds", () => {
    const retried = applyProviderResult(
      job(undefined, { id: "j1", maxAttempts: 2 }),
      { id: "j1", status: "FAILED", error: "oom" },
      NOW,
    )!;
    expect(retried).toMatchObject({ phase: "Pending", failures: 1, attempts: 0 });
    const recorded = recordSubmission(retried, sub)!;
    expect(recorded).toMatchObject({ phase: "Pending", failures: 1, attempts: 1, endpointId: "ep-1" });
    expect(recorded.providerJobId).toBeUndefined();
    // With the attempt counted, the next FAILED is the last one allowed.
    const failed = applyProviderResult(
      job({ ...recorded, phase: "Processing", providerJobId: "j1-retry-1", attempts: 2 }, { maxAttempts: 2 }),
      { id: "j1-retry-1", status: "FAILED" },
      NOW,
    );
    expect(failed?.phase).toBe("Failed");
  });

  it("changes nothing when the submission is already recorded or concerns another provider job", () => {
    expect(recordSubmission(processing(), sub)).toBeUndefined();
    expect(
      recordSubmission({ phase: "Completed", jobId: "j1", providerJobId: "other", attempts: 0 }, sub),
    ).toBeUndefined();
    expect(recordSubmission(undefined, sub)).toBeUndefined();
  });

  it("is idempotent: recording twice equals recording once", () => {
    const done: MediaJobStatus = { phase: "Completed", jobId: "j1", attempts: 0, output: {} };
    const once = recordSubmission(done, sub)!;
    expect(recordSubmission(once, sub)).toBeUndefined();
  });
});

describe("reset and timeouts", () => {
  it("resets only Processing jobs", () => {
    expect(resetToPending(processing(), NOW)).toMatchObject({
      phase: "Pending",
      replay: true,
      updatedAt: NOW,
    });
    expect(resetToPending({ phase: "Completed" }, NOW)).toBeUndefined();
  });

  it("replays a job the provider lost, but not forever", () => {
    expect(afterProviderLostJob(processing({ attempts: 1 }), NOW)).toMatchObject({
      phase: "Pending",
      replay: true,
    });
    const stop = afterProviderLostJob(processing({ attempts: MAX_ATTEMPTS_AFTER_LOSS }), NOW);
    expect(stop.phase).toBe("Failed");
    expect(stop.error).toMatch(/lost this job 3 times.*CALLBACK_BASE_URL/);
  });

  it("counts a job stuck after its timeout, from submittedAt", () => {
    const now = Date.parse("2026-11-22T10:00:00Z");
    expect(msUntilStuck(job(processing(), { timeoutSeconds: 120 }), now, 600)).toBe(60_000);
    expect(msUntilStuck(job(processing()), now, 30)).toBe(-30_000);
  });
});

describe("conditions", () => {
  it("keeps lastTransitionTime while the status is unchanged", () => {
    const first = setCondition(
      undefined,
      { type: "Ready", status: "False", reason: "A", message: "a" },
      "t1",
    );
    const same = setCondition(first, { type: "Ready", status: "False", reason: "B", message: "b" }, "t2");
    expect(same[0]).toMatchObject({ reason: "B", lastTransitionTime: "t1" });
    const flipped = setCondition(same, { type: "Ready", status: "True", reason: "C", message: "c" }, "t3");
    expect(flipped[0]!.lastTransitionTime).toBe("t3");
  });

  it("makes Succeeded agree with the phase", () => {
    const s = withPhaseConditions({ phase: "Failed", error: "boom" }, 3, NOW);
    expect(s.conditions?.find((c) => c.type === "Succeeded")).toMatchObject({
      status: "False",
      reason: "Failed",
      message: "boom",
    });
    expect(s.observedGeneration).toBe(3);
  });
});

describe("pipeline steps", () => {
  it("names steps deterministically and carries the output forward", () => {
    const first = job(
      { phase: "Completed", jobId: "j1", output: { text: "t" } },
      { then: [{ workload: "tts" }, { workload: "render" }] },
    );
    expect(nextStepName(first)).toBe("j-1-tts");
    const next = nextStepObject(first)!;
    expect(next.spec).toMatchObject({
      workload: "tts",
      input: { previous: { output: { text: "t" } } },
      then: [{ workload: "render" }],
    });
    expect(nextStepObject({ ...first, status: { phase: "Processing" } })).toBeUndefined();
  });
});
