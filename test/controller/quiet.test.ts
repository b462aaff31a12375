// At rest the controller is quiet: with Ready endpoints and only finished jobs, a few ticks make
// no Kubernetes write (counted by watches from here, the apiserver's view) and ask the provider
// about each endpoint at most once per tick (counted by the simulator). The tick also leaves
// finished jobs alone and does not cut a failing key's backoff short.
import { CoreV1Api, Watch } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { objectKey } from "../../src/runtime/informer.js";
import { withPhaseConditions } from "../../src/mediajob/conditions.js";
import type { Manager } from "../../src/controller/manager.js";
import { KubeApi } from "../../src/k8s/api.js";
import { GpuProviderClient } from "../../src/provider/index.js";
import { outputFor } from "../../tools/simulator/outputs.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import {
  SIM_KEY,
  mediaJob,
  startControllerStack,
  waitForPhase,
  type ControllerStack,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const core = kc.makeApiClient(CoreV1Api);
const WORKLOADS = ["asr", "tts", "render"] as const;
const TERMINAL = new Set(["Completed", "Failed", "Cancelled"]);

let ns = "";
let sim: Simulator;
let manager: Manager;

async function providerRequests(): Promise<Record<string, number>> {
  const res = await fetch(`${sim.url}/_sim/requests`);
  return ((await res.json()) as { requests: Record<string, number> }).requests;
}

/** Every watch event on the namespace's MediaJobs, GpuEndpoints and Events from now on. */
async function countWrites(namespace: string) {
  const seen: string[] = [];
  const paths = [
    `/apis/media-orchestrator.io/v1alpha1/namespaces/${namespace}/mediajobs`,
    `/apis/media-orchestrator.io/v1alpha1/namespaces/${namespace}/gpuendpoints`,
    `/api/v1/namespaces/${namespace}/events`,
  ];
  const starts = [
    (await api.list("mediajobs", namespace)).resourceVersion,
    (await api.list("gpuendpoints", namespace)).resourceVersion,
    (await core.listNamespacedEvent({ namespace })).metadata?.resourceVersion ?? "",
  ];
  const watches = await Promise.all(
    paths.map((path, i) =>
      new Watch(kc).watch(
        path,
        { resourceVersion: starts[i] },
        (type: string, obj: { kind?: string; metadata?: { name?: string } }) => {
          if (type !== "BOOKMARK") seen.push(`${type} ${obj.kind}/${obj.metadata?.name}`);
        },
        () => {},
      ),
    ),
  );
  return { seen, stop: () => watches.forEach((w) => w.abort()) };
}

const jobsOf = async (namespace: string) => (await api.list<MediaJob>("mediajobs", namespace)).items;

let stack: ControllerStack;
/** The memory-reducing collections the manager asked for (idle-compaction.ts), counted here. */
let collections = 0;

beforeAll(async () => {
  stack = await startControllerStack(kc, {
    name: "quiet",
    env: { RESYNC_INTERVAL_SECONDS: "1", JOB_TIMEOUT_SECONDS: "1" },
    endpoints: [...WORKLOADS],
    // The burst below is a few dozen objects of work, and the 1 s tick leaves under a second of quiet.
    manager: () => ({
      collectGarbage: () => collections++,
      idleCompaction: { minWork: 20, idleMs: 300, minIntervalMs: 600_000 },
    }),
  });
  ({ ns, sim, manager } = stack);

  // Finished jobs of every kind (no sidecar here: the controller completes them from the status API).
  for (const w of WORKLOADS)
    for (let i = 0; i < 3; i++)
      await api.create(
        "mediajobs",
        ns,
        mediaJob(`done-${w}-${i}`, { workload: w, timeoutSeconds: 1 }) as never,
      );
  await api.create(
    "mediajobs",
    ns,
    mediaJob("pipeline", {
      workload: "asr",
      timeoutSeconds: 1,
      then: [{ workload: "tts", timeoutSeconds: 1 }],
    }) as never,
  );
  await eventually(
    async () => {
      const jobs = await jobsOf(ns);
      return jobs.length === 11 && jobs.every((j) => j.status?.phase === "Completed");
    },
    { timeoutMs: 40_000, message: "the jobs and the pipeline's second step to complete" },
  );

  sim.setFaults({ failJob: 1 });
  for (const i of [0, 1])
    await api.create(
      "mediajobs",
      ns,
      mediaJob(`failed-${i}`, { workload: "render", timeoutSeconds: 1 }) as never,
    );
  for (const i of [0, 1]) await waitForPhase(api, ns, `failed-${i}`, "Failed");
  sim.setFaults({});

  sim.holdJob("quiet-cancel");
  await api.create(
    "mediajobs",
    ns,
    mediaJob("cancelled", { workload: "tts", id: "quiet-cancel", timeoutSeconds: 1 }) as never,
  );
  const processing = await waitForPhase(api, ns, "cancelled", "Processing");
  const provider = new GpuProviderClient({ apiUrl: sim.url, apiKey: SIM_KEY });
  // The provider made up its own id for the job (RunPod ignores ours).
  await eventually(() => sim.getJob("quiet-cancel") !== undefined);
  await provider.cancel(processing.status!.endpointId!, sim.getJob("quiet-cancel")!.id);
  await waitForPhase(api, ns, "cancelled", "Cancelled");

  // Settled: every job finished and let go of, and a tick has passed since.
  await eventually(
    async () => {
      const jobs = await jobsOf(ns);
      return jobs.every((j) => TERMINAL.has(j.status?.phase ?? "") && !j.metadata.finalizers?.length);
    },
    { timeoutMs: 20_000, message: "every job finished, without finalizers" },
  );
  const t = manager.ticks;
  await eventually(() => manager.ticks >= t + 2, { timeoutMs: 10_000 });
}, 150_000);

afterAll(() => stack?.stop());

describe("at rest", () => {
  it("over a few ticks: no Kubernetes write, no reconcile of a finished job, one health check per endpoint per tick", async () => {
    const jobs = await jobsOf(ns);
    expect(jobs).toHaveLength(14);
    expect(new Set(jobs.map((j) => j.status?.phase))).toEqual(TERMINAL);
    const endpoints = (await api.list<GpuEndpoint>("gpuendpoints", ns)).items;
    const endpointIds = endpoints.map((e) => e.status!.endpointId!);

    const jobReconciles = async () =>
      (await manager.metrics.reconciles.get()).values
        .filter((v) => v.labels.controller === "mediajob")
        .reduce((a, v) => a + v.value, 0);
    const writes = await countWrites(ns);
    const before = await providerRequests();
    const reconcilesBefore = await jobReconciles();
    const firstTick = manager.ticks;
    const TICKS = 4;
    await eventually(() => manager.ticks >= firstTick + TICKS, { timeoutMs: 20_000 });
    const after = await providerRequests();
    const reconciles = (await jobReconciles()) - reconcilesBefore;
    writes.stop();

    const delta = (route: string) => (after[route] ?? 0) - (before[route] ?? 0);
    const total = Object.keys(after).reduce((a, route) => a + delta(route), 0);
    const health = endpointIds.map((id) => delta(`GET /v2/${id}/health`));
    expect(writes.seen).toEqual([]);
    expect(reconciles).toBe(0);
    // A tick is counted when the timer fires; the window can hold one more tick's worth of checks.
    for (const n of health) expect(n, JSON.stringify(after)).toBeLessThanOrEqual(TICKS + 1);
    // Nothing else: the endpoint list (drift) and the key check are minutes apart, so at rest the
    // provider is asked about each endpoint once per tick.
    expect(total, JSON.stringify(after)).toBeLessThanOrEqual(endpoints.length * (TICKS + 1));
  });
});

describe("the idle collection", () => {
  it("runs once after the burst of work, and not again while the controller only ticks", async () => {
    await eventually(() => collections === 1, { timeoutMs: 15_000, message: "one collection" });
    const firstTick = manager.ticks;
    await eventually(() => manager.ticks >= firstTick + 3, { timeoutMs: 20_000 });
    expect(collections).toBe(1);
  });
});

describe("the resync tick", () => {
  it("leaves a failing key on its backoff instead of retrying it every tick", async () => {
    // A Processing job past its timeout whose endpoint the provider does not know: every status
    // read fails (StatusCheckFailed), so every reconcile fails and retries with exponential backoff.
    const blocked = mediaJob("blocked-step", {
      workload: "asr",
      endpointRef: "nowhere", // never submitted: it is set Processing by hand below
      timeoutSeconds: 1,
    });
    const created = await api.create<MediaJob>("mediajobs", ns, blocked as never);
    const now = new Date().toISOString();
    const anHourAgo = new Date(Date.now() - 3_600_000).toISOString();
    await api.updateStatusWithRetry<MediaJob>("mediajobs", ns, "blocked-step", (current) => ({
      ...current,
      status: withPhaseConditions(
        {
          phase: "Processing",
          jobId: "blocked",
          attempts: 1,
          endpointId: "no-such-endpoint",
          providerJobId: "gone-u1",
          submittedAt: anHourAgo,
          startedAt: anHourAgo,
          submission: { attempt: 1, id: "blocked-submission", startedAt: anHourAgo, state: "Accepted" },
        },
        current.metadata.generation,
        now,
      ),
    }));
    const key = objectKey(created);
    // Wait until the backoff is longer than three ticks (5 ms doubling: 11 failures, 5 s).
    await eventually(() => manager.jobQueue.failuresOf(key) >= 11, { timeoutMs: 30_000 });
    const failures = manager.jobQueue.failuresOf(key);
    const firstTick = manager.ticks;
    await eventually(() => manager.ticks >= firstTick + 3, { timeoutMs: 20_000 });
    expect(manager.jobQueue.failuresOf(key) - failures).toBeLessThanOrEqual(1);
  });
});

describe("the cache", () => {
  it("keeps a settled job as a small record: key, identity, phase, next step, workload", async () => {
    const stored = await api.get<MediaJob>("mediajobs", ns, "pipeline");
    expect(stored?.metadata.managedFields).toBeDefined();
    expect(stored?.spec.then).toHaveLength(1);
    const cached = manager.jobs.get(ns, "pipeline")!;
    const m = stored!.metadata;
    expect(cached.metadata).toEqual({
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      generation: m.generation,
    });
    expect(cached.spec).toEqual({ workload: "asr" });
    expect(cached.status).toEqual({
      phase: "Completed",
      observedGeneration: m.generation,
      nextJob: stored!.status!.nextJob,
      // Which MediaJob holds a provider job is read from the cache before a /run answer is recorded.
      providerJobId: stored!.status!.providerJobId,
    });
    expect(manager.endpoints.get(ns, "asr")?.metadata.managedFields).toBeUndefined();
  });

  it("a spec edit of a settled job is still reconciled, and its status write keeps the stored spec and status whole", async () => {
    const input = { audio: "s3://quiet/kept.wav" };
    await api.create(
      "mediajobs",
      ns,
      mediaJob("edited", { workload: "asr", timeoutSeconds: 1, input }) as never,
    );
    await waitForPhase(api, ns, "edited", "Completed");
    // Settled: the cache holds the record.
    await eventually(() => {
      const j = manager.jobs.get(ns, "edited");
      return j?.spec.input === undefined && j?.status?.conditions === undefined && !j?.metadata.finalizers;
    });
    const before = (await api.get<MediaJob>("mediajobs", ns, "edited"))!;
    expect(before.status?.output).toBeDefined();
    // A field that stays changeable once the job was submitted (the rest of the spec is frozen).
    await api.mergePatch("mediajobs", ns, "edited", { spec: { activeDeadlineSeconds: 600 } });
    const edited = await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", ns, "edited");
      const generation = j?.metadata.generation;
      return j?.status?.conditions?.find((c) => c.type === "Succeeded")?.observedGeneration === generation
        ? j
        : undefined;
    });
    expect(edited.metadata.generation).toBe(2);
    expect(edited.spec.input).toEqual(input);
    const { conditions: _a, observedGeneration: _b, ...rest } = edited.status!;
    const { conditions: _c, observedGeneration: _d, ...restBefore } = before.status!;
    expect(rest).toEqual(restBefore); // output, ids, attempts, timestamps: nothing lost
    expect(edited.status?.conditions?.map((c) => c.type)).toEqual(
      before.status?.conditions?.map((c) => c.type),
    );
    expect(edited.status?.observedGeneration).toBe(2);
    // Observed again: back to a record.
    await eventually(
      () =>
        manager.jobs.get(ns, "edited")?.status?.observedGeneration === 2 &&
        manager.jobs.get(ns, "edited")?.spec.input === undefined,
    );
  });

  it("a settled job an operator sets back to Pending is submitted again, with its input", async () => {
    const input = { audio: "s3://quiet/again.wav" };
    await api.create(
      "mediajobs",
      ns,
      mediaJob("again", { workload: "tts", timeoutSeconds: 1, input }) as never,
    );
    await waitForPhase(api, ns, "again", "Completed");
    await eventually(() => manager.jobs.get(ns, "again")?.status?.conditions === undefined);
    await api.jsonPatchStatus("mediajobs", ns, "again", [
      { op: "test", path: "/status/phase", value: "Completed" },
      { op: "replace", path: "/status/phase", value: "Pending" },
      { op: "add", path: "/status/replay", value: true },
      { op: "remove", path: "/status/output" },
    ]);
    const done = await eventually(
      async () => {
        const j = await api.get<MediaJob>("mediajobs", ns, "again");
        return j?.status?.phase === "Completed" && j.status.attempts === 2 ? j : undefined;
      },
      { timeoutMs: 30_000, message: "the job submitted again and completed" },
    );
    // The provider's output is derived from the input it was sent: the whole input, not the record's.
    expect(done.status?.output).toEqual(outputFor("tts", input));
    expect(outputFor("tts", input)).not.toEqual(outputFor("tts", {}));
  });

  it("a settled job that is deleted leaves the cache", async () => {
    await eventually(() => manager.jobs.get(ns, "done-asr-0")?.status?.conditions === undefined);
    await api.delete("mediajobs", ns, "done-asr-0");
    await eventually(() => manager.jobs.get(ns, "done-asr-0") === undefined);
  });
});
