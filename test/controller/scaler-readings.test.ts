// RunPod's pages can be read two ways on how QUEUE_DELAY adds workers (one per request waiting
// past the threshold, or one at a time per threshold period): the in-flight window must hold under
// both. A burst on an endpoint scaled to zero, against the real control plane, the controller, the
// sidecar and the simulator under each reading: every job completes once and the endpoint reaches
// workersMax.
import { describe, expect, it } from "vitest";
import { KubeApi } from "../../src/k8s/api.js";
import { testKubeConfig } from "../support/kube.js";
import { controllerStackForTests, mediaJob, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);

describe.each(["perOverdueJob", "onePerDelay"] as const)("QUEUE_DELAY read as %s", (reading) => {
  // 20 simulated seconds a job, 0.2 real; a 4 s threshold is 0.04 real seconds.
  const s = controllerStackForTests(kc, {
    name: `reading-${reading.toLowerCase()}`,
    sidecar: true,
    sim: { queueDelayReading: reading, executionMs: 20_000, coldStartMs: 1_000 },
    endpoints: [{ workload: "asr", minWorkers: 0, maxWorkers: 4 }],
  });

  it("a burst of 40 jobs: each runs once and the endpoint reaches workersMax", async () => {
    let maxWorkers = 0;
    const sampler = setInterval(() => {
      const running = s.sim.jobs().filter((j) => j.status === "IN_PROGRESS");
      maxWorkers = Math.max(maxWorkers, new Set(running.map((j) => j.workerId).filter(Boolean)).size);
    }, 10);
    try {
      const names = Array.from({ length: 40 }, (_, i) => `burst-${i}`);
      for (const n of names)
        await api.create("mediajobs", s.ns, mediaJob(n, { workload: "asr", id: n }) as never);
      for (const n of names) await waitForPhase(api, s.ns, n, "Completed", 60_000);
      for (const n of names) expect(s.sim.executions(n)).toBe(1);
    } finally {
      clearInterval(sampler);
    }
    // The window kept enough jobs at the provider for either reading to scale to workersMax.
    expect(maxWorkers).toBe(4);
  }, 120_000);
});
