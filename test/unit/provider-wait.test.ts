// A submitted job waiting in its endpoint's queue at the provider names the cause on itself (its
// Queued condition and the REASON column), read at each pass while it waits, written only when
// the cause's reason changes, and cleared when it starts and when the attempt ends. Pure: the plan
// of a Processing job from its facts.
import { describe, expect, it } from "vitest";
import { submittedStatus, trackedJob } from "../support/builders.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { withPhaseConditions } from "../../src/mediajob/conditions.js";
import { planJob, writtenStatus } from "../../src/mediajob/plan.js";
import type { Facts } from "../../src/mediajob/pass.js";
import { providerReadDue } from "../../src/mediajob/processing.js";
import { planSubmission } from "../../src/mediajob/write-ahead.js";
import { isProviderWait, providerWaitCause, type WaitCause } from "../../src/mediajob/wait-cause.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();
const job = (status: MediaJobStatus, spec: Partial<MediaJob["spec"]> = {}): MediaJob =>
  trackedJob().spec(spec).status(status).build();
const submitted = (o: Partial<MediaJobStatus> = {}): MediaJobStatus => submittedStatus(ago(10), o);
const crashLoop = providerWaitCause({ jobsInQueue: 3, workersUnhealthy: 2 }, 2)!;
const fromZero = providerWaitCause({ jobsInQueue: 3, workersInitializing: 1 }, 2)!;
const facts = (providerWait?: WaitCause, provider?: Facts["provider"]): Facts => ({
  now: NOW,
  settings: { defaultTimeoutSeconds: 600, tickMs: 30_000 },
  newSubmissionId: "fresh",
  ...(providerWait && { providerWait }),
  ...(provider && { provider }),
});
/** The pass's status as the reconciler writes it (conditions and summary follow). */
const pass = (j: MediaJob, f: Facts) => {
  const plan = planJob(j, f);
  return { plan, status: writtenStatus(j, plan.status, undefined, NOW.toISOString()) };
};
const due = (j: MediaJob, cause?: WaitCause) =>
  providerReadDue(j, NOW.getTime(), 600, false, cause) !== undefined;
const queuedOf = (s: MediaJobStatus | undefined) => s?.conditions?.find((c) => c.type === "Queued");

describe("a submitted job in a queue with a cause", () => {
  it("is read, and IN_QUEUE names the cause with its fix in the REASON column", () => {
    const j = job(submitted());
    expect(due(j)).toBe(false); // no cause: nothing read
    expect(due(j, crashLoop)).toBe(true);
    const { status } = pass(j, facts(crashLoop, { result: { id: "p-1", status: "IN_QUEUE" } }));
    expect(queuedOf(status)).toMatchObject({ status: "True", reason: "WorkersUnhealthy" });
    expect(status.reason).toBe("WorkersUnhealthy");
    expect(status.message).toMatch(
      /^waiting in the provider's queue: .*crash as they start.*Fix: read the worker logs/,
    );
    // Read again at the next pass (it may have started), but the same reason, with other counts in
    // its message, changes nothing: nothing to write at the next tick.
    const again = job(status);
    expect(due(again, crashLoop)).toBe(true);
    const queued = { result: { id: "p-1", status: "IN_QUEUE" } };
    const recounted = { ...crashLoop, message: "5 job(s) queued while 2 worker(s) are unhealthy" };
    expect(pass(again, facts(recounted, queued)).status).toEqual(status);
    // Nor does a failed read, or a reading of the endpoint with no cause (it is still queued).
    expect(pass(again, facts(crashLoop, { error: "503" })).status).toEqual(status);
    expect(pass(again, facts(undefined, queued)).status).toEqual(status);
  });

  it("a new cause is read again and replaces the old one", () => {
    const waiting = job(
      pass(job(submitted()), facts(crashLoop, { result: { id: "p-1", status: "IN_QUEUE" } })).status,
    );
    expect(due(waiting, fromZero)).toBe(true);
    const { status } = pass(waiting, facts(fromZero, { result: { id: "p-1", status: "IN_QUEUE" } }));
    expect(queuedOf(status)).toMatchObject({ status: "True", reason: "ScalingFromZero" });
    expect(status.message).toMatch(/cold start, from zero workers/);
  });

  it("a job a worker already runs is not told the queue's cause, and is not read for it again", () => {
    const { status } = pass(
      job(submitted()),
      facts(crashLoop, { result: { id: "p-1", status: "IN_PROGRESS" } }),
    );
    expect(queuedOf(status)).toBeUndefined();
    expect(status.reason).toBe("Processing");
    expect(status.conditions?.find((c) => c.type === "Started")?.status).toBe("True");
    expect(due(job(status), fromZero)).toBe(false);
  });

  it("starting ends the wait: Queued=False, reason Started", () => {
    const waiting = job(
      pass(job(submitted()), facts(crashLoop, { result: { id: "p-1", status: "IN_QUEUE" } })).status,
    );
    const { status } = pass(waiting, facts(fromZero, { result: { id: "p-1", status: "IN_PROGRESS" } }));
    expect(queuedOf(status)).toMatchObject({ status: "False", reason: "Started" });
    expect(status.reason).toBe("Processing");
  });

  it("a waiting job is read until it starts, whatever the endpoint's last reading says", () => {
    const waiting = job(
      pass(job(submitted()), facts(crashLoop, { result: { id: "p-1", status: "IN_QUEUE" } })).status,
    );
    expect(due(waiting)).toBe(true);
    const { status } = pass(waiting, facts(undefined, { result: { id: "p-1", status: "IN_PROGRESS" } }));
    expect(queuedOf(status)).toMatchObject({ status: "False", reason: "Started" });
    expect(due(job(status), crashLoop)).toBe(false);
  });

  it("a failed read changes nothing and is tried again at the next pass", () => {
    const j = job(submitted());
    const { status } = pass(j, facts(crashLoop, { error: "503" }));
    expect(queuedOf(status)).toBeUndefined();
    expect(due(job(status), crashLoop)).toBe(true);
  });

  it("the attempt's end (a callback) clears the wait: a Pending job's Queued is the window's alone", () => {
    const waiting = pass(
      job(submitted()),
      facts(crashLoop, { result: { id: "p-1", status: "IN_QUEUE" } }),
    ).status;
    const retried = withPhaseConditions(
      { ...waiting, phase: "Pending", providerJobId: undefined },
      1,
      NOW.toISOString(),
    );
    expect(queuedOf(retried)).toMatchObject({ status: "False", reason: "LeftProviderQueue" });
    expect(retried.reason).not.toBe("WorkersUnhealthy");
    const done = withPhaseConditions({ ...waiting, phase: "Completed" }, 1, NOW.toISOString());
    expect(queuedOf(done)?.status).toBe("False");
  });

  it("a later attempt is seen started on its own: an earlier attempt's Started=True is dropped", () => {
    const started = pass(
      job(submitted()),
      facts(crashLoop, { result: { id: "p-1", status: "IN_PROGRESS" } }),
    ).status;
    const pending: MediaJobStatus = {
      ...started,
      phase: "Pending",
      providerJobId: undefined,
      submission: undefined,
    };
    const next = planSubmission(job(pending), pending, {
      endpointId: "ep-1",
      newSubmissionId: "s-2",
      now: NOW.toISOString(),
      defaultTimeoutSeconds: 600,
    });
    expect(next.intent.conditions?.find((c) => c.type === "Started")).toBeUndefined();
    const accepted = job({ ...next.intent, phase: "Processing", providerJobId: "p-2" });
    expect(due(accepted, crashLoop)).toBe(true);
  });
});

describe("the provider's causes and the window's reasons", () => {
  const queuedFor = (reason: string) => ({
    type: "Queued",
    status: "True" as const,
    reason,
    message: "",
    lastTransitionTime: NOW.toISOString(),
  });

  it("every cause providerWaitCause gives is a wait at the provider; the window's reasons are not", () => {
    const healths = [
      { jobsInQueue: 1, workersUnhealthy: 1 },
      { jobsInQueue: 1, workersThrottled: 1 },
      { jobsInQueue: 1, workersInitializing: 1 },
      { jobsInQueue: 1, workersInitializing: 1, workersRunning: 1 },
      { jobsInQueue: 1, workersRunning: 2 },
      { jobsInQueue: 1, workersRunning: 1 },
      { jobsInQueue: 1 },
    ];
    const reasons = new Set([
      ...healths.map((h) => providerWaitCause(h, 2)!.reason),
      providerWaitCause({ jobsInQueue: 1 }, 0)!.reason,
    ]);
    expect(reasons.size).toBe(7);
    for (const r of reasons) expect(isProviderWait(queuedFor(r)), r).toBe(true);
    for (const r of ["WindowFull", "Throttled", "NoCapacity", "ScalerUnknown", "LowPriority"])
      expect(isProviderWait(queuedFor(r)), r).toBe(false);
  });
});
