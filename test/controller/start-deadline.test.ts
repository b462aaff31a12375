// spec.startDeadlineSeconds against the real control plane, the controller, the sidecar and the
// simulator over HTTP: workers that take far longer to start than the job may wait leave it in the
// provider's queue; at its start deadline the controller cancels it there (nothing ran, nothing is
// billed for running) and it ends Failed, StartDeadlineExceeded.
import { describe, expect, it } from "vitest";
import { endpointQueues } from "../../src/cli/queue.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { condition, controllerStackForTests, mediaJob, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);

describe("a job no worker starts within its start deadline", () => {
  // A cold start of 1,000 simulated seconds: 10 real seconds at the test's time scale.
  const s = controllerStackForTests(kc, {
    name: "start-deadline",
    sidecar: true,
    sim: { coldStartMs: 1_000_000 },
    endpoints: [{ workload: "asr", minWorkers: 0, maxWorkers: 1 }],
  });

  it("is cancelled in the provider's queue at its start deadline and ends Failed, StartDeadlineExceeded", async () => {
    await api.create(
      "mediajobs",
      s.ns,
      mediaJob("never-started", { workload: "asr", id: "never-started", startDeadlineSeconds: 2 }) as never,
    );
    const failed = await waitForPhase(api, s.ns, "never-started", "Failed", 30_000);
    expect(failed.status?.error).toMatch(/^StartDeadlineExceeded: /);
    expect(condition(failed, "Succeeded")).toMatchObject({
      status: "False",
      reason: "StartDeadlineExceeded",
    });
    // Cancelled while queued: it never ran.
    expect(s.sim.getJob(failed.status!.providerJobId!)?.status).toBe("CANCELLED");
    expect(s.sim.executions("never-started")).toBe(0);
    expect(failed.status?.usage?.attempts).toEqual([
      expect.objectContaining({ providerStatus: "CANCELLED", executionTimeMs: 0 }),
    ]);
    // The Event is written in the background, after the status: once it shows, it is the only one.
    const deadlineEvents = async () =>
      (await eventsOf(kc, s.ns, "never-started")).filter((e) => e.reason === "StartDeadlineExceeded");
    await eventually(async () => (await deadlineEvents()).length > 0, { timeoutMs: 10_000 });
    expect(await deadlineEvents()).toHaveLength(1);
    const j = await api.get<MediaJob>("mediajobs", s.ns, "never-started");
    expect(j?.status?.attempts).toBe(1);
  }, 60_000);
});

describe("crash-looping workers", () => {
  const s = controllerStackForTests(kc, {
    name: "crash-loop",
    sidecar: true,
    sim: { faults: { crashLoopWorkers: true } },
    endpoints: [{ workload: "asr", minWorkers: 0, maxWorkers: 2 }],
  });

  it("are named as the cause of the wait, and a job past its start deadline ends StartDeadlineExceeded", async () => {
    await api.create(
      "mediajobs",
      s.ns,
      // Long enough for the endpoint's health to show the crash loop before the deadline, on a busy machine.
      mediaJob("crash-looped", { workload: "asr", id: "crash-looped", startDeadlineSeconds: 6 }) as never,
    );
    // The endpoint's health shows the workers unhealthy: the queue names it, not a lack of capacity.
    const cause = await eventually(async () => {
      const eps = (await api.list<GpuEndpoint>("gpuendpoints", s.ns)).items;
      const [q] = endpointQueues(eps, [], Date.now());
      return q?.providerWait?.reason === "WorkersUnhealthy" ? q.providerWait : undefined;
    });
    expect(cause.message).toMatch(/crash as they start/);
    const failed = await waitForPhase(api, s.ns, "crash-looped", "Failed", 30_000);
    expect(failed.status?.error).toMatch(/^StartDeadlineExceeded: /);
    // The job says why it never started.
    expect(failed.status?.error).toMatch(/at the endpoint: WorkersUnhealthy: /);
    expect(s.sim.executions("crash-looped")).toBe(0);
  }, 60_000);

  it("recovered, the next jobs run", async () => {
    s.sim.setFaults({});
    await api.create(
      "mediajobs",
      s.ns,
      mediaJob("after-recovery", { workload: "asr", id: "after-recovery" }) as never,
    );
    await waitForPhase(api, s.ns, "after-recovery", "Completed", 30_000);
  }, 60_000);
});
