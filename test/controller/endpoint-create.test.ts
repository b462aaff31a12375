// spec.create makes the provider endpoint a GpuEndpoint needs when none has its conventional name.
// Several GpuEndpoints can want the same name (here three of one workload, reconciled concurrently;
// in a cluster-wide controller, one per namespace): at most one endpoint is ever created per name.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import { KubeApi } from "../../src/k8s/api.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { testKubeConfig } from "../support/kube.js";
import { gpuEndpoint, startControllerStack, waitForReady, type ControllerStack } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let sim: Simulator;
let stack: ControllerStack;

beforeAll(async () => {
  stack = await startControllerStack(kc, {
    name: "ep-create",
    sim: { endpoints: [] },
    env: { MAX_CONCURRENT_RECONCILES: "4" },
  });
  ({ ns, sim } = stack);
});

afterAll(() => stack?.stop());

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
