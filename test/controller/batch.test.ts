// Kubernetes' batch conventions on MediaJob, as a platform engineer uses them with batch/v1 Job:
// `kubectl wait` on the Succeeded condition, Events when a job ends, spec.suspend and
// spec.activeDeadlineSeconds. The controller, the webhooks sidecar (callbacks complete the jobs)
// and the simulator over HTTP, against the real control plane; kubectl is the real one.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { eventsOf, eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import { condition, controllerStackForTests, gpuEndpoint, mediaJob, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);

// Asynchronous: the controller under test runs in this process and must keep running meanwhile.
const run = promisify(execFile);
async function kubectl(...args: string[]): Promise<string> {
  const { stdout } = await run("kubectl", ["--kubeconfig", testKubeconfigPath(), "-n", stack.ns, ...args], {
    encoding: "utf8",
  });
  return stdout;
}

const getJob = (name: string) => api.get<MediaJob>("mediajobs", stack.ns, name);

async function eventsWith(name: string, reason: string) {
  return eventually(
    async () => {
      const found = (await eventsOf(kc, stack.ns, name)).filter((e) => e.reason === reason);
      return found.length ? found : undefined;
    },
    { message: `an Event ${reason} on ${name}` },
  );
}

const stack = controllerStackForTests(kc, {
  name: "batch",
  sidecar: true,
  endpoints: ["asr", "tts", "render"],
});

describe("kubectl wait on the Succeeded condition", () => {
  it("returns when a job completes, with a Normal Completed Event", async () => {
    await api.create("mediajobs", stack.ns, mediaJob("wait-ok", { workload: "asr", id: "wait-ok" }) as never);
    const out = await kubectl("wait", "--for=condition=Succeeded", "mj/wait-ok", "--timeout=60s");
    expect(out).toMatch(/mediajob.media-orchestrator.io\/wait-ok condition met/);
    expect((await getJob("wait-ok"))?.status?.phase).toBe("Completed");
    const completed = await eventsWith("wait-ok", "Completed");
    expect(completed).toEqual([expect.objectContaining({ type: "Normal" })]);
    expect(stack.sim.executions("wait-ok")).toBe(1);
  });

  it("=False returns when a job fails, with a Warning Failed Event that gives the reason", async () => {
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("wait-fail", {
        workload: "tts",
        id: "wait-fail",
        input: { simulate: { fail: true } },
      }) as never,
    );
    const out = await kubectl("wait", "--for=condition=Succeeded=False", "mj/wait-fail", "--timeout=60s");
    expect(out).toMatch(/condition met/);
    const failed = await eventsWith("wait-fail", "Failed");
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ type: "Warning", message: expect.stringMatching(/^Failed: FAILED: /) });
    // The REASON column says why.
    const row = await kubectl("get", "mj", "wait-fail", "--no-headers");
    expect(row).toMatch(/^wait-fail\s+tts\s+Failed\s+Failed\s/);
  });
});

describe("spec.suspend", () => {
  it("a job created suspended is not submitted until it is resumed, then runs once", async () => {
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("held-back", { workload: "asr", id: "held-back", suspend: true }) as never,
    );
    const waiting = await eventually(async () => {
      const j = await getJob("held-back");
      return condition(j, "Suspended")?.status === "True" ? j : undefined;
    });
    expect(waiting.status).toMatchObject({ phase: "Pending", reason: "Suspended" });
    expect(waiting.status?.attempts ?? 0).toBe(0);
    // Given time, still not submitted.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(stack.sim.executions("held-back")).toBe(0);
    expect((await kubectl("get", "mj", "held-back", "--no-headers")).split(/\s+/).slice(0, 4)).toEqual([
      "held-back",
      "asr",
      "Pending",
      "Suspended",
    ]);

    await api.mergePatch("mediajobs", stack.ns, "held-back", { spec: { suspend: false } });
    const done = await waitForPhase(api, stack.ns, "held-back", "Completed");
    expect(condition(done, "Suspended")).toMatchObject({ status: "False", reason: "Resumed" });
    expect(stack.sim.executions("held-back")).toBe(1);
    expect((await eventsWith("held-back", "Suspended"))[0]!.type).toBe("Normal");
  });

  it("suspending a running job cancels it at the provider; resumed, it is submitted anew with a fresh id", async () => {
    stack.sim.holdJob("pause-me");
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("pause-me", { workload: "render", id: "pause-me" }) as never,
    );
    const running = await eventually(async () => {
      const j = await getJob("pause-me");
      return j?.status?.phase === "Processing" && j.status.providerJobId ? j : undefined;
    });
    const firstRun = running.status!.providerJobId!;

    await api.mergePatch("mediajobs", stack.ns, "pause-me", { spec: { suspend: true } });
    const paused = await eventually(async () => {
      const j = await getJob("pause-me");
      return condition(j, "Suspended")?.status === "True" && j?.status?.phase === "Pending" ? j : undefined;
    });
    expect(stack.sim.getJob(firstRun)?.status).toBe("CANCELLED");
    expect(paused.status).toMatchObject({ reason: "Suspended", suspensions: 1 });
    expect(paused.status?.providerJobId).toBeUndefined();
    expect(paused.status?.submission).toBeUndefined();

    stack.sim.releaseJob("pause-me");
    await api.mergePatch("mediajobs", stack.ns, "pause-me", { spec: { suspend: false } });
    const done = await waitForPhase(api, stack.ns, "pause-me", "Completed");
    expect(done.status?.attempts).toBe(2);
    expect(done.status?.providerJobId).not.toBe(firstRun);
    // The cancelled run stays cancelled: no third run, and one Completed Event.
    expect(stack.sim.getJob(firstRun)?.status).toBe("CANCELLED");
    expect(stack.sim.executions("pause-me")).toBe(2);
    expect(await eventsWith("pause-me", "Completed")).toHaveLength(1);
  });
});

describe("spec.suspend keeps at most once", () => {
  it("an unconfirmed submission is neither cancelled nor submitted again while suspended; its callback ends it", async () => {
    // The /run answer is lost (the job runs, its provider id unknown), and the job is held running.
    stack.sim.holdJob("in-doubt");
    stack.sim.setFaults({ lostRunAnswers: 1 });
    try {
      await api.create(
        "mediajobs",
        stack.ns,
        mediaJob("in-doubt", { workload: "tts", id: "in-doubt" }) as never,
      );
      await eventually(async () => {
        const j = await getJob("in-doubt");
        return j?.status?.submission?.state === "Unconfirmed" ? j : undefined;
      });
    } finally {
      stack.sim.setFaults({});
    }
    await api.mergePatch("mediajobs", stack.ns, "in-doubt", { spec: { suspend: true } });
    const pending = await eventually(async () => {
      const j = await getJob("in-doubt");
      return condition(j, "Suspended")?.status === "Unknown" ? j : undefined;
    });
    expect(pending.status).toMatchObject({ phase: "Processing", reason: "SuspendPending", attempts: 1 });
    // It may be running: given time, it is not cancelled (there is no id to cancel) nor resubmitted.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(stack.sim.executions("in-doubt")).toBe(1);
    expect(stack.sim.getJob("in-doubt")?.status).toBe("IN_PROGRESS");
    expect((await getJob("in-doubt"))?.status?.attempts).toBe(1);
    // Resumed before anything could be cancelled: it simply goes on.
    await api.mergePatch("mediajobs", stack.ns, "in-doubt", { spec: { suspend: false } });
    const resumed = await eventually(async () => {
      const j = await getJob("in-doubt");
      return condition(j, "Suspended")?.status === "False" ? j : undefined;
    });
    expect(resumed.status?.phase).toBe("Processing");
    expect(resumed.status?.reason).not.toBe("SuspendPending");
    // Its callback brings the result: the job ran once and keeps it.
    stack.sim.releaseJob("in-doubt");
    const done = await waitForPhase(api, stack.ns, "in-doubt", "Completed");
    expect(done.status?.attempts).toBe(1);
    expect(stack.sim.executions("in-doubt")).toBe(1);
  });
});

describe("spec.activeDeadlineSeconds", () => {
  it("a job running past its deadline is cancelled at the provider and ends Failed, DeadlineExceeded", async () => {
    stack.sim.holdJob("too-slow");
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("too-slow", {
        workload: "asr",
        id: "too-slow",
        activeDeadlineSeconds: 2,
        maxAttempts: 3,
      }) as never,
    );
    const out = await kubectl("wait", "--for=condition=Succeeded=False", "mj/too-slow", "--timeout=60s");
    expect(out).toMatch(/condition met/);
    const job = (await getJob("too-slow"))!;
    expect(job.status).toMatchObject({ phase: "Failed", reason: "DeadlineExceeded" });
    expect(condition(job, "Succeeded")).toMatchObject({ status: "False", reason: "DeadlineExceeded" });
    expect(job.status?.error).toMatch(/^DeadlineExceeded: /);
    // Never retried, though attempts remained: a deadline is not a failed attempt.
    expect(job.status?.attempts).toBe(1);
    expect(stack.sim.getJob(job.status!.providerJobId!)?.status).toBe("CANCELLED");
    const failed = await eventsWith("too-slow", "Failed");
    expect(failed).toEqual([
      expect.objectContaining({ type: "Warning", message: expect.stringMatching(/^DeadlineExceeded: /) }),
    ]);
    stack.sim.releaseJob("too-slow");
  });

  it("a job that finishes within its deadline is not touched by it", async () => {
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("in-time", { workload: "tts", id: "in-time", activeDeadlineSeconds: 600 }) as never,
    );
    const done = await waitForPhase(api, stack.ns, "in-time", "Completed");
    expect(done.status?.startedAt).toBeDefined();
    expect(condition(done, "Succeeded")?.reason).toBe("Completed");
  });
});

describe("spec.ttlSecondsAfterFinished", () => {
  it("deletes a finished job once its TTL has passed, not before, after its Completed Event", async () => {
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("short-lived", { workload: "asr", id: "short-lived", ttlSecondsAfterFinished: 2 }) as never,
    );
    const done = await waitForPhase(api, stack.ns, "short-lived", "Completed");
    const completedAt = Date.parse(done.status!.completedAt!);
    await eventually(async () => (await getJob("short-lived")) === undefined, {
      message: "the job to be deleted after its TTL",
    });
    expect(Date.now()).toBeGreaterThanOrEqual(completedAt + 2_000);
    expect(await eventsWith("short-lived", "Completed")).toHaveLength(1);
  });

  it("keeps a pipeline's first job while a later step exists, and deletes the pipeline from its last step back", async () => {
    // The second step waits for an endpoint that does not exist yet, long past the first job's TTL.
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("brief", {
        workload: "asr",
        ttlSecondsAfterFinished: 1,
        then: [{ workload: "tts", endpointRef: "tts-later" }],
      }) as never,
    );
    await waitForPhase(api, stack.ns, "brief", "Completed");
    // The next step is created by the pass after the one that saw the first job complete.
    const first = await eventually(async () => {
      const j = await getJob("brief");
      return j?.status?.nextJob ? j : undefined;
    });
    expect(first.status?.nextJob).toBe("brief-1-tts");
    const waited = kubectl("wait", "--for=condition=PipelineSucceeded", "mj/brief", "--timeout=45s");
    await new Promise((r) => setTimeout(r, 2_500));
    expect(await getJob("brief")).toBeDefined();
    const second = await getJob("brief-1-tts");
    expect(second?.status?.phase).toBe("Pending");
    expect(second?.spec.ttlSecondsAfterFinished).toBe(1);

    await api.create("gpuendpoints", stack.ns, gpuEndpoint("tts-later", { workload: "tts" }) as never);
    expect(await waited).toMatch(/condition met/);
    await eventually(async () => (await getJob("brief-1-tts")) === undefined, {
      message: "the last step to be deleted",
    });
    await eventually(async () => (await getJob("brief")) === undefined, {
      timeoutMs: 40_000,
      message: "the first job to be deleted after its last step",
    });
  }, 90_000);
});

describe("GpuEndpoint Events", () => {
  it("healthy states are Normal Events, not Warnings", async () => {
    const events = await eventually(async () => {
      const evs = (await eventsOf(kc, stack.ns, "asr")).filter((e) =>
        ["Healthy", "ScaleToZeroAllowed", "WarmWorkers"].includes(e.reason),
      );
      return evs.length ? evs : undefined;
    });
    expect(events.map((e) => e.type)).toEqual(events.map(() => "Normal"));
  });
});
