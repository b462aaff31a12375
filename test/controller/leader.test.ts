// Two controllers at once: one leader, no job submitted twice; the leader's graceful stop
// releases the Lease and the other takes over without waiting it out.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Manager } from "../../src/controller/manager.js";
import { KubeApi } from "../../src/k8s/api.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { createTestNamespace, eventually, testKubeConfig } from "../support/kube.js";
import {
  gpuEndpoint,
  mediaJob,
  startManager,
  startTestSimulator,
  testEnv,
  waitForPhase,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let sim: Simulator;
let a: Manager;
let b: Manager;
let bothLeading = 0;
let sampler: NodeJS.Timeout;

beforeAll(async () => {
  ns = await createTestNamespace(kc, "leader");
  sim = await startTestSimulator({ faults: { dropCallback: 1 } });
  const env = testEnv(ns, {
    GPU_PROVIDER_API_URL: sim.url,
    LEADER_ELECTION: "true",
    MAX_CONCURRENT_RECONCILES: "8",
  });
  const lease = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 300 };
  a = startManager(kc, sim, env, { identity: "replica-a", ...lease });
  b = startManager(kc, sim, env, { identity: "replica-b", ...lease });
  await Promise.all([a.start(), b.start()]);
  sampler = setInterval(() => {
    if (a.isLeader && b.isLeader) bothLeading++;
  }, 20);
  for (const w of ["asr", "tts", "render"])
    await api.create("gpuendpoints", ns, gpuEndpoint(w, { workload: w }) as never);
});

afterAll(async () => {
  clearInterval(sampler);
  await Promise.all([a?.stop(), b?.stop()]);
  await sim?.close();
});

describe("leader election", () => {
  it("elects exactly one leader and submits every job once", async () => {
    await eventually(() => a.isLeader !== b.isLeader);
    const names = Array.from({ length: 20 }, (_, i) => `job-${i}`);
    await Promise.all(
      names.map((n, i) =>
        api.create(
          "mediajobs",
          ns,
          mediaJob(n, { workload: ["asr", "tts", "render"][i % 3]!, id: n, timeoutSeconds: 1 }) as never,
        ),
      ),
    );
    for (const n of names) {
      const job = await waitForPhase(api, ns, n, "Completed", 30_000);
      expect(job.status?.attempts).toBe(1);
      expect(sim.executions(n)).toBe(1);
    }
    expect(bothLeading).toBe(0);
    const lease = await api.rawJson<{ spec: { holderIdentity: string } }>(
      "GET",
      `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/media-orchestrator-controller`,
    );
    expect(lease.spec.holderIdentity).toBe(a.isLeader ? a.elector!.identity : b.elector!.identity);
  });

  it("hands over on a graceful stop without waiting for the lease to expire", async () => {
    const [leader, follower] = a.isLeader ? [a, b] : [b, a];
    await leader.stop();
    // Released, not left to expire: right after the stop the Lease names nobody (or already the
    // follower, which may have been quicker than this read).
    const lease = await api.rawJson<{ spec: { holderIdentity?: string } }>(
      "GET",
      `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/media-orchestrator-controller`,
    );
    expect(["", follower.elector!.identity]).toContain(lease.spec.holderIdentity ?? "");
    await eventually(() => follower.isLeader, { timeoutMs: 10_000 });
    await api.create(
      "mediajobs",
      ns,
      mediaJob("after-handover", { workload: "asr", id: "after-handover", timeoutSeconds: 1 }) as never,
    );
    const job = await waitForPhase(api, ns, "after-handover", "Completed");
    expect(job.status?.attempts).toBe(1);
    expect(bothLeading).toBe(0);
  });
});
