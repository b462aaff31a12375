// The GpuEndpoint controller against the real control plane and the simulator: resolution by
// each route, worker settings pushed to the provider, drift restored, and the runbook's diagnosis
// (invalid key, ENDPOINT_NOT_FOUND) as conditions that jobs wait on.
import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import type { Manager } from "../../src/controller/manager.js";
import { warmWorkersCondition } from "../../src/gpuendpoint/diagnosis.js";
import { KubeApi } from "../../src/k8s/api.js";
import { GpuProviderClient } from "../../src/provider/index.js";
import type { Simulator } from "../../tools/simulator/server.js";
import {
  createTestNamespace,
  eventsOf,
  eventually,
  testKubeConfig,
  testKubeconfigPath,
} from "../support/kube.js";
import {
  SIM_KEY,
  condition,
  gpuEndpoint,
  mediaJob,
  simEndpointId,
  startManager,
  startTestSimulator,
  testEnv,
  waitForPhase,
  waitForReady,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let sim: Simulator;
let manager: Manager;

const getEp = (name: string, namespace = ns) => api.get<GpuEndpoint>("gpuendpoints", namespace, name);

async function reasons(namespace: string, name: string): Promise<string[]> {
  return (await eventsOf(kc, namespace, name)).map((e) => `${e.reason}: ${e.message}`);
}

beforeAll(async () => {
  ns = await createTestNamespace(kc, "gpuendpoint");
  sim = await startTestSimulator({
    endpoints: [
      { name: "media-asr-test", workload: "asr", workersMax: 1 },
      { id: "ep-direct", name: "some-render", workload: "render", workersMax: 2 },
      { id: "ep-env", name: "custom-tts", workload: "tts", workersMax: 2 },
    ],
  });
  manager = startManager(
    kc,
    sim,
    testEnv(ns, {
      GPU_PROVIDER_API_URL: sim.url,
      GPU_PROVIDER_ENDPOINT_TTS: "ep-env",
      JOB_TIMEOUT_SECONDS: "1",
      // Drift is looked for every 2 s here (the default is minutes apart).
      PROVIDER_DRIFT_CHECK_SECONDS: "2",
    }),
  );
  await manager.start();
});

afterAll(async () => {
  await manager?.stop();
  await sim?.close();
});

describe("resolution", () => {
  it("resolves by spec.endpointId, by GPU_PROVIDER_ENDPOINT_<WORKLOAD>, and by the <prefix>-<workload>-<env> name", async () => {
    await api.create(
      "gpuendpoints",
      ns,
      gpuEndpoint("by-spec", { workload: "render", endpointId: "ep-direct", maxWorkers: 2 }) as never,
    );
    await api.create("gpuendpoints", ns, gpuEndpoint("by-env", { workload: "tts", maxWorkers: 2 }) as never);
    await api.create("gpuendpoints", ns, gpuEndpoint("by-name", { workload: "asr", maxWorkers: 1 }) as never);
    const [bySpec, byEnv, byName] = await Promise.all(
      ["by-spec", "by-env", "by-name"].map((n) => waitForReady(api, ns, n)),
    );
    expect(bySpec!.status).toMatchObject({ endpointId: "ep-direct", resolvedBy: "spec" });
    expect(byEnv!.status).toMatchObject({
      endpointId: "ep-env",
      resolvedBy: "environment",
      endpointName: "custom-tts",
    });
    expect(byName!.status).toMatchObject({
      endpointId: simEndpointId(sim, "media-asr-test"),
      resolvedBy: "name",
    });
    for (const ep of [bySpec!, byEnv!, byName!]) {
      for (const type of ["CredentialsValid", "EndpointFound", "WorkersInSync", "ScalerKnown", "Ready"])
        expect(condition(ep, type)?.status).toBe("True");
      // What sizes the in-flight window and the provider's ttl, as the provider has it.
      expect(ep.status).toMatchObject({
        scalerType: "QUEUE_DELAY",
        scalerValue: 4,
        executionTimeoutMs: 600_000,
      });
    }
  });

  it("creates the provider endpoint from spec.create when none is found", async () => {
    await api.create(
      "gpuendpoints",
      ns,
      gpuEndpoint("created", {
        workload: "render",
        maxWorkers: 2,
        create: { templateId: "tpl-render", gpuTypeIds: ["NVIDIA A40"] },
      }) as never,
    );
    const ep = await waitForReady(api, ns, "created");
    expect(ep.status).toMatchObject({ resolvedBy: "created", endpointName: "media-render-test" });
    expect(simEndpointId(sim, "media-render-test")).toBe(ep.status?.endpointId);
    await eventually(async () => (await reasons(ns, "created")).some((r) => r.startsWith("EndpointCreated")));
  });

  it("shows the columns in kubectl get gpuendpoints", () => {
    const out = execFileSync(
      "kubectl",
      ["--kubeconfig", testKubeconfigPath(), "-n", ns, "get", "gpuendpoints"],
      { encoding: "utf8" },
    );
    expect(out).toMatch(/^NAME\s+WORKLOAD\s+ENDPOINT ID\s+MIN\s+MAX\s+READY\s+AGE/);
    expect(out).toMatch(/^by-spec\s+render\s+ep-direct\s+0\s+2\s+True\s+/m);
  });
});

describe("workers", () => {
  it("applies min/max changes at the provider", async () => {
    await api.mergePatch("gpuendpoints", ns, "by-name", {
      spec: { minWorkers: 1, maxWorkers: 4, idleTimeoutSeconds: 30 },
    });
    const id = simEndpointId(sim, "media-asr-test")!;
    await eventually(() => {
      const e = sim.getEndpoint(id) as
        { workersMin?: number; workersMax?: number; idleTimeout?: number } | undefined;
      return e?.workersMin === 1 && e.workersMax === 4 && e.idleTimeout === 30;
    });
    const ep = await eventually(async () => {
      const e = await getEp("by-name");
      return e?.status?.workersMax === 4 ? e : undefined;
    });
    expect(ep.status).toMatchObject({ workersMin: 1, workersMax: 4, idleTimeoutSeconds: 30 });
  });

  it("restores drift at the provider (it lowers maxWorkers on its own) with an Event saying what changed", async () => {
    const id = simEndpointId(sim, "media-asr-test")!;
    sim.setEndpoint({ id, workersMax: 0 });
    await eventually(() => (sim.getEndpoint(id) as { workersMax?: number }).workersMax === 4, {
      timeoutMs: 10_000,
    });
    let seen: string[] = [];
    await eventually(
      async () => {
        seen = await reasons(ns, "by-name");
        return seen.some((r) => r.includes("WorkersSynced: set at the provider: workersMax 0 -> 4"));
      },
      { message: () => `a WorkersSynced Event (seen: ${JSON.stringify(seen)})` },
    );
  });

  it("checks the key once for all endpoints, not once per object or per tick (the endpoint list uses it at each drift check)", async () => {
    const before = manager.providerView.credentialChecks;
    const tick = manager.ticks;
    await eventually(() => manager.ticks >= tick + 3, { timeoutMs: 20_000 });
    expect(manager.providerView.credentialChecks - before).toBeLessThanOrEqual(1);
  });
});

describe("diagnosis", () => {
  it("reports an unknown endpoint id as ENDPOINT_NOT_FOUND; fixing the id makes it Ready and releases its jobs", async () => {
    await api.create(
      "gpuendpoints",
      ns,
      gpuEndpoint("ghost", { workload: "render", endpointId: "no-such-endpoint" }) as never,
    );
    await api.create(
      "mediajobs",
      ns,
      mediaJob("waits-for-ghost", { workload: "render", endpointRef: "ghost" }) as never,
    );
    const ghost = await eventually(async () => {
      const e = await getEp("ghost");
      return condition(e, "EndpointFound")?.status === "False" ? e : undefined;
    });
    expect(condition(ghost, "EndpointFound")).toMatchObject({ reason: "ENDPOINT_NOT_FOUND" });
    expect(condition(ghost, "EndpointFound")?.message).toMatch(
      /no-such-endpoint .*does not match a live endpoint. Fix: re-deploy the endpoint/,
    );
    expect(condition(ghost, "Ready")).toMatchObject({ status: "False", reason: "ENDPOINT_NOT_FOUND" });
    const waiting = await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", ns, "waits-for-ghost");
      return condition(j, "EndpointReady")?.reason === "ENDPOINT_NOT_FOUND" ? j : undefined;
    });
    expect(waiting.status?.phase).toBe("Pending");

    await api.mergePatch("gpuendpoints", ns, "ghost", { spec: { endpointId: "ep-direct" } });
    await waitForReady(api, ns, "ghost");
    const done = await waitForPhase(api, ns, "waits-for-ghost", "Completed");
    expect(done.status?.endpointId).toBe("ep-direct");
  });

  it("an invalid key makes CredentialsValid=False on every endpoint, and jobs wait with that reason", async () => {
    const badNs = await createTestNamespace(kc, "badkey");
    const bad = startManager(
      kc,
      sim,
      testEnv(badNs, { GPU_PROVIDER_API_URL: sim.url, GPU_PROVIDER_API_KEY: "revoked-key" }),
    );
    await bad.start();
    try {
      for (const w of ["asr", "tts"])
        await api.create("gpuendpoints", badNs, gpuEndpoint(w, { workload: w }) as never);
      await api.create("mediajobs", badNs, mediaJob("blocked", { workload: "asr" }) as never);
      for (const w of ["asr", "tts"]) {
        const ep = await eventually(async () => {
          const e = await getEp(w, badNs);
          return condition(e, "CredentialsValid")?.status === "False" ? e : undefined;
        });
        expect(condition(ep, "CredentialsValid")).toMatchObject({ reason: "InvalidApiKey" });
        expect(condition(ep, "CredentialsValid")?.message).toMatch(/Fix: rotate the key/);
        expect(condition(ep, "Ready")?.reason).toBe("InvalidApiKey");
        expect(JSON.stringify(ep.status)).not.toContain("revoked-key");
      }
      const job = await eventually(async () => {
        const j = await api.get<MediaJob>("mediajobs", badNs, "blocked");
        return condition(j, "EndpointReady")?.reason === "InvalidApiKey" ? j : undefined;
      });
      expect(job.status?.phase).toBe("Pending");
      expect(sim.executions(job.metadata.uid!)).toBe(0); // nothing reached the provider
    } finally {
      await bad.stop();
    }
  });

  it("a key revoked while running: the health check's refusal makes CredentialsValid=False within a tick; restored, Ready again", async () => {
    const revokedNs = await createTestNamespace(kc, "revoked");
    const valid = new GpuProviderClient({ apiUrl: sim.url, apiKey: SIM_KEY, timeoutMs: 5_000 });
    const revoked = new GpuProviderClient({ apiUrl: sim.url, apiKey: "revoked-key", timeoutMs: 5_000 });
    let current = valid;
    // The provider as the controller sees it: the same simulator, with whichever key is current.
    const provider = new Proxy(valid, {
      get: (_t, prop) => {
        const v = Reflect.get(current, prop) as unknown;
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(current) : v;
      },
    });
    const m = startManager(kc, sim, testEnv(revokedNs, { GPU_PROVIDER_API_URL: sim.url }), { provider });
    await m.start();
    try {
      await api.create("gpuendpoints", revokedNs, gpuEndpoint("asr", { workload: "asr" }) as never);
      await waitForReady(api, revokedNs, "asr");
      const checks = m.providerView.credentialChecks;
      current = revoked;
      const ep = await eventually(async () => {
        const e = await getEp("asr", revokedNs);
        return condition(e, "CredentialsValid")?.status === "False" ? e : undefined;
      });
      expect(condition(ep, "CredentialsValid")).toMatchObject({ reason: "InvalidApiKey" });
      expect(condition(ep, "Ready")).toMatchObject({ status: "False", reason: "InvalidApiKey" });
      current = valid;
      await waitForReady(api, revokedNs, "asr");
      expect(m.providerView.credentialChecks).toBeGreaterThan(checks); // checked again at once
    } finally {
      await m.stop();
    }
  });

  it("warns when a production endpoint scales to zero (the cold-start row)", () => {
    const spec = { workload: "asr" as const, minWorkers: 0, maxWorkers: 3, idleTimeoutSeconds: 5 };
    expect(warmWorkersCondition("prod", spec)).toMatchObject({ status: "False", reason: "ScalesToZero" });
    expect(warmWorkersCondition("prod", { ...spec, minWorkers: 1 }).status).toBe("True");
    expect(warmWorkersCondition("dev", spec).status).toBe("True");
  });
});
