// Low-priority jobs never freeze an endpoint: RunPod's policy.lowPriority "won't trigger worker
// scaling", so low jobs sent to an endpoint scaled to zero would sit in its queue for good, holding
// the in-flight window that normal jobs need to make it scale. Against the real control plane, the
// controller, the sidecar and the simulator (whose scaler ignores low-priority jobs, as RunPod's).
import { beforeAll, describe, expect, it } from "vitest";
import { KubeApi } from "../../src/k8s/api.js";
import { activeAccount } from "../support/accounts.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import { condition, controllerStackForTests, mediaJob, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);

describe("100 low-priority jobs, then 10 normal ones, on an endpoint scaled to zero", () => {
  const s = controllerStackForTests(kc, {
    name: "low-priority",
    sidecar: true,
    endpoints: [{ workload: "asr", minWorkers: 0, maxWorkers: 3 }],
  });
  beforeAll(async () => {
    for (const a of ["A", "B"]) await activeAccount(api, s.ns, a);
  });

  const lows = Array.from({ length: 100 }, (_, i) => `low-${i}`);
  const normals = Array.from({ length: 10 }, (_, i) => `normal-${i}`);

  it("the normal jobs finish; the low ones wait in Kubernetes, not at the provider", async () => {
    for (const name of lows)
      await api.create(
        "mediajobs",
        s.ns,
        mediaJob(name, { workload: "asr", id: name, account: "A", priority: "low" }) as never,
      );
    for (const name of normals)
      await api.create(
        "mediajobs",
        s.ns,
        mediaJob(name, { workload: "asr", id: name, account: "B" }) as never,
      );
    for (const name of normals) await waitForPhase(api, s.ns, name, "Completed", 60_000);
    // Low jobs go only to workers /health showed up and free, so hardly any reach the provider: at
    // most one per worker that stopped after the reading (the reading is up to a tick old).
    const lowAtProvider = s.sim.jobs().filter((j) => j.status === "IN_QUEUE").length;
    expect(lowAtProvider).toBeLessThanOrEqual(3);
    const waiting = await eventually(async () => {
      const j = await api.get("mediajobs", s.ns, lows[99]!);
      return condition(j as never, "Queued")?.status === "True" ? j : undefined;
    });
    expect(condition(waiting as never, "Queued")).toMatchObject({ reason: "LowPriority" });
  }, 120_000);

  it("the low jobs finish once the endpoint keeps workers up", async () => {
    await api.mergePatch("gpuendpoints", s.ns, "asr", { spec: { minWorkers: 2 } });
    for (const name of lows) await waitForPhase(api, s.ns, name, "Completed", 90_000);
    // Each ran once.
    for (const name of lows.slice(0, 5)) expect(s.sim.executions(name)).toBe(1);
  }, 180_000);
});
