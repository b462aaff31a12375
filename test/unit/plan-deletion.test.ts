// planDeletion as a table (KubeRay's rayjob_controller_unit_test.go style): each row a MediaJob
// being deleted and the steps its deletion takes: cancel what may run at the provider (giving up on
// a dead one after a bound), wait for an unconfirmed submission's id, leave a run to its account
// when asked not to cancel, bill recorded usage, wait for the usage report, tell the pipeline, let go.
import { describe, expect, it } from "vitest";
import type { MediaJobStatus, UsageAttempt } from "../../src/crds/mediajob.js";
import {
  CANCEL_GIVE_UP_MS,
  planDeletion,
  SKIP_USAGE_REPORT_ANNOTATION,
  USAGE_WAIT_MS,
  type DeletionPlan,
  type DeletionSettings,
} from "../../src/mediajob/deletion.js";
import { FINALIZER, SKIP_CANCEL_ANNOTATION } from "../../src/mediajob/job.js";
import { STEP_LABEL } from "../../src/mediajob/pipeline.js";
import { DEFAULT_USAGE_SETTINGS } from "../../src/mediajob/usage.js";
import { USAGE_FINALIZER } from "../../src/mediajob/usage-hold.js";
import { type MediaJobBuilder, makeMediaJob, submittedStatus } from "../support/builders.js";

const NOW = Date.parse("2026-01-01T01:00:00.000Z");
const ago = (s: number) => new Date(NOW - s * 1000).toISOString();
const metering: DeletionSettings = { usage: { ...DEFAULT_USAGE_SETTINGS, metering: true } };

/** clip of cus_1, deleted `forSeconds` ago, holding `finalizer`. */
const deleting = (forSeconds: number, finalizer = FINALIZER): MediaJobBuilder =>
  makeMediaJob("clip")
    .ns("ns")
    .uid("uid-1")
    .generation(1)
    .account("cus_1")
    .finalizers(finalizer)
    .deleting(ago(forSeconds));
const running: MediaJobStatus = submittedStatus(ago(300));
/** Submitted, its answer lost: the provider's id is not known yet. */
const { providerJobId: _unknown, ...sent } = running;
const unconfirmed: MediaJobStatus = {
  ...sent,
  submission: { attempt: 1, id: "s-1", startedAt: ago(300), state: "Unconfirmed" },
};
const attempt = (o: Partial<UsageAttempt> = {}): UsageAttempt => ({
  attempt: 1,
  providerJobId: "p-1",
  providerStatus: "COMPLETED",
  executionTimeMs: 4_000,
  endedAt: ago(120),
  billedSeconds: 4,
  meter: "Pending",
  eventName: "gpu_seconds",
  identifier: "mj_uid-1_1",
  counted: true,
  ...o,
});
const completed = (...attempts: UsageAttempt[]): MediaJobStatus => ({
  phase: "Completed",
  jobId: "uid-1",
  attempts: 1,
  providerJobId: "p-1",
  completedAt: ago(120),
  updatedAt: ago(120),
  ...(attempts.length > 0 && {
    usage: {
      workload: "asr",
      account: "cus_1",
      billedSeconds: attempts.reduce((s, a) => s + (a.billedSeconds ?? 0), 0),
      attempts,
    },
  }),
});
const reported = attempt({ meter: "Reported", reportedAt: ago(100), countedReported: true });
const REMOVE = { type: "removeFinalizer" } as const;

interface Row {
  name: string;
  job: MediaJobBuilder;
  settings?: DeletionSettings;
  want: DeletionPlan;
}

const rows: Row[] = [
  {
    name: "no finalizer of ours: nothing to do",
    job: deleting(10, "example.com/archive").status(running),
    want: { steps: [] },
  },
  {
    name: "a job never submitted: let go",
    job: deleting(10).status({ phase: "Pending", jobId: "uid-1" }),
    want: { steps: [REMOVE] },
  },
  {
    name: "a job with no status yet: let go",
    job: deleting(10),
    want: { steps: [REMOVE] },
  },
  {
    name: "a running job: cancelled at the provider, then let go",
    job: deleting(10).status(running),
    want: { steps: [{ type: "cancel", endpointId: "ep-1", providerJobId: "p-1", giveUp: false }, REMOVE] },
  },
  {
    name: "a running job whose provider fails past the bound: the cancel may give up",
    job: deleting(CANCEL_GIVE_UP_MS / 1000).status(running),
    want: { steps: [{ type: "cancel", endpointId: "ep-1", providerJobId: "p-1", giveUp: true }, REMOVE] },
  },
  {
    name: "a running job under a shorter give-up bound (DELETE_CANCEL_TIMEOUT_SECONDS)",
    job: deleting(10).status(running),
    settings: { cancelGiveUpMs: 5_000 },
    want: { steps: [{ type: "cancel", endpointId: "ep-1", providerJobId: "p-1", giveUp: true }, REMOVE] },
  },
  {
    name: "an unconfirmed submission: waits for its provider id (it may come with the callback)",
    job: deleting(10).status(unconfirmed),
    want: { steps: [], requeueAfterMs: 50_000 },
  },
  {
    name: "an unconfirmed submission at the end of the wait: looked at again in a second, not at once",
    job: deleting(59.5).status(unconfirmed),
    want: { steps: [], requeueAfterMs: 1_000 },
  },
  {
    name: "an unconfirmed submission past the wait: let go, told it could not be cancelled",
    job: deleting(61).status(unconfirmed),
    want: {
      steps: [
        {
          type: "event",
          event: [
            "Warning",
            "CancelSkipped",
            "the provider's id of this job never became known, so it could not be cancelled there",
          ],
        },
        REMOVE,
      ],
    },
  },
  {
    name: "skip-provider-cancel: the run is left to its account's record, then let go",
    job: deleting(10)
      .annotations({ [SKIP_CANCEL_ANNOTATION]: "true" })
      .status(running),
    want: {
      steps: [
        {
          type: "leaveRunning",
          orphan: {
            uid: "uid-1",
            namespace: "ns",
            name: "clip",
            workload: "asr",
            account: "cus_1",
            endpointId: "ep-1",
            providerJobId: "p-1",
            attempt: 1,
            deletedAt: ago(10),
          },
        },
        REMOVE,
      ],
    },
  },
  {
    name: "skip-provider-cancel on a job that bills no account: left running unbilled",
    job: deleting(10)
      .account(undefined)
      .annotations({ [SKIP_CANCEL_ANNOTATION]: "true" })
      .status(running),
    want: { steps: [{ type: "leaveRunning" }, REMOVE] },
  },
  {
    name: "a finished job with recorded usage not billed yet: billed (metering off), then let go",
    job: deleting(10).status(
      completed(attempt({ billedSeconds: undefined, meter: undefined, counted: undefined })),
    ),
    want: {
      steps: [
        {
          type: "billUsage",
          status: expect.objectContaining({
            usage: expect.objectContaining({
              billedSeconds: 4,
              attempts: [expect.objectContaining({ billedSeconds: 4, meter: "NotMetered" })],
            }),
          }),
        },
        REMOVE,
      ],
    },
  },
  {
    name: "metering on, the usage report outstanding: waits, told once at the start",
    job: deleting(1, USAGE_FINALIZER).status(completed(attempt())),
    settings: metering,
    want: {
      steps: [
        {
          type: "event",
          event: [
            "Normal",
            "DeletionWaitsForUsage",
            expect.stringContaining("4 GPU seconds unreported, 0 uncounted"),
          ],
        },
      ],
      requeueAfterMs: USAGE_WAIT_MS - 1_000,
    },
  },
  {
    name: "metering on, still outstanding later in the wait: waits, told nothing more",
    job: deleting(600, USAGE_FINALIZER).status(completed(attempt())),
    settings: metering,
    want: { steps: [], requeueAfterMs: USAGE_WAIT_MS - 600_000 },
  },
  {
    name: "metering on, past the wait: let go, the seconds lost told in a Warning",
    job: deleting(USAGE_WAIT_MS / 1000, USAGE_FINALIZER).status(completed(attempt())),
    settings: metering,
    want: {
      steps: [
        {
          type: "event",
          event: [
            "Warning",
            "UsageUnreportedOnDeletion",
            expect.stringContaining("(meter identifiers mj_uid-1_1)"),
          ],
          droppedSeconds: 4,
        },
        REMOVE,
      ],
    },
  },
  {
    name: "metering on, annotated skip-usage-report: let go at once, the seconds lost told",
    job: deleting(1, USAGE_FINALIZER)
      .annotations({ [SKIP_USAGE_REPORT_ANNOTATION]: "true" })
      .status(completed(attempt())),
    settings: metering,
    want: {
      steps: [
        {
          type: "event",
          event: [
            "Warning",
            "UsageUnreportedOnDeletion",
            expect.stringContaining(
              `as ${SKIP_USAGE_REPORT_ANNOTATION} asks with 4 GPU seconds not reported`,
            ),
          ],
          droppedSeconds: 4,
        },
        REMOVE,
      ],
    },
  },
  {
    name: "metering on, the usage reported and counted: let go",
    job: deleting(1, USAGE_FINALIZER).status(completed(reported)),
    settings: metering,
    want: { steps: [REMOVE] },
  },
  {
    name: "a usage wait of 0: never waits",
    job: deleting(1, USAGE_FINALIZER).status(completed(attempt())),
    settings: { ...metering, usageWaitMs: 0 },
    want: {
      steps: [
        {
          type: "event",
          event: ["Warning", "UsageUnreportedOnDeletion", expect.stringContaining("after waiting 0 s")],
          droppedSeconds: 4,
        },
        REMOVE,
      ],
    },
  },
  {
    name: "a later step deleted while it ran: the pipeline is told it stops there, after the cancel",
    job: deleting(10)
      .labels({ "media-orchestrator.io/pipeline": "p", [STEP_LABEL]: "1" })
      .annotations({
        "media-orchestrator.io/pipeline-name": "p",
        "media-orchestrator.io/pipeline-uid": "uid-p",
      })
      .status(running),
    want: {
      steps: [
        { type: "cancel", endpointId: "ep-1", providerJobId: "p-1", giveUp: false },
        {
          type: "reportToPipeline",
          first: "p",
          uid: "uid-p",
          condition: {
            type: "PipelineSucceeded",
            status: "False",
            reason: "StepDeleted",
            message: "step 2 (clip) was deleted while Processing: the pipeline stops there",
          },
        },
        REMOVE,
      ],
    },
  },
  {
    name: "the first job of a pipeline deleted: no pipeline to tell",
    job: deleting(10)
      .spec({ then: [{ workload: "tts" }] })
      .status(completed()),
    want: { steps: [REMOVE] },
  },
];

describe("planDeletion: the steps of a MediaJob's deletion", () => {
  it.each(rows)("$name", ({ job, settings, want }) => {
    expect(planDeletion(job.build(), NOW, settings)).toEqual(want);
  });
});
