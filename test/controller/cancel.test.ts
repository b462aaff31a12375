// spec.cancel against the real control plane and the simulator over HTTP: a waiting job never
// reaches the provider; a running one is cancelled there and ends Cancelled with the provider's
// final status; one the provider keeps running after the cancel is followed until it ends, with a
// Warning Event naming the provider job id and the running-after-cancel gauge meanwhile.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { condition, controllerStackForTests, mediaJob, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const stack = controllerStackForTests(kc, {
  name: "cancel",
  env: { CANCEL_FOLLOW_WARNING_SECONDS: "1" },
  endpoints: ["asr"],
});

const cancel = (name: string) => api.mergePatch("mediajobs", stack.ns, name, { spec: { cancel: true } });

async function runningAfterCancel(): Promise<number> {
  const m = await stack.manager.metrics.registry
    .getSingleMetric("media_orchestrator_mediajobs_running_after_cancel")
    ?.get();
  return (m?.values ?? []).reduce((sum, v) => sum + v.value, 0);
}

/**
 * A job (id `<name>-1`) running at a provider that ignores cancels, held there until released:
 * its provider job id. The test resets the provider's faults.
 */
async function runningWhereCancelIsIgnored(name: string): Promise<string> {
  const id = `${name}-1`;
  stack.sim.setFaults({ ignoreCancel: true });
  stack.sim.holdJob(id);
  await api.create("mediajobs", stack.ns, mediaJob(name, { workload: "asr", id }) as never);
  await waitForPhase(api, stack.ns, name, "Processing");
  await eventually(() => stack.sim.getJob(id)?.status === "IN_PROGRESS");
  return stack.sim.getJob(id)!.id;
}

describe("spec.cancel", () => {
  it("ends a waiting job Cancelled without submitting it", async () => {
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("never", { workload: "asr", id: "never-1", suspend: true, cancel: true }) as never,
    );
    const job = await waitForPhase(api, stack.ns, "never", "Cancelled");
    expect(job.status?.error).toMatch(/^Cancelled: spec.cancel is true: the job was never submitted/);
    expect(condition(job, "Succeeded")).toMatchObject({ status: "False", reason: "Cancelled" });
    expect(stack.sim.getJob("never-1")).toBeUndefined();
  });

  it("cancels a running job at the provider and ends it Cancelled", async () => {
    stack.sim.holdJob("run-1");
    await api.create("mediajobs", stack.ns, mediaJob("running", { workload: "asr", id: "run-1" }) as never);
    const processing = await waitForPhase(api, stack.ns, "running", "Processing");
    await eventually(() => stack.sim.getJob("run-1")?.status === "IN_PROGRESS");
    await cancel("running");
    const job = await waitForPhase(api, stack.ns, "running", "Cancelled");
    const providerId = processing.status?.providerJobId ?? job.status?.providerJobId;
    expect(stack.sim.getJob("run-1")).toMatchObject({ id: providerId, status: "CANCELLED" });
    expect(job.status?.error).toContain(`cancelled job ${providerId} at the provider (CANCELLED)`);
    expect(stack.sim.executions("run-1")).toBe(1);
    // Final: it cannot be undone.
    await expect(
      api.mergePatch("mediajobs", stack.ns, "running", { spec: { cancel: false } }),
    ).rejects.toThrow(/HTTP 422/);
    stack.sim.releaseJob("run-1");
  });

  it("follows a job the provider keeps running after the cancel, and tells so with its provider id", async () => {
    try {
      const providerId = await runningWhereCancelIsIgnored("stubborn");
      await cancel("stubborn");
      const followed = await eventually(async () => {
        const j = await api.get<MediaJob>("mediajobs", stack.ns, "stubborn");
        return condition(j!, "Stopping")?.reason === "RunningAfterCancel" ? j : undefined;
      });
      expect(followed.status?.phase).toBe("Processing");
      expect(followed.status?.reason).toBe("RunningAfterCancel");
      const warning = await eventually(async () =>
        (await eventsOf(kc, stack.ns, "stubborn")).find((e) => e.reason === "RunningAfterCancel"),
      );
      expect(warning.type).toBe("Warning");
      expect(warning.message).toContain(providerId);
      await eventually(async () => (await runningAfterCancel()) === 1);
      // The worker ends on its own: the job ends with the provider's final answer, and is no
      // longer counted.
      stack.sim.releaseJob("stubborn-1");
      const ended = await waitForPhase(api, stack.ns, "stubborn", "Completed");
      expect(condition(ended, "Stopping")?.status).toBe("False");
      await eventually(async () => (await runningAfterCancel()) === 0);
    } finally {
      stack.sim.setFaults({});
    }
  });
});

describe("deletion", () => {
  it("keeps a deleted job the provider still runs after the cancel until it has ended there", async () => {
    try {
      const providerId = await runningWhereCancelIsIgnored("deleted");
      await api.delete("mediajobs", stack.ns, "deleted");
      // Kept (the finalizer stays) and followed; past the warning, told with the provider's job id.
      const warning = await eventually(async () =>
        (await eventsOf(kc, stack.ns, "deleted")).find((e) => e.reason === "RunningAfterDeleteCancel"),
      );
      expect(warning.type).toBe("Warning");
      expect(warning.message).toContain(providerId);
      expect(await api.get<MediaJob>("mediajobs", stack.ns, "deleted")).toBeDefined();
      await eventually(async () => (await runningAfterCancel()) === 1);
      // The worker ends: the job ends with that answer, then goes.
      stack.sim.releaseJob("deleted-1");
      await eventually(async () => (await api.get<MediaJob>("mediajobs", stack.ns, "deleted")) === undefined);
      await eventually(async () => (await runningAfterCancel()) === 0);
    } finally {
      stack.sim.setFaults({});
    }
  });
});
