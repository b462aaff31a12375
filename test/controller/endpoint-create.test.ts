// spec.create makes the provider endpoint a GpuEndpoint needs when none has its conventional name.
// Several GpuEndpoints can want the same name (here three of one workload, reconciled concurrently;
// in a cluster-wide controller, one per namespace): at most one endpoint is ever created per name.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Manager } from "../../src/controller/manager.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import { KubeApi } from "../../src/k8s/api.js";
import type { Simulator } from "../../src/simulator/server.js";
import { createTestNamespace, testKubeConfig } from "../support/kube.js";
import { gpuEndpoint, startManager, startTestSimulator, testEnv, waitForReady } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let sim: Simulator;
let manager: Manager;

beforeAll(async () => {
  ns = await createTestNamespace(kc, "ep-create");
  sim = await startTestSimulator({ endpoints: [] });
  manager = startManager(
    kc,
    sim,
    testEnv(ns, { GPU_PROVIDER_API_URL: sim.url, MAX_CONCURRENT_RECONCILES: "4" }),
  );
  await manager.start();
});

afterAll(async () => {
  await manager?.stop();
  await sim?.close();
});

describe("creating provider endpoints", () => {
  it("creates one endpoint per name, however many GpuEndpoints ask for it at once", async () => {
    const names = ["render-a", "render-b", "render-c"];
    await Promise.all(
      names.map((n) =>
        api.create(
          "gpuendpoints",
          ns,
          gpuEndpoint(n, {
            workload: "render",
            maxWorkers: 2,
            create: { templateId: "tpl-render", gpuTypeIds: ["NVIDIA A40"] },
          }) as never,
        ),
      ),
    );
    const ready: GpuEndpoint[] = [];
    for (const n of names) ready.push(await waitForReady(api, ns, n));
    const atProvider = (sim.listEndpoints() as unknown as Array<{ id: string; name: string }>).filter(
      (e) => e.name === "media-render-test",
    );
    expect(atProvider).toHaveLength(1);
    for (const ep of ready) expect(ep.status?.endpointId).toBe(atProvider[0]!.id);
  });
});
