// spec.startDeadlineSeconds: a job still in the provider's queue past it is cancelled there (a
// queued job costs nothing) and ends Failed, StartDeadlineExceeded, or goes back to Pending while
// spec.maxAttempts allows; a job a worker started in time is left to run. Pure: the plan, the
// cancel's answer and a late callback.
import { describe, expect, it } from "vitest";
import { trackedJob } from "../support/builders.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { withCondition, withPhaseConditions } from "../../src/mediajob/conditions.js";
import { planJob } from "../../src/mediajob/plan.js";
import { type Facts } from "../../src/mediajob/pass.js";
import { providerReadDue } from "../../src/mediajob/processing.js";
import { applyProviderResult } from "../../src/mediajob/provider-result.js";
import { START_DEADLINE_GRACE_MS } from "../../src/mediajob/start-deadline.js";
import { afterStop } from "../../src/mediajob/stop.js";
import { planSubmission } from "../../src/mediajob/write-ahead.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();
const job = (spec: Partial<MediaJob["spec"]>, status?: MediaJobStatus): MediaJob =>
  trackedJob()
    .spec({ startDeadlineSeconds: 60, ...spec })
    .status(status)
    .build();
const queued = (submittedSecondsAgo: number, o: Partial<MediaJobStatus> = {}): MediaJobStatus => ({
  phase: "Processing",
  jobId: "uid-1",
  attempts: 1,
  endpointId: "ep-1",
  providerJobId: "p-1",
  submittedAt: ago(submittedSecondsAgo),
  startedAt: ago(submittedSecondsAgo),
  submission: {
    attempt: 1,
    id: "s-1",
    startedAt: ago(submittedSecondsAgo),
    state: "Accepted",
    startBy: ago(submittedSecondsAgo - 60),
  },
  ...o,
});
const facts = (provider?: Facts["provider"]): Facts => ({
  now: NOW,
  settings: { defaultTimeoutSeconds: 600, tickMs: 30_000 },
  newSubmissionId: "fresh",
  ...(provider && { provider }),
});

describe("a submission of a job with a start deadline", () => {
  it("gives the provider a ttl that outlives the start deadline and the run, and is not yet seen started", () => {
    const plan = planSubmission(
      job({ executionTimeoutSeconds: 120 }),
      { phase: "Pending", jobId: "uid-1" },
      {
        endpointId: "ep-1",
        newSubmissionId: "sub-00000001",
        now: NOW.toISOString(),
        defaultTimeoutSeconds: 600,
        executionTimeoutMs: 120_000,
      },
    );
    expect(plan.request.policy).toEqual({
      executionTimeout: 120_000,
      ttl: 120_000 + 60_000 + START_DEADLINE_GRACE_MS,
    });
    expect(plan.intent.conditions?.find((c) => c.type === "Started")).toMatchObject({
      status: "False",
      reason: "NotYetStarted",
    });
    // Looked at again at the start deadline, not only at the timeout.
    expect(plan.timeoutMs).toBe(60_000);
    expect(plan.intent.submission?.startBy).toBe(new Date(NOW.getTime() + 60_000).toISOString());
  });

  it("the controller's default applies to a job that sets none; the job's own wins", () => {
    const submit = (spec: Partial<MediaJob["spec"]>) =>
      planSubmission(
        job(spec),
        { phase: "Pending", jobId: "uid-1" },
        {
          endpointId: "ep-1",
          newSubmissionId: "sub-00000001",
          now: NOW.toISOString(),
          defaultTimeoutSeconds: 600,
          executionTimeoutMs: 120_000,
          defaultStartDeadlineSeconds: 300,
        },
      );
    const byDefault = submit({ startDeadlineSeconds: undefined });
    expect(byDefault.intent.submission?.startBy).toBe(new Date(NOW.getTime() + 300_000).toISOString());
    expect(byDefault.request.policy.ttl).toBe(120_000 + 300_000 + START_DEADLINE_GRACE_MS);
    expect(submit({ startDeadlineSeconds: 30 }).intent.submission?.startBy).toBe(
      new Date(NOW.getTime() + 30_000).toISOString(),
    );
    // Without either: no start deadline, the provider's default queue allowance.
    const none = planSubmission(
      job({ startDeadlineSeconds: undefined }),
      { phase: "Pending", jobId: "uid-1" },
      {
        endpointId: "ep-1",
        newSubmissionId: "sub-00000001",
        now: NOW.toISOString(),
        defaultTimeoutSeconds: 600,
      },
    );
    expect(none.intent.submission?.startBy).toBeUndefined();
    expect(none.intent.conditions?.find((c) => c.type === "Started")).toBeUndefined();
  });
});

describe("past the start deadline", () => {
  it("before it: nothing read, looked at again when it comes", () => {
    const j = job({}, queued(20));
    expect(providerReadDue(j, NOW.getTime(), 600)).toBeUndefined();
    expect(planJob(j, facts()).requeueAfterMs).toBe(40_000);
  });

  it("still IN_QUEUE at the provider: cancelled there", () => {
    const j = job({}, queued(61));
    expect(providerReadDue(j, NOW.getTime(), 600)).toEqual({ endpointId: "ep-1", providerJobId: "p-1" });
    const plan = planJob(j, facts({ result: { id: "p-1", status: "IN_QUEUE" } }));
    expect(plan.actions).toEqual([
      { type: "cancel", why: "start-deadline", endpointId: "ep-1", providerJobId: "p-1" },
    ]);
  });

  it("names the endpoint's cause from its /health: the condition, then the job's error", () => {
    const j = job({}, queued(61));
    const plan = planJob(j, {
      ...facts({ result: { id: "p-1", status: "IN_QUEUE" } }),
      providerWait: {
        reason: "WorkersUnhealthy",
        message: "2 worker(s) are unhealthy: they crash as they start",
      },
    });
    expect(plan.actions.map((a) => a.type)).toEqual(["cancel"]);
    expect(plan.status.conditions?.find((c) => c.type === "Started")).toMatchObject({
      status: "False",
      reason: "WorkersUnhealthy",
    });
    const end = afterStop(
      j,
      plan.status,
      "start-deadline",
      { result: { id: "p-1", status: "CANCELLED", delayTime: 61_000 }, confirmed: true },
      NOW.toISOString(),
    );
    expect(end.status.error).toMatch(/at the endpoint: WorkersUnhealthy: 2 worker\(s\) are unhealthy/);
  });

  it("the cancel's end: Failed, StartDeadlineExceeded, with the attempt's queue time as its usage", () => {
    const j = job({}, queued(61));
    const plan = afterStop(
      j,
      j.status!,
      "start-deadline",
      { result: { id: "p-1", status: "CANCELLED", delayTime: 61_000, executionTime: 0 }, confirmed: true },
      NOW.toISOString(),
    );
    expect(plan.status.phase).toBe("Failed");
    expect(plan.status.error).toMatch(
      /^StartDeadlineExceeded: the job waited in the provider's queue past its start deadline \(60 s\)/,
    );
    expect(plan.events.map((e) => e[1])).toEqual(["StartDeadlineExceeded"]);
    expect(plan.status.usage?.attempts).toEqual([
      expect.objectContaining({ providerStatus: "CANCELLED", executionTimeMs: 0, delayTimeMs: 61_000 }),
    ]);
    const shown = withPhaseConditions(plan.status, 1, NOW.toISOString());
    expect(shown.conditions?.find((c) => c.type === "Succeeded")).toMatchObject({
      status: "False",
      reason: "StartDeadlineExceeded",
    });
  });

  it("with attempts left: back to Pending, counted as a failure", () => {
    const j = job({ maxAttempts: 2 }, queued(61));
    const plan = afterStop(
      j,
      j.status!,
      "start-deadline",
      { result: { id: "p-1", status: "CANCELLED", delayTime: 61_000 }, confirmed: true },
      NOW.toISOString(),
    );
    expect(plan.status).toMatchObject({ phase: "Pending", failures: 1 });
    expect(plan.status.providerJobId).toBeUndefined();
    expect(plan.events[0]?.[2]).toMatch(/submitted again/);
  });

  it("a worker started it in time (IN_PROGRESS): left to run, and not read again before its timeout", () => {
    const j = job({}, queued(61));
    const plan = planJob(j, facts({ result: { id: "p-1", status: "IN_PROGRESS" } }));
    expect(plan.actions).toEqual([]);
    expect(plan.status.phase).toBe("Processing");
    expect(plan.status.conditions?.find((c) => c.type === "Started")?.status).toBe("True");
    expect(plan.requeueAfterMs).toBe(539_000);
    expect(providerReadDue(job({}, plan.status), NOW.getTime(), 600)).toBeUndefined();
  });

  it("it completed meanwhile: the result is kept", () => {
    const j = job({}, queued(61));
    const plan = planJob(j, facts({ result: { id: "p-1", status: "COMPLETED", output: {} } }));
    expect(plan.status.phase).toBe("Completed");
  });

  it("the callback of the controller's own cancel ends it as the controller would", () => {
    const j = job({}, queued(61));
    const next = applyProviderResult(
      j,
      { id: "p-1", status: "CANCELLED", delayTime: 61_000 },
      NOW.toISOString(),
    );
    expect(next).toMatchObject({ phase: "Failed" });
    expect(next?.error).toMatch(/^StartDeadlineExceeded: /);
  });

  it("that callback, beating the controller's own write, still names the cause the job's wait recorded", () => {
    // An earlier pass named the endpoint's cause on the Queued condition; the pass at the deadline
    // cancelled, and the cancel's callback reached the sidecar before that pass wrote Started=False.
    const waiting = withCondition(
      queued(61),
      1,
      {
        type: "Queued",
        status: "True",
        reason: "WorkersUnhealthy",
        message: "waiting in the provider's queue: 2 worker(s) are unhealthy: they crash as they start",
      },
      NOW.toISOString(),
    );
    const next = applyProviderResult(
      job({}, waiting),
      { id: "p-1", status: "CANCELLED", delayTime: 61_000 },
      NOW.toISOString(),
    );
    expect(next?.error).toMatch(/at the endpoint: WorkersUnhealthy: 2 worker\(s\) are unhealthy: they crash/);
  });
});
