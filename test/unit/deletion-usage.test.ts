// A deletion never drops a job's unreported usage silently: a finished job with usage outstanding
// keeps a finalizer (USAGE_FINALIZER) while metering is on, and its deletion waits for the report,
// bounded, with an escape annotation and a Warning naming the seconds lost when it lets go.
import { describe, expect, it } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import type { MediaJob, MediaJobStatus, UsageAttempt } from "../../src/crds/mediajob.js";
import { atRest } from "../../src/mediajob/at-rest.js";
import {
  deletionUsageWait,
  planDeletion,
  SKIP_USAGE_REPORT_ANNOTATION,
  USAGE_WAIT_MS,
} from "../../src/mediajob/deletion.js";
import { FINALIZER } from "../../src/mediajob/job.js";
import { planFinish } from "../../src/mediajob/plan.js";
import { DEFAULT_USAGE_SETTINGS, type UsageSettings } from "../../src/mediajob/usage.js";
import { USAGE_FINALIZER } from "../../src/mediajob/usage-hold.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();
const metering: UsageSettings = { ...DEFAULT_USAGE_SETTINGS, metering: true };

const attempt = (o: Partial<UsageAttempt> = {}): UsageAttempt => ({
  attempt: 1,
  providerJobId: "p-1",
  providerStatus: "COMPLETED",
  executionTimeMs: 41_200,
  endedAt: ago(60),
  billedSeconds: 42,
  meter: "Pending",
  eventName: "gpu_seconds",
  identifier: "mj_uid-1_1",
  ...o,
});
const finished = (a: UsageAttempt[], o: Partial<MediaJobStatus> = {}): MediaJobStatus => ({
  phase: "Completed",
  completedAt: ago(60),
  usage: { workload: "asr", account: "cus_1", attempts: a },
  ...o,
});
const job = (status: MediaJobStatus, meta: Partial<MediaJob["metadata"]> = {}): MediaJob =>
  makeMediaJob("clip").ns("ns").uid("uid-1").generation(1).meta(meta).account("cus_1").status(status).build();
const deleting = (status: MediaJobStatus, forSeconds: number, meta: Partial<MediaJob["metadata"]> = {}) =>
  job(status, { finalizers: [USAGE_FINALIZER], deletionTimestamp: ago(forSeconds), ...meta });
const settled = attempt({ meter: "Reported", counted: true, countedReported: true });

describe("a finished job's usage keeps it (planFinish)", () => {
  const o = { nowMs: NOW.getTime(), nextStepCached: false, failed: false };
  it("with metering on and usage outstanding, USAGE_FINALIZER takes the place of the run's finalizer", () => {
    const j = job(finished([attempt()]), { finalizers: [FINALIZER] });
    expect(planFinish(j, { ...o, metering: true }).actions).toEqual([
      { type: "releaseFinalizer", endEvent: ["Normal", "Completed", expect.any(String)], keepForUsage: true },
    ]);
    // Metering off, or nothing outstanding: let go as before, no finalizer more.
    expect(planFinish(j, { ...o, metering: false }).actions).toEqual([
      { type: "releaseFinalizer", endEvent: ["Normal", "Completed", expect.any(String)] },
    ]);
    const done = job(finished([settled]), { finalizers: [FINALIZER] });
    expect(planFinish(done, { ...o, metering: true }).actions).toEqual([
      { type: "releaseFinalizer", endEvent: ["Normal", "Completed", expect.any(String)] },
    ]);
  });
  it("USAGE_FINALIZER goes once the usage is reported and counted (or metering is turned off)", () => {
    const held = job(finished([attempt()]), { finalizers: [USAGE_FINALIZER] });
    expect(planFinish(held, { ...o, metering: true }).actions).toEqual([]);
    expect(planFinish(held, { ...o, metering: false }).actions).toEqual([{ type: "releaseUsageFinalizer" }]);
    const done = job(finished([settled]), { finalizers: [USAGE_FINALIZER] });
    expect(planFinish(done, { ...o, metering: true }).actions).toEqual([{ type: "releaseUsageFinalizer" }]);
  });
  it("a job kept for its usage rests while the report waits, and is looked at once it can let go", () => {
    // The reporter's write that settles the usage brings the pass: no look at every tick meanwhile.
    expect(atRest(job(finished([attempt()]), { finalizers: [USAGE_FINALIZER] }))).toBe(true);
    expect(atRest(job(finished([settled]), { finalizers: [USAGE_FINALIZER] }))).toBe(false);
    expect(atRest(job(finished([settled]), { finalizers: [] }))).toBe(true);
    expect(atRest(job(finished([attempt()]), { finalizers: [FINALIZER] }))).toBe(false);
  });
});

describe("a deletion waits for the usage report (planDeletion)", () => {
  const now = NOW.getTime();
  it("waits while the report is outstanding, with one Normal Event at the start, up to the bound", () => {
    const first = planDeletion(deleting(finished([attempt()]), 1), now, { usage: metering });
    expect(first).toEqual({
      steps: [
        { type: "event", event: ["Normal", "DeletionWaitsForUsage", expect.stringContaining("42 GPU")] },
      ],
      requeueAfterMs: USAGE_WAIT_MS - 1_000,
    });
    // Later passes of the wait tell nothing (no Event per tick).
    expect(planDeletion(deleting(finished([attempt()]), 600), now, { usage: metering })).toEqual({
      steps: [],
      requeueAfterMs: USAGE_WAIT_MS - 600_000,
    });
    // Reported and counted: the finalizers go.
    expect(planDeletion(deleting(finished([settled]), 600), now, { usage: metering }).steps).toEqual([
      { type: "removeFinalizer" },
    ]);
  });
  it("never blocks for good: metering off, the bound, or the annotation lets go", () => {
    const pending = finished([attempt()]);
    expect(planDeletion(deleting(pending, 1), now, { usage: DEFAULT_USAGE_SETTINGS }).steps).toEqual([
      { type: "removeFinalizer" },
    ]);
    expect(planDeletion(deleting(pending, 1), now, { usageWaitMs: 0, usage: metering }).steps).toEqual([
      {
        type: "event",
        event: [
          "Warning",
          "UsageUnreportedOnDeletion",
          expect.stringMatching(/42 GPU seconds not reported.*mj_uid-1_1.*42 not counted into account cus_1/),
        ],
        droppedSeconds: 42,
      },
      { type: "removeFinalizer" },
    ]);
    const overdue = planDeletion(deleting(pending, 3_600), now, { usage: metering });
    expect(overdue.steps.map((s) => s.type)).toEqual(["event", "removeFinalizer"]);
    expect(overdue.steps[0]).toMatchObject({
      droppedSeconds: 42,
      event: ["Warning", "UsageUnreportedOnDeletion", expect.stringContaining("after waiting 3600 s")],
    });
    const escaped = deleting(pending, 1, { annotations: { [SKIP_USAGE_REPORT_ANNOTATION]: "true" } });
    expect(planDeletion(escaped, now, { usage: metering }).steps).toEqual([
      {
        type: "event",
        event: [
          "Warning",
          "UsageUnreportedOnDeletion",
          expect.stringContaining(SKIP_USAGE_REPORT_ANNOTATION),
        ],
        droppedSeconds: 42,
      },
      { type: "removeFinalizer" },
    ]);
  });
  it("a refused report or one only awaiting its count: refused lets go, uncounted waits", () => {
    const refused = finished([attempt({ meter: "Refused", counted: true, message: "no such customer" })]);
    expect(planDeletion(deleting(refused, 1), now, { usage: metering }).steps).toEqual([
      { type: "removeFinalizer" },
    ]);
    const uncounted = finished([attempt({ meter: "Reported", counted: false })]);
    expect(planDeletion(deleting(uncounted, 1), now, { usage: metering }).requeueAfterMs).toBeGreaterThan(0);
  });
  it("usage recorded but not billed yet (the sidecar's write) is billed by the deletion, then waited for", () => {
    const raw = attempt({
      billedSeconds: undefined,
      meter: undefined,
      eventName: undefined,
      identifier: undefined,
    });
    const plan = planDeletion(deleting(finished([raw]), 1, { finalizers: [FINALIZER] }), now, {
      usage: metering,
    });
    expect(plan.steps[0]).toMatchObject({
      type: "billUsage",
      status: { usage: { attempts: [{ billedSeconds: 42, meter: "Pending", identifier: "mj_uid-1_1" }] } },
    });
    expect(plan.steps.map((s) => s.type)).toEqual(["billUsage", "event"]);
    expect(plan.requeueAfterMs).toBeGreaterThan(0);
  });
  it("a running job is cancelled first; its usage is waited for in the passes after the cancel", () => {
    const running: MediaJobStatus = {
      phase: "Processing",
      endpointId: "ep-1",
      providerJobId: "p-1",
      submission: { attempt: 1, id: "s-1", startedAt: ago(60), state: "Accepted" },
    };
    const j = job(running, { finalizers: [FINALIZER], deletionTimestamp: ago(1) });
    expect(planDeletion(j, now, { usage: metering }).steps.map((s) => s.type)).toEqual([
      "cancel",
      "removeFinalizer",
    ]);
    // What the cancel wrote (Cancelled, usage Pending) keeps the finalizer in that same pass.
    const cancelled = job(
      finished([attempt({ providerStatus: "CANCELLED" })], { phase: "Cancelled", completedAt: ago(0) }),
      {
        finalizers: [FINALIZER],
        deletionTimestamp: ago(200),
      },
    );
    const wait = deletionUsageWait(cancelled, now, { usage: metering });
    expect(wait).toMatchObject({
      wait: true,
      event: ["Normal", "DeletionWaitsForUsage", expect.any(String)],
    });
  });
  it("a job reset to Pending keeps an earlier attempt's unreported usage: kept, and waited for", () => {
    const reset = finished([attempt()], { phase: "Pending", completedAt: undefined });
    const o = { nowMs: now, nextStepCached: false, failed: false, metering: true };
    expect(planFinish(job(reset, { finalizers: [USAGE_FINALIZER] }), o).actions).toEqual([]);
    expect(planDeletion(deleting(reset, 1), now, { usage: metering })).toMatchObject({
      requeueAfterMs: USAGE_WAIT_MS - 1_000,
    });
  });
  it("a job without a finalizer of ours is nothing to the deletion", () => {
    expect(
      planDeletion(job(finished([attempt()]), { deletionTimestamp: ago(1) }), now, { usage: metering }),
    ).toEqual({
      steps: [],
    });
  });
});
