// The MediaJob reconciler driven through every branch of its plan without a control plane: a cache,
// scripted Kubernetes writes and a scripted provider, each failing on any call its case does not
// list (test/unit/support/mediajob-fakes.ts). What only a real apiserver shows (conflicts between
// writers, watches, leases) stays in test/controller.
import { describe, expect, it } from "vitest";
import {
  makeBillingAccount,
  makeGpuEndpoint,
  makeMediaJob,
  meteredStatus,
  submittedStatus,
} from "../support/builders.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import type { BillingAccount, SubscriptionStatus } from "../../src/crds/billingaccount.js";
import { withPhaseConditions } from "../../src/mediajob/conditions.js";
import { AccountJobs } from "../../src/controller/account-jobs.js";
import { Dispatcher } from "../../src/controller/dispatch/dispatcher.js";
import { FINALIZER } from "../../src/mediajob/job.js";
import { SKIP_USAGE_REPORT_ANNOTATION } from "../../src/mediajob/deletion.js";
import { DEFAULT_USAGE_SETTINGS } from "../../src/mediajob/usage.js";
import type { SlotFact } from "../../src/mediajob/queued.js";
import {
  harness,
  kubeError,
  providerError,
  stored,
  type Expect,
  type World,
} from "./support/mediajob-fakes.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();

function job(
  o: { spec?: Partial<MediaJob["spec"]>; status?: MediaJobStatus; meta?: Partial<MediaJob["metadata"]> } = {},
): MediaJob {
  return makeMediaJob("clip")
    .ns("ns")
    .uid("uid-1")
    .resourceVersion("1")
    .generation(1)
    .meta(o.meta ?? {})
    .input({ url: "s3://in" })
    .spec(o.spec ?? {})
    .status(o.status)
    .build();
}

const endpoint: GpuEndpoint = makeGpuEndpoint("asr").ns("ns").ready("ep-1", ago(60)).build();

const account = (state: string): BillingAccount =>
  makeBillingAccount("acme")
    .ns("ns")
    .subscription(state as SubscriptionStatus)
    .build();

const withFinalizer = { finalizers: [FINALIZER] };
/** A status as a pass leaves it: its conditions follow its phase (a first pass would write them). */
const processing = (extra: Partial<MediaJobStatus> = {}): MediaJobStatus =>
  withPhaseConditions(submittedStatus(ago(60), { updatedAt: ago(60), ...extra }), 1, ago(60));

/** A status write whose written phase (and more) the case checks. */
const writes = (check: (s: MediaJobStatus, obj: MediaJob) => void, rv = "2"): Expect => ({
  call: "replaceStatus",
  check: (_plural: string, obj: MediaJob) => check(obj.status!, obj),
  answer: (_plural: string, obj: MediaJob) => stored(rv)(obj),
});
const releases: Expect = {
  call: "mergePatch",
  check: (_p: string, _ns: string, _n: string, patch: { metadata: { finalizers: string[] } }) =>
    expect(patch.metadata.finalizers).not.toContain(FINALIZER),
};
const cond = (s: MediaJobStatus, type: string) => s.conditions?.find((c) => c.type === type);

interface Case {
  name: string;
  world: Omit<World, "now">;
  /** The pass's result, or the error it throws. */
  result?: { requeueAfterMs: number } | undefined;
  throws?: RegExp;
  /** The pass ends on a terminal error: the runtime does not retry it. */
  terminal?: true;
  events: string[];
  submissions?: string[];
  recoveries?: string[];
}

const cases: Case[] = [
  {
    name: "Pending, ready: the finalizer, the intent, /run, the provider's id (the write-ahead submission)",
    world: {
      jobs: [job()],
      endpoints: [endpoint],
      kube: [
        {
          call: "mergePatch",
          check: (_p: string, _ns: string, _n: string, patch: { metadata: { finalizers: string[] } }) =>
            expect(patch.metadata.finalizers).toEqual([FINALIZER]),
          answer: () => ({ metadata: { finalizers: [FINALIZER], resourceVersion: "2" } }),
        },
        writes((s, obj) => {
          expect(obj.metadata.resourceVersion).toBe("2"); // written with what the patch returned
          expect(s.phase).toBe("Processing");
          expect(s.submission?.state).toBe("Sending");
          expect(cond(s, "Submitted")?.reason).toBe("Submitting");
        }, "3"),
        writes((s) => {
          expect(s.providerJobId).toBe("p-9");
          expect(s.submission?.state).toBe("Accepted");
          expect(cond(s, "Submitted")?.status).toBe("True");
        }, "4"),
      ],
      provider: [
        {
          call: "submit",
          check: (ep: string, req: { id: string; webhook: string; policy: { ttl: number } }) => {
            expect(ep).toBe("ep-1");
            // The job's own key (its uid here: no spec.id) inside its namespace-and-uid scope.
            expect(req.id).toMatch(/^[0-9a-f]{32}\.uid-1$/);
            expect(req.webhook).toMatch(/^https:\/\/hooks\.example\.test\//);
            // No execution timeout is known (none sent, the endpoint's not reported): the run may
            // take the provider's longest, so the ttl is its 7 days.
            expect(req.policy.ttl).toBe(7 * 24 * 3600 * 1000);
          },
          answer: () => ({ id: "p-9", status: "IN_QUEUE" }),
        },
      ],
    },
    result: { requeueAfterMs: 600_000 },
    events: ["Normal Submitted"],
    submissions: ["accepted"],
  },
  {
    name: "Pending, suspended: held, told once, never submitted",
    world: {
      jobs: [job({ spec: { suspend: true } })],
      endpoints: [endpoint],
      kube: [writes((s) => expect(cond(s, "Suspended")?.status).toBe("True"))],
    },
    result: undefined,
    events: ["Normal Suspended"],
  },
  {
    name: "Pending, account not active: waits, with a Warning",
    world: {
      jobs: [job({ spec: { account: "acme" } })],
      accounts: [account("past_due")],
      endpoints: [endpoint],
      kube: [writes((s) => expect(cond(s, "Admitted")?.reason).toBe("AccountNotActive"))],
    },
    result: { requeueAfterMs: 30_000 },
    events: ["Warning AccountNotActive"],
  },
  {
    name: "Pending, no endpoint for the workload: waits, with a Warning",
    world: {
      jobs: [job()],
      kube: [writes((s) => expect(cond(s, "EndpointReady")?.reason).toBe("EndpointMissing"))],
    },
    result: { requeueAfterMs: 30_000 },
    events: ["Warning EndpointMissing"],
  },
  {
    name: "Pending, past its deadline: Failed (DeadlineExceeded), not submitted again",
    world: {
      jobs: [
        job({
          spec: { activeDeadlineSeconds: 10 },
          status: { phase: "Pending", jobId: "uid-1", startedAt: ago(60) },
        }),
      ],
      kube: [writes((s) => expect(s.error).toMatch(/^DeadlineExceeded:/))],
    },
    result: undefined,
    events: ["Warning DeadlineExceeded"],
  },
  {
    name: "Pending, not the leader: no intent, no /run; retried",
    world: {
      jobs: [job({ meta: withFinalizer })],
      endpoints: [endpoint],
      leader: false,
      kube: [writes((s) => expect(s.phase).toBe("Pending"))],
    },
    throws: /not the leader: no submission/,
    events: [],
    submissions: ["fenced"],
  },
  {
    name: "Pending, the intent loses a conflict: nothing sent, looked at again from the newer version",
    world: {
      jobs: [job({ meta: withFinalizer })],
      endpoints: [endpoint],
      kube: [{ call: "replaceStatus", answer: () => Promise.reject(kubeError(409)) }],
    },
    result: { requeueAfterMs: 1_000 },
    events: [],
    submissions: ["intent-conflict"],
  },
  {
    name: "Pending, leadership lost between the intent and /run: the intent withdrawn, nothing sent",
    world: {
      jobs: [job({ meta: withFinalizer })],
      endpoints: [endpoint],
      leader: (
        (n = 0) =>
        () =>
          n++ === 0
      )(),
      kube: [
        writes((s) => expect(s.phase).toBe("Processing")),
        writes((s) => expect(s.phase).toBe("Pending"), "3"),
      ],
    },
    throws: /lost the leadership before submitting/,
    events: [],
    submissions: ["fenced"],
  },
  {
    name: "Pending, /run refused: the intent withdrawn with why; retried with backoff",
    world: {
      jobs: [job({ meta: withFinalizer })],
      endpoints: [endpoint],
      kube: [
        writes((s) => expect(s.phase).toBe("Processing")),
        writes((s) => {
          expect(s.phase).toBe("Pending");
          expect(s.attempts).toBe(0);
          expect(cond(s, "Submitted")?.reason).toBe("BAD_REQUEST");
        }, "3"),
      ],
      provider: [{ call: "submit", answer: () => Promise.reject(providerError("BAD_REQUEST")) }],
    },
    throws: /submission to endpoint ep-1 failed/,
    events: ["Warning BAD_REQUEST"],
    submissions: ["refused"],
  },
  {
    name: "Pending, /run answer lost: Unconfirmed, never resubmitted before its confirmation deadline",
    world: {
      jobs: [job({ meta: withFinalizer })],
      endpoints: [endpoint],
      kube: [
        writes((s) => expect(s.phase).toBe("Processing")),
        writes((s) => {
          expect(s.submission?.state).toBe("Unconfirmed");
          expect(cond(s, "Submitted")?.reason).toBe("SubmissionUnconfirmed");
        }, "3"),
      ],
      provider: [
        { call: "submit", answer: () => Promise.reject(providerError("PROVIDER_UNAVAILABLE", true)) },
      ],
    },
    result: { requeueAfterMs: 660_000 },
    events: ["Warning SubmissionUnconfirmed"],
    submissions: ["unconfirmed"],
  },
  {
    name: "Pending, accepted but the id's record fails: not resubmitted, the record retried next pass",
    world: {
      jobs: [job({ meta: withFinalizer })],
      endpoints: [endpoint],
      kube: [
        writes((s) => expect(s.phase).toBe("Processing")),
        { call: "replaceStatus", answer: () => Promise.reject(kubeError(500)) },
      ],
      provider: [{ call: "submit", answer: () => ({ id: "p-9", status: "IN_QUEUE" }) }],
    },
    result: { requeueAfterMs: 1_000 },
    events: ["Normal Submitted"],
    submissions: ["accepted"],
  },
  {
    name: "Processing, before its timeout: nothing to do until then",
    world: { jobs: [job({ meta: withFinalizer, status: processing() })] },
    result: { requeueAfterMs: 540_000 },
    events: [],
  },
  {
    name: "Processing, past its timeout, the provider completed it: the missed callback recovered",
    world: {
      jobs: [job({ meta: withFinalizer, status: processing({ submittedAt: ago(700) }) })],
      kube: [writes((s) => expect(s.phase).toBe("Completed")), releases],
      provider: [
        {
          call: "status",
          check: (ep: string, id: string) => expect([ep, id]).toEqual(["ep-1", "p-1"]),
          answer: () => ({ id: "p-1", status: "COMPLETED", output: { text: "hi" } }),
        },
      ],
    },
    result: undefined,
    events: ["Normal RecoveredMissedCallback", "Normal Completed"],
    recoveries: ["missed_callback"],
  },
  {
    name: "Processing, past its timeout, still running: Overdue, told once",
    world: {
      jobs: [job({ meta: withFinalizer, status: processing({ submittedAt: ago(700) }) })],
      kube: [writes((s) => expect(cond(s, "Overdue")?.status).toBe("True"))],
      provider: [{ call: "status", answer: () => ({ id: "p-1", status: "IN_PROGRESS" }) }],
    },
    result: { requeueAfterMs: 30_000 },
    events: ["Normal StillRunning"],
  },
  {
    name: "Processing, the provider lost the job: reset to Pending and replayed",
    world: {
      jobs: [job({ meta: withFinalizer, status: processing({ submittedAt: ago(700) }) })],
      kube: [writes((s) => expect([s.phase, s.replay, s.providerLosses]).toEqual(["Pending", true, 1]))],
      provider: [{ call: "status", answer: () => Promise.reject(providerError("JOB_NOT_FOUND")) }],
    },
    result: undefined,
    events: ["Warning ProviderLostJob"],
    recoveries: ["provider_lost_job"],
  },
  {
    name: "Processing, the status read fails: retried with backoff, nothing written",
    world: {
      jobs: [job({ meta: withFinalizer, status: processing({ submittedAt: ago(700) }) })],
      provider: [{ call: "status", answer: () => Promise.reject(providerError("PROVIDER_UNAVAILABLE")) }],
    },
    throws: /could not read the job's status/,
    events: ["Warning StatusCheckFailed"],
  },
  {
    name: "Processing, past spec.activeDeadlineSeconds: cancelled at the provider, Failed",
    world: {
      jobs: [job({ meta: withFinalizer, spec: { activeDeadlineSeconds: 30 }, status: processing() })],
      kube: [
        writes((s) => {
          expect([s.phase, s.error?.split(":")[0]]).toEqual(["Failed", "DeadlineExceeded"]);
          // The attempt's usage, from the job's own status read after the cancel.
          expect(s.usage?.attempts).toEqual([
            expect.objectContaining({ providerStatus: "CANCELLED", executionTimeMs: 29_000 }),
          ]);
        }),
        releases,
      ],
      provider: [
        { call: "cancel", answer: () => ({ id: "p-1", status: "CANCELLED" }) },
        {
          call: "status",
          answer: () => ({ id: "p-1", status: "CANCELLED", executionTime: 29_000, delayTime: 1_000 }),
        },
      ],
    },
    result: undefined,
    events: ["Warning DeadlineExceeded", "Warning Failed"],
  },
  {
    name: "Processing, suspended: cancelled at the provider, Pending until resumed",
    world: {
      jobs: [job({ meta: withFinalizer, spec: { suspend: true }, status: processing() })],
      kube: [
        writes((s) =>
          expect([s.phase, s.suspensions, cond(s, "Suspended")?.status]).toEqual(["Pending", 1, "True"]),
        ),
      ],
      provider: [
        { call: "cancel", answer: () => ({ id: "p-1", status: "CANCELLED" }) },
        { call: "status", answer: () => ({ id: "p-1", status: "CANCELLED", executionTime: 5_000 }) },
      ],
    },
    result: undefined,
    events: ["Normal Suspended"],
  },
  {
    name: "Processing, suspended, the cancel fails: retried (a suspension must reach the provider)",
    world: {
      jobs: [job({ meta: withFinalizer, spec: { suspend: true }, status: processing() })],
      provider: [{ call: "cancel", answer: () => Promise.reject(providerError("PROVIDER_UNAVAILABLE")) }],
    },
    throws: /could not cancel job p-1/,
    events: ["Warning CancelFailed"],
  },
  {
    name: "Processing, unconfirmed, within its confirmation window: waits for its callback",
    world: {
      jobs: [
        job({
          meta: withFinalizer,
          status: processing({
            providerJobId: undefined,
            submission: { attempt: 1, id: "s-1", startedAt: ago(60), state: "Unconfirmed" },
          }),
        }),
      ],
    },
    result: { requeueAfterMs: 600_000 },
    events: [],
  },
  {
    name: "Processing, unconfirmed past its confirmation deadline (policy fail): Failed, never resubmitted",
    world: {
      jobs: [
        job({
          meta: withFinalizer,
          status: processing({
            providerJobId: undefined,
            submission: { attempt: 1, id: "s-1", startedAt: ago(700), state: "Unconfirmed" },
          }),
        }),
      ],
      kube: [
        writes((s) =>
          expect([s.phase, cond(s, "Submitted")?.reason]).toEqual(["Failed", "SubmissionUnconfirmed"]),
        ),
        releases,
      ],
    },
    result: undefined,
    events: ["Warning SubmissionUnconfirmed", "Warning Failed"],
    submissions: ["unconfirmed-failed"],
  },
  {
    name: "Completed with a next step: created once, recorded, then the job is let go of",
    world: {
      jobs: [
        job({
          meta: withFinalizer,
          spec: { then: [{ workload: "tts" }] as MediaJob["spec"]["then"] },
          status: processing({ phase: "Completed", completedAt: ago(1), output: { text: "hi" } }),
        }),
      ],
      kube: [
        {
          call: "create",
          check: (_p: string, _ns: string, obj: MediaJob) => {
            expect(obj.metadata.name).toBe("clip-1-tts");
            expect(obj.metadata.ownerReferences?.[0]?.uid).toBe("uid-1");
          },
        },
        writes((s) => expect(s.nextJob).toBe("clip-1-tts")),
        releases,
      ],
    },
    result: undefined,
    events: ["Normal NextStepCreated", "Normal Completed"],
  },
  {
    name: "Completed, the next step's name taken by another object: a terminal error, not retried",
    world: {
      jobs: [
        job({
          spec: { then: [{ workload: "tts" }] as MediaJob["spec"]["then"] },
          status: processing({ phase: "Completed", completedAt: ago(1) }),
        }),
      ],
      kube: [
        { call: "create", answer: () => Promise.reject(kubeError(409, "AlreadyExists")) },
        { call: "get", answer: () => job({ meta: { name: "clip-1-tts", uid: "someone-else" } }) },
        writes((s) => expect(cond(s, "NextStepCreated")?.reason).toBe("NextStepNameTaken")),
      ],
    },
    terminal: true,
    result: undefined,
    events: ["Warning NextStepNameTaken"],
  },
  {
    name: "Finished past spec.ttlSecondsAfterFinished: deleted (this very object)",
    world: {
      jobs: [
        job({
          spec: { ttlSecondsAfterFinished: 60 },
          status: { ...processing({ phase: "Failed", completedAt: ago(120) }) },
        }),
      ],
      kube: [
        {
          call: "rawJson",
          check: (method: string, _path: string, body: { preconditions: { uid: string } }) =>
            expect([method, body.preconditions.uid]).toEqual(["DELETE", "uid-1"]),
        },
      ],
    },
    result: undefined,
    events: [],
  },
  {
    name: "Deleted while Processing: cancelled at the provider, its final status recorded, then the finalizer goes",
    world: {
      jobs: [job({ meta: { ...withFinalizer, deletionTimestamp: ago(1) }, status: processing() })],
      kube: [writes((s) => expect(s).toMatchObject({ phase: "Cancelled" })), releases],
      provider: [
        { call: "cancel", answer: () => ({ id: "p-1", status: "CANCELLED" }) },
        { call: "status", answer: () => ({ id: "p-1", status: "CANCELLED" }) },
      ],
    },
    result: undefined,
    events: ["Normal CancelledAtProvider"],
  },
  {
    name: "Deleted while unconfirmed: waits a while for the provider's id before letting go",
    world: {
      jobs: [
        job({
          meta: { ...withFinalizer, deletionTimestamp: ago(10) },
          status: processing({
            providerJobId: undefined,
            submission: { attempt: 1, id: "s-1", startedAt: ago(60), state: "Unconfirmed" },
          }),
        }),
      ],
    },
    result: { requeueAfterMs: 50_000 },
    events: [],
  },
  {
    name: "Deleted, the provider fails the cancel: kept, retried (before giving up)",
    world: {
      jobs: [job({ meta: { ...withFinalizer, deletionTimestamp: ago(10) }, status: processing() })],
      provider: [{ call: "cancel", answer: () => Promise.reject(providerError("PROVIDER_UNAVAILABLE")) }],
    },
    throws: /PROVIDER_UNAVAILABLE/,
    events: ["Warning CancelFailed"],
  },
  {
    name: "Deleted, the provider has failed the cancel past the give-up time: let go of",
    world: {
      jobs: [job({ meta: { ...withFinalizer, deletionTimestamp: ago(600) }, status: processing() })],
      kube: [releases],
      provider: [{ call: "cancel", answer: () => Promise.reject(providerError("PROVIDER_UNAVAILABLE")) }],
    },
    result: undefined,
    // The run may go on at the provider, and the job bills no account: told as unbilled.
    events: ["Warning CancelAbandoned", "Warning RunLeftAtProvider"],
  },
  {
    name: "Deleted with an account, the cancel given up: the run is recorded on the account before the job goes",
    world: {
      jobs: [
        job({
          meta: { ...withFinalizer, deletionTimestamp: ago(600) },
          spec: { account: "acme" },
          status: processing(),
        }),
      ],
      kube: [
        {
          call: "recordOrphan",
          check: (o: { account: string; providerJobId: string }) =>
            expect(o).toMatchObject({ account: "acme", providerJobId: "p-1" }),
          answer: () => Promise.resolve("added"),
        },
        releases,
      ],
      provider: [{ call: "cancel", answer: () => Promise.reject(providerError("PROVIDER_UNAVAILABLE")) }],
    },
    result: undefined,
    events: ["Warning CancelAbandoned", "Warning RunLeftAtProvider"],
  },
];

describe("MediaJob reconciler, without a control plane", () => {
  it.each(cases)("$name", async (c) => {
    const h = harness({ ...c.world, now: NOW });
    // A retryable error, returned or thrown, is retried by the runtime; a terminal one is not.
    const run = h.reconciler.pass("ns/clip").catch((err: unknown) => ({ thrown: err as Error }));
    const answer = await run;
    if ("thrown" in answer) expect(answer.thrown.message).toMatch(c.throws ?? /no error/);
    else if (c.throws) {
      expect(answer.error?.terminal).toBe(false);
      expect(answer.error?.message).toMatch(c.throws);
    } else {
      expect(answer.result).toEqual(c.result);
      expect(answer.error?.terminal).toBe(c.terminal);
    }
    h.done();
    expect(h.events.map(([t, r]) => `${t} ${r}`)).toEqual(c.events);
    expect(h.submissions).toEqual(c.submissions ?? []);
    expect(h.recoveries).toEqual(c.recoveries ?? []);
  });

  it("a retryable error is returned for the runtime to retry, not thrown", async () => {
    const h = harness({
      now: NOW,
      jobs: [job({ meta: withFinalizer, status: processing({ submittedAt: ago(700) }) })],
      provider: [{ call: "status", answer: () => Promise.reject(providerError("PROVIDER_UNAVAILABLE")) }],
    });
    const { error } = await h.reconciler.pass("ns/clip");
    expect(error).toMatchObject({ terminal: false, message: expect.stringMatching(/PROVIDER_UNAVAILABLE/) });
  });

  it("with an in-flight window: an accepted submission keeps its slot until the cache shows it; a queued job waits", async () => {
    const dispatcher = new Dispatcher({ wake: () => undefined, jobSeconds: 30, tickSeconds: 2 });
    dispatcher.lead();
    const windowOfOne = { ...endpoint, spec: { ...endpoint.spec, maxInFlight: 1 } } as GpuEndpoint;
    const first = job({ meta: withFinalizer });
    const h = harness({
      now: NOW,
      jobs: [first, job({ meta: { name: "second", uid: "uid-2", ...withFinalizer } })],
      endpoints: [windowOfOne],
      dispatcher,
      kube: [
        writes((s) => expect(s.phase).toBe("Processing"), "3"),
        writes((s) => expect(s.providerJobId).toBe("p-9"), "4"),
        // The second job: no slot, Queued (its one write).
        writes((s) => {
          expect(s.phase).toBe("Pending");
          expect(cond(s, "Queued")).toMatchObject({ status: "True", reason: "WindowFull" });
        }),
      ],
      provider: [{ call: "submit", answer: () => ({ id: "p-9", status: "IN_QUEUE" }) }],
    });
    await h.reconciler.pass("ns/clip");
    // The intent's watch event has not come yet: the slot is still the first job's.
    await h.reconciler.pass("ns/second");
    h.done();
    expect(dispatcher.view("ep-1")).toMatchObject({ window: 1, waiting: { "": 1 } });
  });

  it("the pass reads the window while it gathers and takes its slot after its plan", async () => {
    const taken: string[] = [];
    const dispatcher = new (class extends Dispatcher {
      override wouldGrant(j: MediaJob, ep: GpuEndpoint): SlotFact {
        taken.push(`read ${this.view("ep-1").waiting[""] ?? 0} waiting`);
        return super.wouldGrant(j, ep);
      }
      override gate(j: MediaJob, ep: GpuEndpoint): SlotFact {
        taken.push("take");
        return super.gate(j, ep);
      }
    })({ wake: () => undefined, jobSeconds: 30, tickSeconds: 2 });
    dispatcher.lead();
    const windowOfNone = { ...endpoint, spec: { ...endpoint.spec, maxInFlight: 0 } } as GpuEndpoint;
    const h = harness({
      now: NOW,
      jobs: [job({ meta: withFinalizer })],
      endpoints: [windowOfNone],
      dispatcher,
      kube: [
        writes((s) => expect(cond(s, "Queued")).toMatchObject({ status: "True", reason: "NoCapacity" })),
      ],
    });
    await h.reconciler.pass("ns/clip");
    h.done();
    // The read found no job waiting (it queued nothing); the take queued the job, which waits to be woken.
    expect(taken).toEqual(["read 0 waiting", "take"]);
    expect(dispatcher.view("ep-1").waiting).toEqual({ "": 1 });
  });

  it("a take that answers otherwise than the read the plan used submits nothing and is requeued", async () => {
    /** A dispatcher whose read-only answer is `read` while it is set, whatever gate() answers then. */
    class Misread extends Dispatcher {
      read: SlotFact | undefined;
      override wouldGrant(j: MediaJob, ep: GpuEndpoint): SlotFact {
        return this.read ?? super.wouldGrant(j, ep);
      }
    }
    const windowOfOne = { ...endpoint, spec: { ...endpoint.spec, maxInFlight: 1 } } as GpuEndpoint;
    const full = new Misread({ wake: () => undefined, jobSeconds: 30, tickSeconds: 2 });
    full.lead();
    full.gate(job({ meta: { name: "other", uid: "uid-0" } }), windowOfOne);
    full.read = { granted: true };
    // Read granted, taken WindowFull: no intent, no /run, no status write; the job waits in the queue.
    const h = harness({
      now: NOW,
      jobs: [job({ meta: withFinalizer })],
      endpoints: [windowOfOne],
      dispatcher: full,
    });
    expect(await h.reconciler.pass("ns/clip")).toEqual({ result: { requeueAfterMs: 50 } });
    h.done();
    expect(full.view("ep-1").waiting).toEqual({ "": 1 });

    // Read WindowFull, taken granted: no Queued write; the slot stays the job's and its next pass submits.
    const free = new Misread({ wake: () => undefined, jobSeconds: 30, tickSeconds: 2 });
    free.lead();
    free.read = { granted: false, reason: "WindowFull", message: "full" };
    const h2 = harness({
      now: NOW,
      jobs: [job({ meta: withFinalizer })],
      endpoints: [windowOfOne],
      dispatcher: free,
      kube: [
        writes((s) => expect(s.phase).toBe("Processing"), "3"),
        writes((s) => expect(s.providerJobId).toBe("p-9"), "4"),
      ],
      provider: [{ call: "submit", answer: () => ({ id: "p-9", status: "IN_QUEUE" }) }],
    });
    expect(await h2.reconciler.pass("ns/clip")).toEqual({ result: { requeueAfterMs: 50 } });
    expect(h2.submissions).toEqual([]);
    expect(free.wouldGrant(job({ meta: { name: "other", uid: "uid-0" } }), windowOfOne)).toMatchObject({
      granted: false,
      reason: "WindowFull",
    });
    free.read = undefined;
    await h2.reconciler.pass("ns/clip");
    h2.done();
    expect(h2.submissions).toEqual(["accepted"]);
  });

  it("a Pending job past its deadline takes no place in its endpoint's window queue (the admission chain's order)", async () => {
    // The window request used to skip the deadline check: the failed job was queued behind the
    // full window and stayed counted as waiting there until a watch event removed it.
    const dispatcher = new Dispatcher({ wake: () => undefined, jobSeconds: 30, tickSeconds: 2 });
    dispatcher.lead();
    const windowOfOne = { ...endpoint, spec: { ...endpoint.spec, maxInFlight: 1 } } as GpuEndpoint;
    const late = job({
      meta: { name: "late", uid: "uid-2", ...withFinalizer },
      spec: { activeDeadlineSeconds: 10 },
      status: { phase: "Pending", jobId: "uid-2", attempts: 1, startedAt: ago(60) },
    });
    const h = harness({
      now: NOW,
      jobs: [job({ meta: withFinalizer }), late],
      endpoints: [windowOfOne],
      dispatcher,
      kube: [
        writes((s) => expect(s.phase).toBe("Processing"), "3"),
        writes((s) => expect(s.providerJobId).toBe("p-9"), "4"),
        writes((s) => expect(s.error).toMatch(/^DeadlineExceeded:/)),
        releases,
      ],
      provider: [{ call: "submit", answer: () => ({ id: "p-9", status: "IN_QUEUE" }) }],
    });
    await h.reconciler.pass("ns/clip");
    await h.reconciler.pass("ns/late");
    h.done();
    expect(dispatcher.view("ep-1").waiting).toEqual({});
  });

  it("an intent write that failed may have landed: the account's place stays taken until the job is seen again", async () => {
    const accountJobs = new AccountJobs();
    /** A pass over acme's job (spec as given) whose Kubernetes calls are `kube`. */
    const acmePass = (spec: Partial<MediaJob["spec"]>, kube: Expect[]) =>
      harness({
        now: NOW,
        jobs: [job({ meta: withFinalizer, spec: { account: "acme", ...spec } })],
        endpoints: [endpoint],
        accounts: [account("active")],
        accountJobs,
        kube,
      });
    // A timeout: the apiserver may have stored the intent; if it did, /run may follow from a retry.
    const h = acmePass({}, [{ call: "replaceStatus", answer: () => Promise.reject(kubeError(504)) }]);
    await expect(h.reconciler.pass("ns/clip")).rejects.toThrow(/504/);
    h.done();
    expect(accountJobs.count("acme", "ns/other")).toBe(1);
    // The retried pass decides again: a job now suspended gives its place back.
    const suspended = acmePass({ suspend: true }, [
      writes((s) => expect(cond(s, "Suspended")?.status).toBe("True")),
    ]);
    await suspended.reconciler.pass("ns/clip");
    suspended.done();
    expect(accountJobs.count("acme", "ns/other")).toBe(0);
    accountJobs.reserve("acme", "ns/clip");
    // An intent that lost a conflict did not land: the place goes back.
    const again = acmePass({}, [{ call: "replaceStatus", answer: () => Promise.reject(kubeError(409)) }]);
    expect(await again.reconciler.pass("ns/clip")).toEqual({ result: { requeueAfterMs: 1_000 } });
    again.done();
    expect(accountJobs.count("acme", "ns/other")).toBe(0);
  });

  it("usage dropped on deletion is counted once, when the finalizer goes, however often the pass runs", async () => {
    const skipped = job({
      meta: {
        ...withFinalizer,
        deletionTimestamp: ago(10),
        annotations: { [SKIP_USAGE_REPORT_ANNOTATION]: "true" },
      },
      spec: { account: "cus_1" },
      status: { ...processing(), ...meteredStatus(ago(20)), completedAt: ago(20) },
    });
    // The finalizer's removal meets a conflict (another writer changed the job): the pass is
    // retried, and its Event with it; the seconds are counted by the pass whose removal lands.
    const h = harness({
      now: NOW,
      jobs: [skipped],
      settings: { usage: { ...DEFAULT_USAGE_SETTINGS, metering: true } },
      kube: [{ ...releases, answer: () => Promise.reject(kubeError(409, "Conflict")) }, releases],
    });
    await expect(h.reconciler.pass("ns/clip")).rejects.toThrow(/409/);
    expect(h.dropped).toEqual([]);
    expect(await h.reconciler.pass("ns/clip")).toEqual({});
    h.done();
    expect(h.dropped).toEqual([42]);
  });

  it("a job no longer in the cache: nothing happens", async () => {
    const h = harness({ now: NOW, jobs: [] });
    expect(await h.reconciler.pass("ns/clip")).toEqual({});
    h.done();
  });
});
