// The MediaJob state machine's plan, as a table: (job, facts) -> (phase, actions, Events, requeue,
// error). Pure: no fakes needed; the reconciler suite (mediajob-reconciler.test.ts) checks that the
// executor carries these out.
import { describe, expect, it } from "vitest";
import { makeGpuEndpoint, makeMediaJob, submittedStatus } from "../support/builders.js";
import { API_VERSION } from "../../src/crds/common.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { planDeletion } from "../../src/mediajob/deletion.js";
import { FINALIZER, providerIdScope } from "../../src/mediajob/job.js";
import { afterNextStep } from "../../src/mediajob/next-step.js";
import { planFinish, planJob } from "../../src/mediajob/plan.js";
import { type Facts } from "../../src/mediajob/pass.js";
import { providerReadDue } from "../../src/mediajob/processing.js";
import { afterStop } from "../../src/mediajob/stop.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();

const job = (
  spec: Partial<MediaJob["spec"]> = {},
  status?: MediaJobStatus,
  meta: Partial<MediaJob["metadata"]> = {},
): MediaJob =>
  makeMediaJob("clip").ns("ns").uid("uid-1").generation(1).meta(meta).spec(spec).status(status).build();
const ready: GpuEndpoint = makeGpuEndpoint("asr").ns("ns").ready("ep-1", undefined).build();
const running = (o: Partial<MediaJobStatus> = {}): MediaJobStatus => submittedStatus(ago(60), o);
const facts = (o: Partial<Facts> = {}): Facts => ({
  now: NOW,
  settings: { defaultTimeoutSeconds: 600, tickMs: 30_000 },
  newSubmissionId: "fresh",
  ...o,
});

describe("planJob", () => {
  const table: Array<{
    name: string;
    job: MediaJob;
    facts?: Partial<Facts>;
    phase: string;
    actions: string[];
    events?: string[];
    requeue?: number;
    error?: { terminal: boolean };
  }> = [
    {
      name: "Pending, no endpoint: waits a tick",
      job: job(),
      phase: "Pending",
      actions: [],
      events: ["EndpointMissing"],
      requeue: 30_000,
    },
    {
      name: "Pending pipeline, no endpoint: its first job labelled while it waits",
      job: job({ then: [{ workload: "tts" }] }),
      phase: "Pending",
      actions: ["labelPipeline"],
      events: ["EndpointMissing"],
      requeue: 30_000,
    },
    {
      name: "Pending pipeline, labelled, no endpoint: waits a tick, writes nothing more",
      job: job({ then: [{ workload: "tts" }] }, undefined, {
        labels: { "media-orchestrator.io/pipeline": "clip" },
        annotations: { "media-orchestrator.io/pipeline-name": "clip" },
      }),
      phase: "Pending",
      actions: [],
      events: ["EndpointMissing"],
      requeue: 30_000,
    },
    {
      name: "Pending, ready, no finalizer: finalizer then submit",
      job: job(),
      facts: { endpoint: ready },
      phase: "Pending",
      actions: ["addFinalizer", "submit"],
    },
    {
      name: "Pending, ready, finalizer on: submit",
      job: job({}, undefined, { finalizers: [FINALIZER] }),
      facts: { endpoint: ready },
      phase: "Pending",
      actions: ["submit"],
    },
    {
      name: "Pending, suspended: held",
      job: job({ suspend: true }),
      facts: { endpoint: ready },
      phase: "Pending",
      actions: [],
      events: ["Suspended"],
    },
    {
      name: "Pending, account unknown: not admitted",
      job: job({ account: "acme" }),
      facts: { endpoint: ready, boundAccounts: ["acme"] },
      phase: "Pending",
      actions: [],
      events: ["AccountUnknown"],
      requeue: 30_000,
    },
    {
      name: "Pending, account trialing: admitted and submitted",
      job: job({ account: "acme" }),
      facts: { endpoint: ready, subscriptionState: "trialing", boundAccounts: ["acme"] },
      phase: "Pending",
      actions: ["addFinalizer", "submit"],
    },
    {
      name: "Pending, an account its namespace is not bound to: not admitted, never submitted",
      job: job({ account: "cus_bob" }),
      facts: { endpoint: ready, subscriptionState: "active", boundAccounts: ["acme"] },
      phase: "Pending",
      actions: [],
      events: ["AccountNotBound"],
      requeue: 30_000,
    },
    {
      name: "Pending, an account in a namespace bound to none: not admitted",
      job: job({ account: "acme" }),
      facts: { endpoint: ready, subscriptionState: "active" },
      phase: "Pending",
      actions: [],
      events: ["AccountNotBound"],
      requeue: 30_000,
    },
    {
      name: "Pending, no account, accounts required, namespace bound to none: not admitted",
      job: job(),
      facts: {
        endpoint: ready,
        settings: { defaultTimeoutSeconds: 600, tickMs: 30_000, accountRequired: true },
      },
      phase: "Pending",
      actions: [],
      events: ["AccountNotBound"],
      requeue: 30_000,
    },
    {
      name: "Pending, no account, accounts required, namespace bound to two: not admitted (it must name one)",
      job: job(),
      facts: {
        endpoint: ready,
        subscriptionState: "active",
        boundAccounts: ["acme", "globex"],
        settings: { defaultTimeoutSeconds: 600, tickMs: 30_000, accountRequired: true },
      },
      phase: "Pending",
      actions: [],
      events: ["AccountNotBound"],
      requeue: 30_000,
    },
    {
      name: "Pending, no account, namespace bound to one: billed to it and submitted",
      job: job(),
      facts: { endpoint: ready, subscriptionState: "active", boundAccounts: ["acme"] },
      phase: "Pending",
      actions: ["addFinalizer", "submit"],
    },
    {
      name: "Processing, within its timeout: waits",
      job: job({}, running()),
      phase: "Processing",
      actions: [],
      requeue: 540_000,
    },
    {
      name: "Processing, past its deadline: cancel",
      job: job({ activeDeadlineSeconds: 30 }, running()),
      phase: "Processing",
      actions: ["cancel"],
    },
    {
      name: "Processing, past its deadline with no provider id: Failed here",
      job: job({ activeDeadlineSeconds: 30 }, running({ providerJobId: undefined, submission: undefined })),
      phase: "Failed",
      actions: [],
      events: ["DeadlineExceeded"],
    },
    {
      name: "Processing, suspended: cancel",
      job: job({ suspend: true }, running()),
      phase: "Processing",
      actions: ["cancel"],
    },
    {
      name: "Processing, past timeout, provider completed: Completed",
      job: job({}, running({ submittedAt: ago(700) })),
      facts: { provider: { result: { id: "p-1", status: "COMPLETED" } } },
      phase: "Completed",
      actions: [],
      events: ["RecoveredMissedCallback"],
    },
    {
      name: "Processing, past timeout, provider failed with attempts left: Pending again",
      job: job({ maxAttempts: 2 }, running({ submittedAt: ago(700) })),
      facts: { provider: { result: { id: "p-1", status: "FAILED" } } },
      phase: "Pending",
      actions: [],
      events: ["ProviderFailed"],
    },
    {
      name: "Processing, past timeout, lost thrice: Failed",
      job: job({}, running({ submittedAt: ago(700), providerLosses: 2 })),
      facts: { provider: { lost: true } },
      phase: "Failed",
      actions: [],
      events: ["ProviderLostJob"],
    },
    {
      name: "Processing, past timeout, read failed: retried",
      job: job({}, running({ submittedAt: ago(700) })),
      facts: { provider: { error: "503" } },
      phase: "Processing",
      actions: [],
      events: ["StatusCheckFailed"],
      error: { terminal: false },
    },
    {
      name: "Processing, no endpoint id: reset to Pending",
      job: job({}, running({ submittedAt: ago(700), endpointId: undefined })),
      phase: "Pending",
      actions: [],
      events: ["ResetToPending"],
    },
    {
      name: "Processing, an accepted id not yet recorded: recorded",
      job: job(
        {},
        running({
          providerJobId: undefined,
          submission: { attempt: 1, id: "s-1", startedAt: ago(1), state: "Sending" },
        }),
      ),
      facts: { unrecorded: { attempt: 1, providerJobId: "p-7" } },
      phase: "Processing",
      actions: ["recordProviderId"],
      requeue: 1_000,
    },
    {
      name: "Processing, unconfirmed past its deadline, policy resubmit: Pending (replay)",
      job: job(
        {},
        running({
          providerJobId: undefined,
          submission: { attempt: 1, id: "s-1", startedAt: ago(700), state: "Unconfirmed" },
        }),
      ),
      facts: { settings: { defaultTimeoutSeconds: 600, tickMs: 30_000, unconfirmedPolicy: "resubmit" } },
      phase: "Pending",
      actions: [],
      events: ["UnconfirmedResubmission"],
    },
    {
      name: "Completed with a next step: create it",
      job: job({ then: [{ workload: "tts" }] as MediaJob["spec"]["then"] }, running({ phase: "Completed" })),
      phase: "Completed",
      actions: ["createNextStep"],
    },
    {
      name: "Completed with its next step recorded: nothing",
      job: job(
        { then: [{ workload: "tts" }] as MediaJob["spec"]["then"] },
        running({ phase: "Completed", nextJob: "clip-1-tts" }),
      ),
      phase: "Completed",
      actions: [],
    },
    { name: "Failed: nothing", job: job({}, running({ phase: "Failed" })), phase: "Failed", actions: [] },
  ];
  it.each(table)("$name", (c) => {
    const plan = planJob(c.job, facts(c.facts));
    expect(plan.status.phase).toBe(c.phase);
    expect(plan.actions.map((a) => a.type)).toEqual(c.actions);
    expect(plan.events.map((e) => e[1])).toEqual(c.events ?? []);
    expect(plan.requeueAfterMs).toBe(c.requeue);
    expect(plan.error && { terminal: plan.error.terminal }).toEqual(c.error);
    // Succeeded always follows the phase.
    expect(plan.status.conditions?.find((x) => x.type === "Succeeded")).toBeDefined();
  });

  it("the account a namespace's one binding supplies is recorded in the submission's intent", () => {
    const plan = planJob(
      job({}, undefined, { finalizers: [FINALIZER] }),
      facts({ endpoint: ready, subscriptionState: "active", boundAccounts: ["acme"] }),
    );
    const a = plan.actions[0];
    if (a?.type !== "submit") throw new Error("no submission planned");
    expect(a.submission.intent.account).toBe("acme");
  });

  it("a job reset after its submission keeps the account it was billed to, whatever the binding says now", () => {
    const reset = running({ phase: "Pending", account: "acme", replay: true });
    const bothBound = planJob(
      job({}, reset, { finalizers: [FINALIZER] }),
      facts({ endpoint: ready, subscriptionState: "active", boundAccounts: ["globex", "acme"] }),
    );
    expect(bothBound.actions.map((x) => x.type)).toEqual(["submit"]);
    const unbound = planJob(
      job({}, reset, { finalizers: [FINALIZER] }),
      facts({ endpoint: ready, subscriptionState: "active", boundAccounts: ["globex"] }),
    );
    expect(unbound.actions).toEqual([]);
    expect(unbound.status.conditions?.find((c) => c.type === "Admitted")?.reason).toBe("AccountNotBound");
  });

  it("the submission's plan: the intent (a new attempt, Sending), the request and the callback it is bound to", () => {
    const plan = planJob(
      job({ timeoutSeconds: 30 }, undefined, { finalizers: [FINALIZER] }),
      facts({ endpoint: ready }),
    );
    const a = plan.actions[0];
    if (a?.type !== "submit") throw new Error("no submission planned");
    const p = a.submission;
    expect(p.intent).toMatchObject({
      phase: "Processing",
      attempts: 1,
      submission: { attempt: 1, id: "fresh", state: "Sending" },
    });
    expect(p.request).toMatchObject({ id: `${providerIdScope(job().metadata)}.uid-1`, input: {} });
    expect(p.callback).toEqual({
      namespace: "ns",
      name: "clip",
      uid: "uid-1",
      jobId: "uid-1",
      attempt: 1,
      submission: "fresh",
    });
    expect(p.timeoutMs).toBe(30_000);
  });
});

describe("answers read by the domain", () => {
  it("a cancel that finds the job completed keeps its result, even past the deadline", () => {
    const j = job({ activeDeadlineSeconds: 30 }, running());
    const plan = afterStop(
      j,
      j.status!,
      "deadline",
      { result: { id: "p-1", status: "COMPLETED" }, confirmed: true },
      NOW.toISOString(),
    );
    expect(plan.status.phase).toBe("Completed");
  });
  it("a failed cancel is retried, past the deadline too: the job runs on at the provider until cancelled", () => {
    const j = job({ activeDeadlineSeconds: 30 }, running());
    for (const why of ["deadline", "suspend", "cancel"] as const) {
      const s = afterStop(j, j.status!, why, { error: "503" }, NOW.toISOString());
      expect([s.status.phase, s.error?.terminal, s.events.map((e) => e[1])]).toEqual([
        "Processing",
        false,
        ["CancelFailed"],
      ]);
    }
  });
  it("a next step's name taken by a stranger is a terminal error with a condition; ours is adopted", () => {
    const j = job(
      { then: [{ workload: "tts" }] as MediaJob["spec"]["then"] },
      running({ phase: "Completed" }),
    );
    const stranger = job({}, undefined, { name: "clip-1-tts", uid: "other" });
    const taken = afterNextStep(j, j.status!, "clip-1-tts", { existing: stranger }, NOW.toISOString());
    expect(taken.error).toEqual({ terminal: true, message: expect.stringMatching(/already exists/) });
    expect(taken.status.conditions?.find((c) => c.type === "NextStepCreated")?.reason).toBe(
      "NextStepNameTaken",
    );
    const ours = job({}, undefined, {
      name: "clip-1-tts",
      ownerReferences: [{ apiVersion: API_VERSION, kind: "MediaJob", name: "clip", uid: "uid-1" }],
    });
    const adopted = afterNextStep(j, j.status!, "clip-1-tts", { existing: ours }, NOW.toISOString());
    expect(adopted.status.nextJob).toBe("clip-1-tts");
    // The pass that created it did not record it (its status write conflicted, its Events with it):
    // the adopting pass tells of the step, so a pipeline's history always says it was created.
    expect(adopted.events).toEqual([
      ["Normal", "NextStepCreated", "created MediaJob clip-1-tts for the next pipeline step"],
    ]);
  });
});

describe("planFinish", () => {
  it("a finished job with our finalizer: let go, with the Event of its end", () => {
    const f = planFinish(job({}, running({ phase: "Completed" }), { finalizers: [FINALIZER] }), {
      nowMs: NOW.getTime(),
      nextStepCached: false,
      failed: false,
    });
    expect(f.actions).toEqual([
      { type: "releaseFinalizer", endEvent: ["Normal", "Completed", expect.any(String)] },
    ]);
  });
  it("a job cancelled as asked: let go with a Normal Cancelled Event, not a Warning", () => {
    const f = planFinish(
      job(
        { cancel: true },
        running({ phase: "Cancelled", error: "Cancelled: spec.cancel is true: cancelled at the provider" }),
        { finalizers: [FINALIZER] },
      ),
      { nowMs: NOW.getTime(), nextStepCached: false, failed: false },
    );
    expect(f.actions).toEqual([
      {
        type: "releaseFinalizer",
        endEvent: ["Normal", "Cancelled", "Cancelled: spec.cancel is true: cancelled at the provider"],
      },
    ]);
  });
  it("a later step that failed tells the pipeline's first job before letting go", () => {
    const step = job({}, running({ phase: "Failed", error: "FAILED: boom" }), {
      finalizers: [FINALIZER],
      labels: { "media-orchestrator.io/pipeline": "p", "media-orchestrator.io/step": "1" },
      annotations: {
        "media-orchestrator.io/pipeline-name": "p",
        "media-orchestrator.io/pipeline-uid": "uid-0",
      },
    });
    const f = planFinish(step, { nowMs: NOW.getTime(), nextStepCached: false, failed: false });
    expect(f.actions.map((a) => a.type)).toEqual(["reportToPipeline", "releaseFinalizer"]);
  });
  it("a running job is looked at again by its deadline at the latest", () => {
    const f = planFinish(job({ activeDeadlineSeconds: 90 }, running()), {
      nowMs: NOW.getTime(),
      requeueAfterMs: 600_000,
      nextStepCached: false,
      failed: false,
    });
    expect(f.requeueAfterMs).toBe(30_050);
  });
  it("past its TTL: deleted, unless its next step exists; before it: looked at again then", () => {
    const done = (completedAt: string, nextJob?: string) =>
      job(
        {
          ttlSecondsAfterFinished: 60,
          ...(nextJob && { then: [{ workload: "tts" }] as MediaJob["spec"]["then"] }),
        },
        running({ phase: "Completed", completedAt, ...(nextJob && { nextJob }) }),
      );
    const o = { nowMs: NOW.getTime(), nextStepCached: false, failed: false };
    expect(planFinish(done(ago(120)), o).actions).toEqual([{ type: "deleteExpired" }]);
    expect(planFinish(done(ago(120), "clip-1-tts"), o).actions).toEqual([
      { type: "deleteExpired", unlessStepExists: "clip-1-tts" },
    ]);
    expect(planFinish(done(ago(120), "clip-1-tts"), { ...o, nextStepCached: true }).actions).toEqual([]);
    expect(planFinish(done(ago(30)), o)).toEqual({ actions: [], requeueAfterMs: 30_050 });
  });
  it("a failed pass neither looks again nor deletes (its backoff does)", () => {
    const f = planFinish(
      job({ ttlSecondsAfterFinished: 0 }, running({ phase: "Failed", completedAt: ago(5) })),
      { nowMs: NOW.getTime(), requeueAfterMs: 5, nextStepCached: false, failed: true },
    );
    expect(f).toEqual({ actions: [] });
  });
});

describe("planDeletion and providerReadDue", () => {
  it("deletion: cancel a running job, then let go; an unconfirmed one waits for its id a while", () => {
    const deleting = (status: MediaJobStatus, forSeconds: number) =>
      job({}, status, { finalizers: [FINALIZER], deletionTimestamp: ago(forSeconds) });
    expect(planDeletion(deleting(running(), 1), NOW.getTime()).steps.map((s) => s.type)).toEqual([
      "cancel",
      "removeFinalizer",
    ]);
    const unconfirmed = running({ providerJobId: undefined });
    expect(planDeletion(deleting(unconfirmed, 10), NOW.getTime())).toEqual({
      steps: [],
      requeueAfterMs: 50_000,
    });
    expect(planDeletion(deleting(unconfirmed, 120), NOW.getTime()).steps.map((s) => s.type)).toEqual([
      "event",
      "removeFinalizer",
    ]);
    expect(planDeletion(job({}, running(), { deletionTimestamp: ago(1) }), NOW.getTime())).toEqual({
      steps: [],
    });
    // A later step deleted while it waits stops its pipeline: the first job is told first.
    const step = job(
      { then: [{ workload: "render" }] },
      { phase: "Pending" },
      {
        name: "clip-1-tts",
        finalizers: [FINALIZER],
        deletionTimestamp: ago(1),
        labels: { "media-orchestrator.io/pipeline": "clip", "media-orchestrator.io/step": "1" },
        annotations: { "media-orchestrator.io/pipeline-uid": "uid-0" },
      },
    );
    expect(planDeletion(step, NOW.getTime()).steps).toEqual([
      {
        type: "reportToPipeline",
        first: "clip",
        uid: "uid-0",
        condition: expect.objectContaining({ status: "False", reason: "StepDeleted" }),
      },
      { type: "removeFinalizer" },
    ]);
  });
  it("the provider is asked only about a job past its timeout, not stopped, suspended or unconfirmed", () => {
    expect(providerReadDue(job({}, running()), NOW.getTime(), 600)).toBeUndefined();
    expect(providerReadDue(job({}, running({ submittedAt: ago(700) })), NOW.getTime(), 600)).toEqual({
      endpointId: "ep-1",
      providerJobId: "p-1",
    });
    expect(
      providerReadDue(job({ suspend: true }, running({ submittedAt: ago(700) })), NOW.getTime(), 600),
    ).toBeUndefined();
    expect(
      providerReadDue(
        job({}, running({ submittedAt: ago(700), providerJobId: undefined })),
        NOW.getTime(),
        600,
      ),
    ).toBeUndefined();
  });
});
