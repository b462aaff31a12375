// The MediaJob controller against the real control plane and the simulator over HTTP. Callbacks
// go nowhere here (no sidecar): every completion below comes from the controller's own recovery
// of missed callbacks, the manual runbook automated (docs/design.md, Operational procedures).
// test/e2e covers callbacks.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { eventsOf, eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import {
  condition,
  gpuEndpoint,
  mediaJob,
  simEndpointId,
  startControllerStack,
  waitForPhase,
  type ControllerStack,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let sim: Simulator;

const eventsFor = (name: string) => eventsOf(kc, ns, name);

let stack: ControllerStack;

beforeAll(async () => {
  stack = await startControllerStack(kc, {
    name: "mediajob",
    env: { JOB_TIMEOUT_SECONDS: "2" },
    endpoints: ["asr", "tts", "render"],
  });
  ({ ns, sim } = stack);
});

afterAll(() => stack?.stop());

describe("MediaJob lifecycle", () => {
  it("fixes the job id, submits with it, and completes a job whose callback was lost", async () => {
    sim.setFaults({ dropCallback: 1 });
    await api.create(
      "mediajobs",
      ns,
      mediaJob("dropped", {
        workload: "asr",
        id: "order-7",
        timeoutSeconds: 1,
        input: { audio: "a.wav" },
      }) as never,
    );
    const job = await waitForPhase(api, ns, "dropped", "Completed");
    // The provider made up its own id (RunPod ignores ours); the output is the provider's.
    const atProvider = sim.getJob("order-7")!;
    expect(atProvider.id).toMatch(/-u1$/);
    expect(job.status).toMatchObject({ jobId: "order-7", providerJobId: atProvider.id, attempts: 1 });
    expect(job.status?.output).toEqual(atProvider.output);
    expect(job.status?.endpointId).toBe(simEndpointId(sim, "media-asr-test"));
    expect(sim.executions("order-7")).toBe(1);
    expect(condition(job, "Succeeded")).toMatchObject({ status: "True", reason: "Completed" });
    // The finalizer guards only in-flight jobs: it comes off once the job is finished.
    await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", ns, "dropped");
      return !(j?.metadata.finalizers ?? []).includes("media-orchestrator.io/cancel-at-provider");
    });
    // Events are written in the background, just after the status.
    await eventually(async () => {
      const reasons = (await eventsFor("dropped")).map((e) => e.reason);
      return reasons.includes("Submitted") && reasons.includes("RecoveredMissedCallback");
    });
    sim.setFaults({});
  });

  it("defaults the job id to metadata.uid", async () => {
    const created = await api.create<MediaJob>(
      "mediajobs",
      ns,
      mediaJob("by-uid", { workload: "tts", timeoutSeconds: 1 }) as never,
    );
    const job = await waitForPhase(api, ns, "by-uid", "Completed");
    expect(job.status?.jobId).toBe(created.metadata.uid);
    expect(sim.executions(created.metadata.uid!)).toBe(1);
  });

  it("caches what the apiserver stored, and keeps no record of its writes once their events came", async () => {
    const own = stack.manager.ownJobWrites;
    sim.holdJob("own-1");
    await api.create(
      "mediajobs",
      ns,
      mediaJob("own", { workload: "asr", id: "own-1", timeoutSeconds: 1 }) as never,
    );
    // Processing with the provider's id (the intent, then the id, both written), and the cache at
    // the version the apiserver stores, read together: the job's timeout writes again soon after.
    let stored: MediaJob | undefined;
    let cached: MediaJob | undefined;
    await eventually(async () => {
      stored = await api.get<MediaJob>("mediajobs", ns, "own");
      cached = stack.manager.jobs.get(ns, "own");
      return (
        stored?.status?.providerJobId !== undefined &&
        cached?.metadata.resourceVersion === stored.metadata.resourceVersion
      );
    });
    // Whole where the controller reads it.
    expect(cached!.status).toEqual(stored!.status);
    expect(cached!.spec).toEqual(stored!.spec);
    expect(cached!.metadata.finalizers).toEqual(stored!.metadata.finalizers);
    sim.releaseJob("own-1");
    await waitForPhase(api, ns, "own", "Completed");
    await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", ns, "own");
      return !(j?.metadata.finalizers ?? []).length;
    });
    // Whether each event came before or after its write's answer (the apiserver sends both at
    // once), no version of a write is left waiting for an event that already came. Which of the
    // two happens is up to the run: test/unit/own-writes.test.ts drives the early event always.
    await eventually(() => own.size === 0);
    expect(sim.executions("own-1")).toBe(1);
  });

  it("replays a job the provider forgot (status 404): Pending, replay true, resubmitted", async () => {
    sim.holdJob("lost-1");
    await api.create(
      "mediajobs",
      ns,
      mediaJob("lost", { workload: "render", id: "lost-1", timeoutSeconds: 1 }) as never,
    );
    await waitForPhase(api, ns, "lost", "Processing");
    await eventually(() => sim.executions("lost-1") === 1);
    sim.forgetJob("lost-1");
    sim.releaseJob("lost-1");
    const job = await waitForPhase(api, ns, "lost", "Completed");
    expect(job.status).toMatchObject({ replay: true, attempts: 2, jobId: "lost-1" });
    expect(sim.executions("lost-1")).toBe(2); // the provider lost the first run: a second is the only way
    await eventually(async () => (await eventsFor("lost")).some((e) => e.reason === "ProviderLostJob"));
  });

  it("keeps checking a stuck job the provider still runs, then completes it", async () => {
    sim.holdJob("slow-1");
    await api.create(
      "mediajobs",
      ns,
      mediaJob("slow", { workload: "asr", id: "slow-1", timeoutSeconds: 1 }) as never,
    );
    await eventually(async () => (await eventsFor("slow")).some((e) => e.reason === "StillRunning"), {
      timeoutMs: 10_000,
    });
    expect((await api.get<MediaJob>("mediajobs", ns, "slow"))?.status?.phase).toBe("Processing");
    sim.releaseJob("slow-1");
    const job = await waitForPhase(api, ns, "slow", "Completed");
    expect(job.status?.attempts).toBe(1);
    expect(sim.executions("slow-1")).toBe(1);
  });

  it("retries a FAILED job with a fresh submission id while attempts remain, then fails it", async () => {
    sim.setFaults({ failJob: 1, dropCallback: 1 });
    await api.create(
      "mediajobs",
      ns,
      mediaJob("flaky", { workload: "tts", id: "flaky-1", timeoutSeconds: 1, maxAttempts: 2 }) as never,
    );
    const job = await waitForPhase(api, ns, "flaky", "Failed");
    sim.setFaults({});
    expect(job.status).toMatchObject({ attempts: 2, failures: 2 });
    expect(job.status?.error).toMatch(/^FAILED/);
    // Two runs of the job, one per allowed attempt, counted by the provider.
    expect(sim.executions("flaky-1")).toBe(2);
    expect(condition(job, "Succeeded")).toMatchObject({ status: "False", reason: "Failed" });
  });
});

describe("the operator's reset, as docs/cli.md writes it", () => {
  function readmeResetCommand(name: string): string[] {
    // The command is taken from docs/cli.md itself, so the documented command is the tested one.
    const doc = readFileSync(new URL("../../docs/cli.md", import.meta.url), "utf8");
    const block = /```sh\n(JOB_ID=[\s\S]*?kubectl patch mediajob "\$JOB"[\s\S]*?)\n```/.exec(doc);
    if (!block) throw new Error("docs/cli.md has no reset command block");
    const script = block[1]!.replace(/\\\n\s*/g, " ");
    return ["-c", `JOB=${name}; ${script}`];
  }

  it("resets a Processing job to Pending with replay; it is resubmitted within a tick and runs once", async () => {
    sim.holdJob("reset-1");
    await api.create(
      "mediajobs",
      ns,
      mediaJob("resettable", { workload: "asr", id: "reset-1", timeoutSeconds: 2 }) as never,
    );
    const before = await waitForPhase(api, ns, "resettable", "Processing");
    execFileSync("bash", readmeResetCommand("resettable"), {
      env: { ...process.env, KUBECONFIG: testKubeconfigPath(), NAMESPACE: ns },
      encoding: "utf8",
    });
    const resubmitted = await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", ns, "resettable");
      return j?.status?.attempts === 2 && j.status.phase === "Processing" ? j : undefined;
    });
    expect(resubmitted.status?.replay).toBe(true);
    expect(Date.parse(resubmitted.status!.updatedAt!)).toBeGreaterThan(
      Date.parse(before.status!.updatedAt!) - 1000,
    );
    sim.releaseJob("reset-1");
    await waitForPhase(api, ns, "resettable", "Completed");
    // The operator asked for a second run: the provider ignores ids, so it ran twice, no more.
    expect(sim.executions("reset-1")).toBe(2);
  });

  it("refuses the reset of a job that is not Processing and changes nothing", async () => {
    await api.create("mediajobs", ns, mediaJob("done", { workload: "tts", timeoutSeconds: 1 }) as never);
    await waitForPhase(api, ns, "done", "Completed");
    // Settled: the finalizer comes off just after Completed; compare against the object after that.
    const done = await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", ns, "done");
      return j && !(j.metadata.finalizers ?? []).length ? j : undefined;
    });
    expect(() =>
      execFileSync("bash", readmeResetCommand("done"), {
        env: { ...process.env, KUBECONFIG: testKubeconfigPath(), NAMESPACE: ns },
        encoding: "utf8",
        stdio: "pipe",
      }),
    ).toThrow(/denied request: only a Processing job can be reset; it is Completed/);
    const after = await api.get<MediaJob>("mediajobs", ns, "done");
    expect(after?.status?.phase).toBe("Completed");
    expect(after?.metadata.resourceVersion).toBe(done.metadata.resourceVersion);
  });
});

describe("pipelines", () => {
  it("runs asr -> tts -> render: three Completed jobs, each fed the previous output, and no fourth", async () => {
    await api.create(
      "mediajobs",
      ns,
      mediaJob("pipe", {
        workload: "asr",
        timeoutSeconds: 1,
        input: { audio: "s3://in.wav" },
        then: [
          { workload: "tts", timeoutSeconds: 1, input: { voice: "en-1" } },
          { workload: "render", timeoutSeconds: 1 },
        ],
      }) as never,
    );
    await waitForPhase(api, ns, "pipe-2-render", "Completed");
    const first = await waitForPhase(api, ns, "pipe", "Completed");
    const second = await waitForPhase(api, ns, "pipe-1-tts", "Completed");
    const third = await waitForPhase(api, ns, "pipe-2-render", "Completed");
    expect(first.status?.nextJob).toBe("pipe-1-tts");
    expect(second.status?.nextJob).toBe("pipe-2-render");
    expect(third.status?.nextJob).toBeUndefined();
    expect(second.spec.input).toMatchObject({
      voice: "en-1",
      previous: { job: "pipe", workload: "asr", output: first.status?.output },
    });
    expect(third.spec.input).toMatchObject({
      previous: { job: "pipe-1-tts", output: second.status?.output },
    });
    expect(second.metadata.ownerReferences?.[0]).toMatchObject({ name: "pipe", uid: first.metadata.uid });
    // Nothing else appears. The controller lets go of the last step (removes its finalizer) in
    // the same pass that would have created a next step, after it: once the finalizer is gone,
    // that pass is over and the step is at rest.
    await eventually(
      async () => {
        const last = await api.get<MediaJob>("mediajobs", ns, "pipe-2-render");
        return last?.metadata.finalizers === undefined || last.metadata.finalizers.length === 0;
      },
      { message: "the last step to be let go of" },
    );
    const all = await api.list<MediaJob>("mediajobs", ns, {
      labelSelector: "media-orchestrator.io/pipeline=pipe",
    });
    // The first job carries the pipeline's label too: one selector for the whole pipeline.
    expect(all.items.map((j) => j.metadata.name).sort()).toEqual(["pipe", "pipe-1-tts", "pipe-2-render"]);
    // ...and speaks for it: PipelineSucceeded is True once the last step completed.
    const head = await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", ns, "pipe");
      return condition(j, "PipelineSucceeded")?.status === "True" ? j : undefined;
    });
    expect(condition(head, "PipelineSucceeded")).toMatchObject({
      reason: "PipelineCompleted",
      message: "all 3 steps completed; the last: pipe-2-render",
    });
    expect(condition(head, "Succeeded")).toMatchObject({ status: "True", reason: "Completed" });
    // Each step says it completed, once.
    for (const name of ["pipe", "pipe-1-tts", "pipe-2-render"]) {
      const completed = await eventually(async () => {
        const evs = (await eventsOf(kc, ns, name)).filter((e) => e.reason === "Completed");
        return evs.length ? evs : undefined;
      });
      expect(completed).toHaveLength(1);
      expect(completed[0]!.type).toBe("Normal");
    }
  });

  it("triggers the next step when an operator completes a job by hand", async () => {
    sim.holdJob("manual-1");
    await api.create(
      "mediajobs",
      ns,
      mediaJob("manual", {
        workload: "asr",
        id: "manual-1",
        timeoutSeconds: 600,
        then: [{ workload: "tts", timeoutSeconds: 1 }],
      }) as never,
    );
    await waitForPhase(api, ns, "manual", "Processing");
    await api.updateStatusWithRetry<MediaJob>("mediajobs", ns, "manual", (current) => ({
      ...current,
      status: { ...current.status, phase: "Completed", output: { transcript: "by hand" } },
    }));
    const next = await waitForPhase(api, ns, "manual-1-tts", "Completed");
    expect(next.spec.input).toMatchObject({ previous: { output: { transcript: "by hand" } } });
    sim.releaseJob("manual-1");
  });
});

describe("endpoints", () => {
  it("keeps a job Pending with the cause while its endpoint is missing, then runs it once the endpoint appears", async () => {
    await api.create(
      "mediajobs",
      ns,
      mediaJob("waits", { workload: "asr", endpointRef: "late-asr", timeoutSeconds: 1 }) as never,
    );
    const waiting = await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", ns, "waits");
      return condition(j, "EndpointReady")?.reason === "EndpointMissing" ? j : undefined;
    });
    expect(waiting.status?.phase).toBe("Pending");
    expect(condition(waiting, "EndpointReady")?.message).toMatch(/GpuEndpoint late-asr does not exist/);
    // The Event is recorded just after the status write that set the condition.
    await eventually(async () =>
      (await eventsFor("waits")).some((e) => e.type === "Warning" && e.reason === "EndpointMissing"),
    );
    await api.create("gpuendpoints", ns, gpuEndpoint("late-asr", { workload: "asr" }) as never);
    const job = await waitForPhase(api, ns, "waits", "Completed");
    expect(condition(job, "EndpointReady")?.status).toBe("True");
  });
});

describe("deletion", () => {
  it("cancels a Processing job at the provider before the object goes", async () => {
    sim.holdJob("del-1");
    await api.create(
      "mediajobs",
      ns,
      mediaJob("deleted", { workload: "render", id: "del-1", timeoutSeconds: 600 }) as never,
    );
    const job = await waitForPhase(api, ns, "deleted", "Processing");
    expect(job.metadata.finalizers).toContain("media-orchestrator.io/cancel-at-provider");
    await api.delete("mediajobs", ns, "deleted");
    await eventually(async () => (await api.get("mediajobs", ns, "deleted")) === undefined);
    expect(sim.getJob("del-1")?.status).toBe("CANCELLED");
  });
});
