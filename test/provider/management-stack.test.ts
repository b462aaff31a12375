// The choice of management API end to end: the real control plane, a Manager and the simulator.
// With REST v2 (the default) GpuEndpoints do not depend on GraphQL at all, so RunPod retiring it
// changes nothing; with GPU_PROVIDER_MANAGEMENT_API=graphql the same retirement is reported.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Manager } from "../../src/controller/manager.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import { KubeApi } from "../../src/k8s/api.js";
import { GpuProviderClient } from "../../src/provider/index.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { createTestNamespace, eventually, testKubeConfig } from "../support/kube.js";
import {
  PREFIX,
  TEST_ENV,
  condition,
  gpuEndpoint,
  simEndpointId,
  startManager,
  startTestSimulator,
  testEnv,
  waitForReady,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const WORKLOADS = ["asr", "tts", "render"] as const;

async function readyOf(ns: string): Promise<string[]> {
  return Promise.all(
    WORKLOADS.map(async (w) => {
      const ep = await api.get<GpuEndpoint>("gpuendpoints", ns, `gpu-${w}`);
      return condition(ep, "Ready")?.status ?? "missing";
    }),
  );
}

describe("REST v2 management (the default) with GraphQL retired", () => {
  let ns = "";
  let sim: Simulator;
  let manager: Manager;

  beforeAll(async () => {
    ns = await createTestNamespace(kc, "rest-mgmt");
    sim = await startTestSimulator();
    // A tick long enough that only the change itself, not a resync, can carry it to the provider.
    manager = startManager(
      kc,
      sim,
      testEnv(ns, {
        GPU_PROVIDER_API_URL: sim.url,
        RESYNC_INTERVAL_SECONDS: "5",
        PROVIDER_DRIFT_CHECK_SECONDS: "5",
      }),
    );
    await manager.start();
    for (const w of WORKLOADS)
      await api.create("gpuendpoints", ns, gpuEndpoint(`gpu-${w}`, { workload: w, maxWorkers: 3 }) as never);
    await Promise.all(WORKLOADS.map((w) => waitForReady(api, ns, `gpu-${w}`)));
  });

  afterAll(async () => {
    await manager?.stop();
    await sim?.close();
  });

  it("keeps all three endpoints Ready and carries a maxWorkers change to the provider within one tick", async () => {
    sim.setFaults({ graphqlRetired: true });
    const listingsAtRetirement = manager.providerView.endpointListings;
    // Two more ticks of listings, all after the retirement.
    await eventually(() => manager.providerView.endpointListings >= listingsAtRetirement + 2, {
      timeoutMs: 30_000,
    });
    expect(await readyOf(ns)).toEqual(["True", "True", "True"]);

    const id = simEndpointId(sim, `${PREFIX}-render-${TEST_ENV}`)!;
    const listingsAtChange = manager.providerView.endpointListings;
    await api.mergePatch("gpuendpoints", ns, "gpu-render", { spec: { maxWorkers: 7 } });
    await eventually(() => (sim.getEndpoint(id) as { workersMax?: number }).workersMax === 7, {
      timeoutMs: 30_000,
    });
    // At most the change's own reconcile listed the endpoints: no resync tick was needed.
    expect(manager.providerView.endpointListings - listingsAtChange).toBeLessThanOrEqual(1);
    const ep = await eventually(async () => {
      const e = await api.get<GpuEndpoint>("gpuendpoints", ns, "gpu-render");
      return e?.status?.workersMax === 7 ? e : undefined;
    });
    expect(condition(ep, "Ready")?.status).toBe("True");
    expect(await readyOf(ns)).toEqual(["True", "True", "True"]);
    expect(sim.stats().graphqlRequests).toBe(0); // the controller never asked GraphQL
  });
});

describe("GraphQL management (GPU_PROVIDER_MANAGEMENT_API=graphql)", () => {
  let ns = "";
  let sim: Simulator;
  let manager: Manager;

  beforeAll(async () => {
    ns = await createTestNamespace(kc, "graphql-mgmt");
    sim = await startTestSimulator();
    const env = testEnv(ns, {
      GPU_PROVIDER_API_URL: sim.url,
      GPU_PROVIDER_MANAGEMENT_API: "graphql",
      // The retirement shows at the next listing of the endpoints: list at every tick here.
      PROVIDER_DRIFT_CHECK_SECONDS: "1",
    });
    const provider = new GpuProviderClient({
      apiUrl: sim.url,
      apiKey: env.GPU_PROVIDER_API_KEY!,
      managementApi: env.GPU_PROVIDER_MANAGEMENT_API,
      timeoutMs: 5_000,
      retryBudgetMs: 5_000,
    });
    manager = startManager(kc, sim, env, { provider });
    await manager.start();
    await api.create("gpuendpoints", ns, gpuEndpoint("gpu-asr", { workload: "asr", maxWorkers: 2 }) as never);
    await waitForReady(api, ns, "gpu-asr");
  });

  afterAll(async () => {
    await manager?.stop();
    await sim?.close();
  });

  it("manages endpoints over GraphQL, and reports it once GraphQL is retired", async () => {
    const id = simEndpointId(sim, `${PREFIX}-asr-${TEST_ENV}`)!;
    expect((sim.getEndpoint(id) as { workersMax?: number }).workersMax).toBe(2);
    expect(sim.stats().graphqlRequests).toBeGreaterThan(0);
    expect(sim.stats().restRequests).toBe(0);

    sim.setFaults({ graphqlRetired: true });
    const ep = await eventually(async () => {
      const e = await api.get<GpuEndpoint>("gpuendpoints", ns, "gpu-asr");
      return condition(e, "Ready")?.status === "False" ? e : undefined;
    });
    // The key itself is still good (it is checked on its own every few minutes): the listing failed.
    expect(condition(ep, "Ready")?.message).toContain("HTTP 410");
  });
});
