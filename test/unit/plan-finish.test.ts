// planFinish as a table (KubeRay's rayjob_controller_unit_test.go style): each row a job as a pass
// wrote it and the pass's outcome, and what follows the status write: which finalizer goes, the
// Event that tells the end, the pipeline told, the TTL's deletion, and when to look again.
import { describe, expect, it } from "vitest";
import type { MediaJobStatus, UsageAttempt } from "../../src/crds/mediajob.js";
import type { PlannedEvent } from "../../src/mediajob/conditions.js";
import { FINALIZER } from "../../src/mediajob/job.js";
import { planFinish, type Finish } from "../../src/mediajob/plan.js";
import { STEP_LABEL } from "../../src/mediajob/pipeline.js";
import { USAGE_FINALIZER, USAGE_SETTLE_WAIT_MS } from "../../src/mediajob/usage-hold.js";
import { makeMediaJob, type MediaJobBuilder } from "../support/builders.js";

const NOW = Date.parse("2026-01-01T01:00:00.000Z");
const ago = (s: number) => new Date(NOW - s * 1000).toISOString();

/** The job of every row: clip in ns, as the controller's cache holds it. */
const clip = (): MediaJobBuilder => makeMediaJob("clip").ns("ns").uid("uid-1").generation(1);
const ended = (phase: "Completed" | "Failed" | "Cancelled", o: MediaJobStatus = {}): MediaJobStatus => ({
  phase,
  jobId: "uid-1",
  attempts: 1,
  providerJobId: "p-1",
  completedAt: ago(120),
  updatedAt: ago(120),
  ...(phase === "Failed" && { error: "FAILED: out of memory" }),
  ...(phase === "Cancelled" && {
    error: "Cancelled: spec.cancel is true: cancelled job p-1 at the provider",
  }),
  ...o,
});
const running = (startedSecondsAgo: number): MediaJobStatus => ({
  phase: "Processing",
  jobId: "uid-1",
  attempts: 1,
  endpointId: "ep-1",
  providerJobId: "p-1",
  startedAt: ago(startedSecondsAgo),
  submittedAt: ago(startedSecondsAgo),
});
/** One attempt's usage: billed 7 s for cus_1, its report `meter`, counted. */
const usage = (meter: UsageAttempt["meter"]): MediaJobStatus["usage"] => ({
  workload: "asr",
  account: "cus_1",
  billedSeconds: 7,
  attempts: [
    {
      attempt: 1,
      providerJobId: "p-1",
      providerStatus: "COMPLETED",
      endedAt: ago(120),
      billedSeconds: 7,
      meter,
      identifier: "mj_uid-1_1",
      counted: true,
      countedReported: meter === "Reported",
    },
  ],
});
/** The second step of pipeline `p` (its first job's uid `uid-p`), as the first step created it. */
const secondStep = (): MediaJobBuilder =>
  clip()
    .labels({ "media-orchestrator.io/pipeline": "p", [STEP_LABEL]: "1" })
    .annotations({
      "media-orchestrator.io/pipeline-name": "p",
      "media-orchestrator.io/pipeline-uid": "uid-p",
    });

const COMPLETED_EVENT: PlannedEvent = ["Normal", "Completed", "completed at the provider as p-1, attempt 1"];

interface Row {
  name: string;
  job: MediaJobBuilder;
  /** The pass's outcome; nextStepCached false and failed false unless given. */
  o?: {
    requeueAfterMs?: number;
    nextStepCached?: boolean;
    failed?: boolean;
    metering?: boolean;
    usageSettleWaitMs?: number;
  };
  want: Finish;
}

const rows: Row[] = [
  {
    name: "a Completed job with our finalizer: let go, told Normal Completed",
    job: clip().finalizers(FINALIZER).status(ended("Completed")),
    want: { actions: [{ type: "releaseFinalizer", endEvent: COMPLETED_EVENT }] },
  },
  {
    name: "a Failed job with our finalizer: let go, told Warning Failed with its error",
    job: clip().finalizers(FINALIZER).status(ended("Failed")),
    want: {
      actions: [
        { type: "releaseFinalizer", endEvent: ["Warning", "Failed", "Failed: FAILED: out of memory"] },
      ],
    },
  },
  {
    name: "a Cancelled job with our finalizer: let go, told Normal Cancelled (the end asked for)",
    job: clip().finalizers(FINALIZER).status(ended("Cancelled")),
    want: {
      actions: [
        {
          type: "releaseFinalizer",
          endEvent: [
            "Normal",
            "Cancelled",
            "Cancelled: spec.cancel is true: cancelled job p-1 at the provider",
          ],
        },
      ],
    },
  },
  {
    name: "a finished job already let go of: nothing told again",
    job: clip().status(ended("Completed")),
    o: { requeueAfterMs: 30_000 },
    want: { actions: [], requeueAfterMs: 30_000 },
  },
  {
    name: "a running job keeps its finalizer and is looked at again when the pass asked",
    job: clip().finalizers(FINALIZER).status(running(10)),
    o: { requeueAfterMs: 30_000 },
    want: { actions: [], requeueAfterMs: 30_000 },
  },
  {
    name: "a running job with a deadline sooner than the tick: looked at just after the deadline",
    job: clip().finalizers(FINALIZER).spec({ activeDeadlineSeconds: 60 }).status(running(50)),
    o: { requeueAfterMs: 30_000 },
    want: { actions: [], requeueAfterMs: 10_050 },
  },
  {
    name: "a running job with a deadline later than the tick: the tick",
    job: clip().finalizers(FINALIZER).spec({ activeDeadlineSeconds: 600 }).status(running(50)),
    o: { requeueAfterMs: 30_000 },
    want: { actions: [], requeueAfterMs: 30_000 },
  },
  {
    name: "a running job past its deadline: looked at again in 50 ms, not at once in a loop",
    job: clip().finalizers(FINALIZER).spec({ activeDeadlineSeconds: 60 }).status(running(120)),
    o: { requeueAfterMs: 30_000 },
    want: { actions: [], requeueAfterMs: 50 },
  },
  {
    name: "a running job with a deadline and no tick asked: by its deadline",
    job: clip().finalizers(FINALIZER).spec({ activeDeadlineSeconds: 60 }).status(running(20)),
    want: { actions: [], requeueAfterMs: 40_050 },
  },
  {
    name: "a pending job waits for no deadline (it has not started)",
    job: clip().finalizers(FINALIZER).spec({ activeDeadlineSeconds: 60 }).status({ phase: "Pending" }),
    o: { requeueAfterMs: 30_000 },
    want: { actions: [], requeueAfterMs: 30_000 },
  },
  {
    name: "a pass that failed lets go of a finished job but neither looks again nor deletes",
    job: clip().finalizers(FINALIZER).spec({ ttlSecondsAfterFinished: 1 }).status(ended("Completed")),
    o: { requeueAfterMs: 30_000, failed: true },
    want: { actions: [{ type: "releaseFinalizer", endEvent: COMPLETED_EVENT }] },
  },
  {
    name: "metering on, usage in the outbox: USAGE_FINALIZER takes the run's finalizer's place",
    job: clip()
      .finalizers(FINALIZER)
      .status(ended("Completed", { usage: usage("Pending") })),
    o: { metering: true },
    want: { actions: [{ type: "releaseFinalizer", endEvent: COMPLETED_EVENT, keepForUsage: true }] },
  },
  {
    name: "metering on, usage in the outbox, ended 2 s ago: the run's finalizer waits for the report, looked at when the wait ends",
    job: clip()
      .finalizers(FINALIZER)
      .status(ended("Completed", { usage: usage("Pending"), completedAt: ago(2), updatedAt: ago(2) })),
    o: { metering: true },
    want: { actions: [], requeueAfterMs: USAGE_SETTLE_WAIT_MS - 2_000 + 50 },
  },
  {
    name: "metering on, usage in the outbox, ended 2 s ago, no wait configured (0): USAGE_FINALIZER takes the run's finalizer's place",
    job: clip()
      .finalizers(FINALIZER)
      .status(ended("Completed", { usage: usage("Pending"), completedAt: ago(2), updatedAt: ago(2) })),
    o: { metering: true, usageSettleWaitMs: 0 },
    want: { actions: [{ type: "releaseFinalizer", endEvent: COMPLETED_EVENT, keepForUsage: true }] },
  },
  {
    name: "metering on, ended 2 s ago, usage already reported and counted: let go whole (no USAGE_FINALIZER)",
    job: clip()
      .finalizers(FINALIZER)
      .status(ended("Completed", { usage: usage("Reported"), completedAt: ago(2), updatedAt: ago(2) })),
    o: { metering: true },
    want: { actions: [{ type: "releaseFinalizer", endEvent: COMPLETED_EVENT }] },
  },
  {
    name: "metering on, usage in the outbox, ended 2 s ago, the pass failed: kept, retried with backoff",
    job: clip()
      .finalizers(FINALIZER)
      .status(ended("Completed", { usage: usage("Pending"), completedAt: ago(2), updatedAt: ago(2) })),
    o: { metering: true, failed: true },
    want: { actions: [] },
  },
  {
    name: "metering off, usage in the outbox: the job is let go of whole",
    job: clip()
      .finalizers(FINALIZER)
      .status(ended("Completed", { usage: usage("Pending") })),
    o: { metering: false },
    want: { actions: [{ type: "releaseFinalizer", endEvent: COMPLETED_EVENT }] },
  },
  {
    name: "a job kept for its usage, now reported and counted: USAGE_FINALIZER goes",
    job: clip()
      .finalizers(USAGE_FINALIZER)
      .status(ended("Completed", { usage: usage("Reported") })),
    o: { metering: true },
    want: { actions: [{ type: "releaseUsageFinalizer" }] },
  },
  {
    name: "a job kept for its usage, still in the outbox: kept",
    job: clip()
      .finalizers(USAGE_FINALIZER)
      .status(ended("Completed", { usage: usage("Pending") })),
    o: { metering: true },
    want: { actions: [] },
  },
  {
    name: "a job kept for its usage once metering is turned off: let go",
    job: clip()
      .finalizers(USAGE_FINALIZER)
      .status(ended("Completed", { usage: usage("Pending") })),
    o: { metering: false },
    want: { actions: [{ type: "releaseUsageFinalizer" }] },
  },
  {
    name: "the last step of a pipeline completed: the first job is told PipelineSucceeded True, then let go",
    job: secondStep().finalizers(FINALIZER).status(ended("Completed")),
    want: {
      actions: [
        {
          type: "reportToPipeline",
          first: "p",
          uid: "uid-p",
          condition: {
            type: "PipelineSucceeded",
            status: "True",
            reason: "PipelineCompleted",
            message: "all 2 steps completed; the last: clip",
          },
        },
        { type: "releaseFinalizer", endEvent: COMPLETED_EVENT },
      ],
    },
  },
  {
    name: "a later step that failed: the first job is told PipelineSucceeded False, then let go",
    job: secondStep().finalizers(FINALIZER).status(ended("Failed")),
    want: {
      actions: [
        {
          type: "reportToPipeline",
          first: "p",
          uid: "uid-p",
          condition: {
            type: "PipelineSucceeded",
            status: "False",
            reason: "StepFailed",
            message: "step 2 (clip) ended Failed: Failed: FAILED: out of memory",
          },
        },
        { type: "releaseFinalizer", endEvent: ["Warning", "Failed", "Failed: FAILED: out of memory"] },
      ],
    },
  },
  {
    name: "a later step that goes on (more steps): only let go, the pipeline not told yet",
    job: secondStep()
      .finalizers(FINALIZER)
      .spec({ then: [{ workload: "tts" }] })
      .status(ended("Completed")),
    want: { actions: [{ type: "releaseFinalizer", endEvent: COMPLETED_EVENT }] },
  },
  {
    name: "a finished job past its TTL: deleted",
    job: clip().spec({ ttlSecondsAfterFinished: 60 }).status(ended("Completed")),
    want: { actions: [{ type: "deleteExpired" }] },
  },
  {
    name: "a finished job past its TTL with a recorded next step: deleted unless the step exists",
    job: clip()
      .spec({ ttlSecondsAfterFinished: 60, then: [{ workload: "tts" }] })
      .status(ended("Completed", { nextJob: "clip-1-tts" })),
    want: { actions: [{ type: "deleteExpired", unlessStepExists: "clip-1-tts" }] },
  },
  {
    name: "a finished job past its TTL whose next step is cached: kept (a pipeline goes from its end)",
    job: clip()
      .spec({ ttlSecondsAfterFinished: 60, then: [{ workload: "tts" }] })
      .status(ended("Completed", { nextJob: "clip-1-tts" })),
    o: { nextStepCached: true, requeueAfterMs: 30_000 },
    want: { actions: [], requeueAfterMs: 30_000 },
  },
  {
    name: "a finished job before its TTL: looked at again just after it",
    job: clip().spec({ ttlSecondsAfterFinished: 180 }).status(ended("Completed")),
    o: { requeueAfterMs: 600_000 },
    want: { actions: [], requeueAfterMs: 60_050 },
  },
  {
    name: "a finished job past its TTL with usage outstanding: kept until it is reported",
    job: clip()
      .spec({ ttlSecondsAfterFinished: 60 })
      .status(ended("Completed", { usage: usage("Pending") })),
    want: { actions: [] },
  },
  {
    name: "the pass that lets go of a job past its TTL also deletes it",
    job: clip().finalizers(FINALIZER).spec({ ttlSecondsAfterFinished: 60 }).status(ended("Failed")),
    want: {
      actions: [
        { type: "releaseFinalizer", endEvent: ["Warning", "Failed", "Failed: FAILED: out of memory"] },
        { type: "deleteExpired" },
      ],
    },
  },
];

describe("planFinish: what follows a pass's status write", () => {
  it.each(rows)("$name", ({ job, o = {}, want }) => {
    const finish = planFinish(job.build(), {
      nowMs: NOW,
      nextStepCached: o.nextStepCached ?? false,
      failed: o.failed ?? false,
      ...(o.requeueAfterMs !== undefined && { requeueAfterMs: o.requeueAfterMs }),
      ...(o.metering !== undefined && { metering: o.metering }),
      ...(o.usageSettleWaitMs !== undefined && { usageSettleWaitMs: o.usageSettleWaitMs }),
    });
    expect(finish).toEqual(want);
  });
});
