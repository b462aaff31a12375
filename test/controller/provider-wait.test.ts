// A job waiting in the provider's queue says why, on itself, against the real control plane, the
// controller, the sidecar and the simulator over HTTP: crash-looping workers are named (not taken
// for a lack of capacity), the condition changes when they recover, and a job on an endpoint
// scaled to zero names the cold start. While the cause holds, the job is not written again, and
// read at the provider at most once a tick (to see it start).
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import { condition, controllerStackForTests, mediaJob, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Status reads the simulator has answered (GET /v2/{endpoint}/status/{id}). */
async function statusReads(simUrl: string): Promise<number> {
  const res = await fetch(`${simUrl}/_sim/requests`);
  const { requests } = (await res.json()) as { requests: Record<string, number> };
  return Object.entries(requests)
    .filter(([route]) => /^GET \/v2\/[^/]+\/status\/:id$/.test(route))
    .reduce((n, [, c]) => n + c, 0);
}

/** The job once its Queued condition has this reason (status True). */
const queuedFor = (ns: string, name: string, reason: string) =>
  eventually(
    async () => {
      const j = await api.get<MediaJob>("mediajobs", ns, name);
      const q = j && condition(j, "Queued");
      return q?.status === "True" && q.reason === reason ? j : undefined;
    },
    { timeoutMs: 20_000, message: `${name}'s Queued condition to say ${reason}` },
  );

describe("a job queued behind crash-looping workers", () => {
  const s = controllerStackForTests(kc, {
    name: "wait-crash-loop",
    sidecar: true,
    sim: { faults: { crashLoopWorkers: true } },
    endpoints: [{ workload: "asr", minWorkers: 0, maxWorkers: 2 }],
  });

  it("names them as the cause with the fix, quietly while it holds, then changes when they recover", async () => {
    await api.create("mediajobs", s.ns, mediaJob("stuck", { workload: "asr", id: "stuck" }) as never);
    const waiting = await queuedFor(s.ns, "stuck", "WorkersUnhealthy");
    expect(waiting.status?.phase).toBe("Processing");
    expect(s.sim.getJob(waiting.status!.providerJobId!)?.status).toBe("IN_QUEUE");
    // The REASON and MESSAGE columns show it, with the runbook's fix.
    expect(waiting.status?.reason).toBe("WorkersUnhealthy");
    expect(waiting.status?.message).toMatch(/crash as they start.*Fix: read the worker logs/);

    // Three ticks (1 s each) with the same cause: no write of the job, and at most a read a tick.
    const reads = await statusReads(s.sim.url);
    await sleep(3_000);
    const later = await api.get<MediaJob>("mediajobs", s.ns, "stuck");
    expect(later?.metadata.resourceVersion).toBe(waiting.metadata.resourceVersion);
    expect(await statusReads(s.sim.url)).toBeLessThanOrEqual(reads + 4);

    // The workers recover: the job starts, and its condition says so.
    s.sim.setFaults({});
    const done = await waitForPhase(api, s.ns, "stuck", "Completed", 30_000);
    // A read saw it start (Started), or its end cleared the wait (LeftProviderQueue).
    expect(condition(done, "Queued")).toMatchObject({
      status: "False",
      reason: expect.stringMatching(/^(Started|LeftProviderQueue)$/),
    });
    expect(done.status?.reason).toBe("Completed");
    expect(s.sim.executions("stuck")).toBe(1);
  }, 60_000);
});

describe("a job on an endpoint scaled to zero", () => {
  // A cold start of 500 simulated seconds: 5 real seconds at the test's time scale.
  const s = controllerStackForTests(kc, {
    name: "wait-cold-start",
    sidecar: true,
    sim: { coldStartMs: 500_000 },
    endpoints: [{ workload: "asr", minWorkers: 0, maxWorkers: 1 }],
  });

  it("says it waits for a cold start from zero workers, and no longer once it runs", async () => {
    await api.create("mediajobs", s.ns, mediaJob("cold", { workload: "asr", id: "cold" }) as never);
    const waiting = await queuedFor(s.ns, "cold", "ScalingFromZero");
    expect(waiting.status?.message).toMatch(/from zero workers/);
    expect(waiting.status?.message).toMatch(/minWorkers of 1 or more keeps a worker warm/);
    const done = await waitForPhase(api, s.ns, "cold", "Completed", 30_000);
    expect(condition(done, "Queued")?.status).toBe("False");
  }, 60_000);
});
