// spec.create makes the provider endpoint a GpuEndpoint needs when none has its conventional name.
// Several GpuEndpoints can want the same name (here three of one workload, reconciled concurrently;
// in a cluster-wide controller, one per namespace): at most one endpoint is ever created per name.
import { describe, expect, it } from "vitest";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import { KubeApi } from "../../src/k8s/api.js";
import { testKubeConfig } from "../support/kube.js";
import { controllerStackForTests, gpuEndpoint, waitForReady } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const stack = controllerStackForTests(kc, {
  name: "ep-create",
  sim: { endpoints: [] },
  env: { MAX_CONCURRENT_RECONCILES: "4" },
});

describe("creating provider endpoints", () => {
  it("creates one endpoint per name, however many GpuEndpoints ask for it at once", async () => {
    const names = ["render-a", "render-b", "render-c"];
    await Promise.all(
      names.map((n) =>
        api.create(
          "gpuendpoints",
          stack.ns,
          gpuEndpoint(n, {
            workload: "render",
            maxWorkers: 2,
            create: { templateId: "tpl-render", gpuTypeIds: ["NVIDIA A40"] },
          }) as never,
        ),
      ),
    );
    const ready: GpuEndpoint[] = [];
    for (const n of names) ready.push(await waitForReady(api, stack.ns, n));
    const atProvider = (stack.sim.listEndpoints() as unknown as Array<{ id: string; name: string }>).filter(
      (e) => e.name === "media-render-test",
    );
    expect(atProvider).toHaveLength(1);
    for (const ep of ready) expect(ep.status?.endpointId).toBe(atProvider[0]!.id);
  });
});
