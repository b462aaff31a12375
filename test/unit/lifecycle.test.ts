// The MediaJob lifecycle as pure transitions, and the idempotency property: any number of
// duplicate, late or reordered provider results converge to the state of one delivery.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import {
  CALLBACK_RETRY_WINDOW_MS,
  intentStatus,
  isUnconfirmed,
  markUnconfirmed,
  msUntilConfirmationDeadline,
  recordAccepted,
  withdrawIntent,
} from "../../src/mediajob/submission.js";
import {
  ERROR_MAX_CHARS,
  MAX_REPLAYS,
  initialStatus,
  providerRequestId,
  submissionId,
} from "../../src/mediajob/job.js";
import { PROVIDER_JOB_ID } from "../../src/provider/job-id.js";
import {
  afterProviderLostJob,
  msUntilStuck,
  resetPatch,
  resetToPending,
} from "../../src/mediajob/recovery.js";
import {
  OUTPUT_MAX_BYTES,
  storedOutput,
  applyProviderResult,
  concernsCurrentSubmission,
} from "../../src/mediajob/provider-result.js";
import {
  afterUnconfirmedDeadline,
  decideUnconfirmed,
  failedUnconfirmed,
} from "../../src/mediajob/unconfirmed.js";
import {
  nextStepName,
  nextStepObject,
  firstStepMetadata,
  ownPipelineCondition,
  stepPipelineCondition,
} from "../../src/mediajob/pipeline.js";
import { withPhaseConditions, summaryOf } from "../../src/mediajob/conditions.js";
import { msUntilDeadline, suspendedStatus } from "../../src/mediajob/deadline.js";
import { msUntilExpiry } from "../../src/mediajob/ttl.js";
import { setCondition } from "../../src/crds/conditions.js";

const NOW = "2026-11-22T10:00:00.000Z";
const job = (status?: MediaJobStatus, spec: Partial<MediaJob["spec"]> = {}): MediaJob =>
  makeMediaJob("j").ns("ns").uid("uid-1").generation(1).spec(spec).status(status).build();
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

  it("sends the provider the job's key inside a scope of its own: the same spec.id elsewhere is another id", () => {
    const at = (namespace: string, uid: string) => ({ metadata: { name: "j", namespace, uid } });
    const mine = providerRequestId(at("tenant-a", "uid-a"), { jobId: "order-1" }, "order-1");
    expect(mine).toMatch(/^[0-9a-f]{32}\.order-1$/);
    // Stable for the job (a reset resubmits the same id); a retry keeps the scope, with a fresh key.
    expect(providerRequestId(at("tenant-a", "uid-a"), { jobId: "order-1" }, "order-1")).toBe(mine);
    expect(providerRequestId(at("tenant-a", "uid-a"), { failures: 1 }, "order-1")).toBe(
      `${mine.split(".")[0]}.order-1-retry-1`,
    );
    // Another namespace, or the same name re-created (a new uid), never gets this job back.
    expect(providerRequestId(at("tenant-b", "uid-a"), {}, "order-1")).not.toBe(mine);
    expect(providerRequestId(at("tenant-a", "uid-b"), {}, "order-1")).not.toBe(mine);
    // The longest key, with a retry suffix, is still an id the provider's URLs accept.
    const longest = "k".repeat(128);
    expect(providerRequestId(at("n".repeat(63), "u"), { failures: 99, suspensions: 99 }, longest)).toMatch(
      PROVIDER_JOB_ID,
    );
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

  it("refuses a result for a job with no recorded submission: nothing of ours can be running", () => {
    // Every submission is written ahead of /run, so a result can only concern a recorded intent.
    const pending: MediaJobStatus = { phase: "Pending", jobId: "j1", attempts: 0 };
    const result = { id: "j1", status: "COMPLETED", output: {} };
    expect(concernsCurrentSubmission(pending, result, { adopt: true })).toBe(false);
    expect(applyProviderResult(job(pending), result, NOW, { adopt: true })).toBeUndefined();
    expect(
      applyProviderResult(job(undefined, { id: "order-9" }), { ...result, id: "order-9" }, NOW, {
        adopt: true,
      }),
    ).toBeUndefined();
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

describe("the write-ahead submission protocol", () => {
  const pending: MediaJobStatus = { phase: "Pending", jobId: "j1", attempts: 0 };
  const intent = intentStatus(pending, { endpointId: "ep-1", submissionId: "sub-aaaaaaaa", now: NOW });

  it("records the intent before the provider is called: Processing, a new attempt, no provider id", () => {
    expect(intent).toMatchObject({
      phase: "Processing",
      attempts: 1,
      endpointId: "ep-1",
      submission: { attempt: 1, id: "sub-aaaaaaaa", state: "Sending", startedAt: NOW },
    });
    expect(intent.providerJobId).toBeUndefined();
    expect(isUnconfirmed(intent)).toBe(true);
  });

  it("records the provider's id for the same attempt only, once", () => {
    const accepted = recordAccepted(intent, 1, "rp-1")!;
    expect(accepted).toMatchObject({ providerJobId: "rp-1", submission: { state: "Accepted" } });
    expect(isUnconfirmed(accepted)).toBe(false);
    expect(recordAccepted(accepted, 1, "rp-1")).toBeUndefined();
    expect(recordAccepted(accepted, 1, "rp-2")).toBeUndefined();
    expect(recordAccepted(intent, 2, "rp-1")).toBeUndefined();
  });

  it("keeps a callback's outcome when the controller records the id after it", () => {
    const completed = applyProviderResult(
      job(intent),
      { id: "rp-1", status: "COMPLETED", output: { text: "hi" } },
      NOW,
      { adopt: true },
    )!;
    expect(completed).toMatchObject({ phase: "Completed", providerJobId: "rp-1", output: { text: "hi" } });
    expect(recordAccepted(completed, 1, "rp-1")).toBeUndefined();
  });

  it("applies a result to a submission with no known provider id only when the caller adopts it", () => {
    const result = { id: "rp-9", status: "COMPLETED", output: {} };
    expect(applyProviderResult(job(intent), result, NOW)).toBeUndefined();
    expect(applyProviderResult(job(intent), result, NOW, { adopt: true })?.phase).toBe("Completed");
  });

  it("withdraws an intent the provider refused, restoring the attempt count", () => {
    const back = withdrawIntent(intent, pending, 1, NOW)!;
    expect(back).toMatchObject({ phase: "Pending", attempts: 0 });
    expect(back.submission).toBeUndefined();
    expect(withdrawIntent(recordAccepted(intent, 1, "rp-1"), pending, 1, NOW)).toBeUndefined();
  });

  it("marks a lost answer Unconfirmed once, and waits for its callback until the deadline", () => {
    const unconfirmed = markUnconfirmed(intent, 1)!;
    expect(unconfirmed.submission?.state).toBe("Unconfirmed");
    expect(markUnconfirmed(unconfirmed, 1)).toBeUndefined();
    const start = Date.parse(NOW);
    const j = job(unconfirmed, { timeoutSeconds: 60 });
    expect(msUntilConfirmationDeadline(j, start, 600)).toBe(60_000 + CALLBACK_RETRY_WINDOW_MS);
    const again = afterUnconfirmedDeadline(unconfirmed, NOW);
    expect(again).toMatchObject({ phase: "Pending", replay: true, unconfirmedResubmissions: 1 });
    expect(again.submission).toBeUndefined();
  });

  describe("past the confirmation deadline, the policy decides", () => {
    const unconfirmed = markUnconfirmed(intent, 1)!;
    const sending = intent; // a crash between /run and its record: never marked
    const start = Date.parse(NOW);
    const at = (seconds: number) => start + seconds * 1000;
    // spec.timeoutSeconds 60, window 30 s: the deadline is 90 s after the submission started.
    const cases: Array<{
      name: string;
      status: MediaJobStatus;
      policy: "fail" | "resubmit";
      nowMs: number;
      action: "wait" | "fail" | "resubmit";
      phase?: string;
      resubmissions?: number;
    }> = [
      {
        name: "fail, before the deadline",
        status: unconfirmed,
        policy: "fail",
        nowMs: at(89),
        action: "wait",
      },
      {
        name: "resubmit, before the deadline",
        status: unconfirmed,
        policy: "resubmit",
        nowMs: at(89),
        action: "wait",
      },
      {
        name: "fail, at the deadline",
        status: unconfirmed,
        policy: "fail",
        nowMs: at(90),
        action: "fail",
        phase: "Failed",
        resubmissions: 0,
      },
      {
        name: "fail, a never-marked Sending intent",
        status: sending,
        policy: "fail",
        nowMs: at(600),
        action: "fail",
        phase: "Failed",
        resubmissions: 0,
      },
      {
        name: "fail, after earlier resubmissions",
        status: { ...unconfirmed, unconfirmedResubmissions: 1 },
        policy: "fail",
        nowMs: at(90),
        action: "fail",
        phase: "Failed",
        resubmissions: 1,
      },
      {
        name: "resubmit, at the deadline",
        status: unconfirmed,
        policy: "resubmit",
        nowMs: at(90),
        action: "resubmit",
        phase: "Pending",
        resubmissions: 1,
      },
      {
        name: "resubmit, once more below the cap",
        status: { ...unconfirmed, unconfirmedResubmissions: MAX_REPLAYS - 1 },
        policy: "resubmit",
        nowMs: at(90),
        action: "resubmit",
        phase: "Pending",
        resubmissions: MAX_REPLAYS,
      },
      {
        name: "resubmit, at the cap",
        status: { ...unconfirmed, unconfirmedResubmissions: MAX_REPLAYS },
        policy: "resubmit",
        nowMs: at(90),
        action: "fail",
        phase: "Failed",
        resubmissions: MAX_REPLAYS,
      },
    ];
    it.each(cases)("$name: $action", (c) => {
      const d = decideUnconfirmed(job(c.status, { timeoutSeconds: 60 }), {
        nowMs: c.nowMs,
        defaultTimeoutSeconds: 600,
        windowMs: 30_000,
        policy: c.policy,
      });
      expect(d.action).toBe(c.action);
      if (d.action === "wait") {
        expect(d.remainingMs).toBe(at(90) - c.nowMs);
        return;
      }
      expect(d.status.phase).toBe(c.phase);
      expect(d.status.unconfirmedResubmissions ?? 0).toBe(c.resubmissions);
      if (d.action === "resubmit") {
        expect(d).toMatchObject({ reason: "UnconfirmedResubmission", outcome: "unconfirmed-resubmission" });
        expect(d.status.submission).toBeUndefined();
        expect(d.status.replay).toBe(true);
        return;
      }
      // Failed, never submitted again: the submission kept as the record of what may have run.
      expect(d).toMatchObject({ reason: "SubmissionUnconfirmed", outcome: "unconfirmed-failed" });
      expect(d.status.submission).toMatchObject({ attempt: 1, state: "Unconfirmed" });
      expect(d.status.providerJobId).toBeUndefined();
      expect(d.status.completedAt).toBe(new Date(c.nowMs).toISOString());
      expect(d.status.error).toMatch(/^SubmissionUnconfirmed: /);
      expect(d.status.error).toContain("kubectl media reset j -n ns");
      if (c.policy === "fail")
        expect(d.status.error).toMatch(/may have run the job once and its result never arrived/);
      expect(failedUnconfirmed(d.status)).toBe(true);
      const conditions = withPhaseConditions(d.status, 1, NOW).conditions ?? [];
      expect(conditions.find((x) => x.type === "Succeeded")).toMatchObject({
        status: "False",
        reason: "SubmissionUnconfirmed",
      });
      expect(conditions.find((x) => x.type === "Submitted")).toMatchObject({
        status: "False",
        reason: "SubmissionUnconfirmed",
      });
    });

    it("tells a job failed this way from one the provider failed", () => {
      const failed = applyProviderResult(
        job({
          ...processing(),
          submission: { attempt: 1, id: "sub-aaaaaaaa", startedAt: NOW, state: "Accepted" },
        }),
        { id: "j1", status: "FAILED" },
        NOW,
      )!;
      expect(failed.phase).toBe("Failed");
      expect(failedUnconfirmed(failed)).toBe(false);
      expect(
        withPhaseConditions(failed, 1, NOW).conditions?.find((x) => x.type === "Succeeded")?.reason,
      ).toBe("Failed");
    });
  });
});

describe("status that always fits the CRD", () => {
  it("keeps status.error within 4096 characters, prefix included", () => {
    const failed = applyProviderResult(
      job({
        ...processing(),
        submission: { attempt: 1, id: "sub-aaaaaaaa", startedAt: NOW, state: "Accepted" },
      }),
      { id: "j1", status: "FAILED", error: "x".repeat(5_000) },
      NOW,
    )!;
    expect(failed.phase).toBe("Failed");
    expect(failed.error!.length).toBeLessThanOrEqual(ERROR_MAX_CHARS);
    expect(failed.error).toMatch(/^FAILED: x+… \[truncated\]$/);
  });

  it("stores an output over the cap as a marker with a preview", () => {
    const big = { blob: "y".repeat(2 * 1024 * 1024) };
    const stored = storedOutput(big);
    expect(stored).toMatchObject({ truncated: true, maxBytes: OUTPUT_MAX_BYTES });
    expect(stored.originalBytes).toBeGreaterThan(2 * 1024 * 1024);
    expect(JSON.stringify(stored).length).toBeLessThan(OUTPUT_MAX_BYTES);
    expect(storedOutput({ small: 1 })).toEqual({ small: 1 });
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

  it("replays a job the provider lost, but not forever, counting losses only", () => {
    expect(afterProviderLostJob(processing({ attempts: 1 }), NOW)).toMatchObject({
      phase: "Pending",
      replay: true,
      providerLosses: 1,
    });
    // Attempts spent on failure retries or operator resets are not losses.
    expect(afterProviderLostJob(processing({ attempts: 7, providerLosses: 1 }), NOW).phase).toBe("Pending");
    const stop = afterProviderLostJob(processing({ providerLosses: MAX_REPLAYS - 1 }), NOW);
    expect(stop.phase).toBe("Failed");
    expect(stop.error).toMatch(/lost this job 3 times.*CALLBACK_BASE_URL/);
    // What it advises is what an operator can do: a Failed job is not reset, it is created again.
    expect(stop.error).toMatch(/create the job again/);
    expect(resetToPending(stop, NOW)).toBeUndefined();
  });

  it("the reset patch tests the job id, so a re-created job is not reset by mistake", () => {
    expect(resetPatch(NOW, "j1").slice(0, 2)).toEqual([
      { op: "test", path: "/status/jobId", value: "j1" },
      { op: "test", path: "/status/phase", value: "Processing" },
    ]);
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

describe("pipeline step names of any length", () => {
  const named = (name: string, then = [{ workload: "tts" as const }]) => ({
    ...job({ phase: "Completed", jobId: "j1", output: {} }, { then }),
    metadata: { name, namespace: "ns", uid: "uid-1", generation: 1 },
  });
  const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
  const LABEL = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

  it("keeps short names as they are", () => {
    expect(nextStepName(named("podcast"))).toBe("podcast-1-tts");
    const next = nextStepObject(named("podcast"))!;
    expect(
      (next.metadata as { labels: Record<string, string> }).labels["media-orchestrator.io/pipeline"],
    ).toBe("podcast");
  });

  it("gives valid, distinct names and labels to long pipelines sharing a prefix, even cut at a '-' or '.'", () => {
    // Cut at 63 characters, these would end in "-" and "." and be the same label.
    const a = `${"a".repeat(62)}-${"x".repeat(180)}`;
    const b = `${"a".repeat(62)}.${"y".repeat(180)}`;
    const [na, nb] = [nextStepObject(named(a))!, nextStepObject(named(b))!];
    const meta = (o: Record<string, unknown>) =>
      o.metadata as { name: string; labels: Record<string, string>; annotations: Record<string, string> };
    for (const m of [meta(na), meta(nb)]) {
      expect(m.name.length).toBeLessThanOrEqual(253);
      expect(m.name).toMatch(NAME);
      expect(m.labels["media-orchestrator.io/pipeline"]!.length).toBeLessThanOrEqual(63);
      expect(m.labels["media-orchestrator.io/pipeline"]).toMatch(LABEL);
    }
    expect(meta(na).name).not.toBe(meta(nb).name);
    expect(meta(na).labels["media-orchestrator.io/pipeline"]).not.toBe(
      meta(nb).labels["media-orchestrator.io/pipeline"],
    );
    // The next step keeps the pipeline's whole name, so its own next step is named alike.
    expect(meta(na).annotations["media-orchestrator.io/pipeline-name"]).toBe(a);
  });
});

describe("suspension and the active deadline", () => {
  const sub = { attempt: 1, id: "sub-aaaaaaaa", startedAt: NOW, state: "Accepted" as const };
  const started = "2026-11-22T09:59:00.000Z"; // 60 s before NOW
  const nowMs = Date.parse(NOW);

  it("counts the deadline from the first submission, and not at all before it", () => {
    expect(msUntilDeadline({ activeDeadlineSeconds: 90 }, { startedAt: started }, nowMs)).toBe(30_000);
    expect(msUntilDeadline({ activeDeadlineSeconds: 90 }, {}, nowMs)).toBe(Infinity);
    expect(msUntilDeadline({}, { startedAt: started }, nowMs)).toBe(Infinity);
    // A retry keeps the first submission's clock.
    const retried = intentStatus(
      { phase: "Pending", attempts: 1, startedAt: started },
      {
        endpointId: "ep",
        submissionId: "sub-2",
        now: NOW,
      },
    );
    expect(retried.startedAt).toBe(started);
  });

  it("a FAILED or TIMED_OUT past the deadline is final, though attempts remain", () => {
    const j = job(processing({ startedAt: started }), { activeDeadlineSeconds: 30, maxAttempts: 3 });
    const next = applyProviderResult(j, { id: "j1", status: "TIMED_OUT" }, NOW)!;
    expect(next).toMatchObject({ phase: "Failed", completedAt: NOW });
    expect(next.error).toMatch(/^DeadlineExceeded: /);
    const conditions = withPhaseConditions(next, 1, NOW);
    expect(conditions).toMatchObject({ reason: "DeadlineExceeded" });
    expect(conditions.conditions?.find((c) => c.type === "Succeeded")).toMatchObject({
      status: "False",
      reason: "DeadlineExceeded",
    });
  });

  it("the callback of the controller's own cancel ends the job as the controller would", () => {
    const suspended = applyProviderResult(
      job(processing({ submission: sub }), { suspend: true }),
      {
        id: "j1",
        status: "CANCELLED",
      },
      NOW,
    )!;
    expect(suspended).toMatchObject({ phase: "Pending", suspensions: 1 });
    expect(suspended.providerJobId).toBeUndefined();
    expect(suspended.submission).toBeUndefined();
    // Resumed: a fresh id, so a provider that honours ids does not answer with the cancelled job.
    expect(submissionId(suspended, "j1")).toBe("j1-retry-1");
    const late = applyProviderResult(
      job(processing({ startedAt: started }), { activeDeadlineSeconds: 10 }),
      {
        id: "j1",
        status: "CANCELLED",
      },
      NOW,
    )!;
    expect(late.phase).toBe("Failed");
    expect(late.error).toMatch(/^DeadlineExceeded: /);
    // Anyone else's cancel is still a cancel.
    expect(applyProviderResult(job(processing()), { id: "j1", status: "CANCELLED" }, NOW)?.phase).toBe(
      "Cancelled",
    );
  });

  it("a suspended job shows Suspended as its reason; the deadline restarts after it", () => {
    const s = suspendedStatus(processing({ startedAt: started, submission: sub }), NOW);
    expect(s.startedAt).toBeUndefined();
    const shown = withPhaseConditions(
      {
        ...s,
        conditions: setCondition(
          undefined,
          { type: "Suspended", status: "True", reason: "Suspended", message: "spec.suspend is true" },
          NOW,
        ),
      },
      1,
      NOW,
    );
    expect(shown).toMatchObject({ phase: "Pending", reason: "Suspended", message: "spec.suspend is true" });
  });
});

describe("status.reason and status.message", () => {
  const c = (type: string, status: "True" | "False" | "Unknown", reason: string) => ({
    type,
    status,
    reason,
    message: `${type} ${reason}`,
    lastTransitionTime: NOW,
  });
  it("say why a Pending job waits, why a job failed, and what a running job is doing", () => {
    expect(
      summaryOf([c("Succeeded", "Unknown", "Pending"), c("Admitted", "False", "AccountUnknown")]),
    ).toEqual({ reason: "AccountUnknown", message: "Admitted AccountUnknown" });
    expect(
      summaryOf([
        c("Succeeded", "Unknown", "Pending"),
        c("Admitted", "True", "AccountActive"),
        c("EndpointReady", "False", "EndpointMissing"),
      ]).reason,
    ).toBe("EndpointMissing");
    expect(
      summaryOf([c("Succeeded", "False", "Failed"), c("Admitted", "False", "AccountUnknown")]).reason,
    ).toBe("Failed");
    expect(
      summaryOf([c("Succeeded", "Unknown", "Processing"), c("Submitted", "Unknown", "SubmissionUnconfirmed")])
        .reason,
    ).toBe("SubmissionUnconfirmed");
    expect(
      summaryOf([c("Succeeded", "Unknown", "Processing"), c("Overdue", "True", "StillRunning")]).reason,
    ).toBe("StillRunning");
    expect(summaryOf([c("Succeeded", "True", "Completed")]).reason).toBe("Completed");
  });
});

describe("a pipeline's one handle", () => {
  const pipeline = (status: MediaJobStatus, labels?: Record<string, string>) => ({
    ...job(status, { then: [{ workload: "tts" }, { workload: "render" }] }),
    metadata: { name: "episode-42", namespace: "ns", uid: "uid-1", ...(labels && { labels }) },
  });

  it("the first job gets the pipeline's label, and its name in the annotation nextStepName reads", () => {
    expect(firstStepMetadata(pipeline({}))).toEqual({
      labels: { "media-orchestrator.io/pipeline": "episode-42" },
      annotations: { "media-orchestrator.io/pipeline-name": "episode-42" },
    });
    expect(firstStepMetadata(job({}))).toBeUndefined();
    const long = { ...pipeline({}), metadata: { name: "e".repeat(100), uid: "u" } };
    const meta = firstStepMetadata(long)!;
    const labelled = { ...long, metadata: { ...long.metadata, ...meta } };
    expect(nextStepName(labelled)).toBe(nextStepName(long));
  });

  it("later steps carry the first job's uid", () => {
    const first = pipeline({ phase: "Completed", output: {} });
    const second = nextStepObject(first) as { metadata: { annotations: Record<string, string> } };
    expect(second.metadata.annotations["media-orchestrator.io/pipeline-uid"]).toBe("uid-1");
  });

  it("PipelineSucceeded on the first job: Unknown while steps run, False when it fails, kept once decided", () => {
    expect(
      ownPipelineCondition(pipeline({ phase: "Completed", nextJob: "episode-42-1-tts" }), {
        phase: "Completed",
        nextJob: "episode-42-1-tts",
      }),
    ).toMatchObject({
      status: "Unknown",
      reason: "StepsRunning",
      message: "step 1 of 3 completed; next: episode-42-1-tts",
    });
    expect(ownPipelineCondition(pipeline({}), { phase: "Failed", error: "FAILED: boom" })).toMatchObject({
      status: "False",
      reason: "StepFailed",
      message: "step 1 (episode-42) ended Failed: Failed: FAILED: boom",
    });
    const decided = {
      phase: "Completed" as const,
      conditions: [c("PipelineSucceeded", "True", "PipelineCompleted")],
    };
    expect(ownPipelineCondition(pipeline(decided), decided)).toBeUndefined();
  });

  it("a later step decides it: True when the last completed, False when any failed", () => {
    const step = (n: number, then: boolean, status: MediaJobStatus) => ({
      ...job(status, then ? { then: [{ workload: "render" }] } : {}),
      metadata: {
        name: `episode-42-${n}`,
        uid: `u${n}`,
        labels: { "media-orchestrator.io/step": String(n) },
      },
    });
    expect(
      stepPipelineCondition(step(1, true, { phase: "Completed" }), { phase: "Completed" }),
    ).toBeUndefined();
    expect(
      stepPipelineCondition(step(2, false, { phase: "Completed" }), { phase: "Completed" }),
    ).toMatchObject({
      status: "True",
      message: "all 3 steps completed; the last: episode-42-2",
    });
    expect(
      stepPipelineCondition(step(1, true, {}), { phase: "Cancelled", error: "cancelled at the provider" }),
    ).toMatchObject({ status: "False", reason: "StepFailed" });
  });

  function c(type: string, status: "True" | "False" | "Unknown", reason: string) {
    return { type, status, reason, message: reason, lastTransitionTime: NOW };
  }
});

describe("spec.ttlSecondsAfterFinished", () => {
  const nowMs = Date.parse(NOW);
  const finished = (status: MediaJobStatus, spec: Partial<MediaJob["spec"]> = {}) =>
    job({ completedAt: "2026-11-22T09:59:00.000Z", ...status }, { ttlSecondsAfterFinished: 90, ...spec });

  it("counts from the end of the job; nothing without a TTL or before the end", () => {
    expect(msUntilExpiry(finished({ phase: "Failed" }), nowMs, false)).toBe(30_000);
    expect(
      msUntilExpiry(finished({ phase: "Completed" }, { ttlSecondsAfterFinished: 0 }), nowMs, false),
    ).toBe(-60_000);
    expect(msUntilExpiry(finished({ phase: "Processing" }), nowMs, false)).toBeUndefined();
    expect(msUntilExpiry(job({ phase: "Completed", completedAt: NOW }), nowMs, false)).toBeUndefined();
  });

  it("never before the next pipeline step is recorded, nor while it exists", () => {
    const then = { then: [{ workload: "tts" as const }] };
    expect(msUntilExpiry(finished({ phase: "Completed" }, then), nowMs, false)).toBeUndefined();
    expect(
      msUntilExpiry(finished({ phase: "Completed", nextJob: "j-1-tts" }, then), nowMs, true),
    ).toBeUndefined();
    expect(msUntilExpiry(finished({ phase: "Completed", nextJob: "j-1-tts" }, then), nowMs, false)).toBe(
      30_000,
    );
  });

  it("later steps inherit it", () => {
    const first = job(
      { phase: "Completed", output: {} },
      { ttlSecondsAfterFinished: 60, then: [{ workload: "tts" }] },
    );
    expect((nextStepObject(first) as { spec: MediaJob["spec"] }).spec.ttlSecondsAfterFinished).toBe(60);
  });
});
