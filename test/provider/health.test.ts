// Worker health as RunPod documents it: /health reports idle and running workers only; REST v2's
// worker summary adds initializing, throttled and unhealthy. The diagnosis uses what is known and
// says when crash-looping workers cannot be seen.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { healthCondition, toHealth } from "../../src/gpuendpoint/diagnosis.js";
import { GpuProviderClient, type ManagementApi } from "../../src/provider/index.js";
import { startSimulator, type Simulator } from "../../tools/simulator/server.js";

let sim: Simulator;
beforeEach(async () => {
  sim = await startSimulator({
    timeScale: 0.01,
    endpoints: [{ id: "ep-busy", name: "media-render-dev", workersMax: 0 }],
  });
});
afterEach(() => sim.close());

const client = (managementApi: ManagementApi) =>
  new GpuProviderClient({ apiUrl: sim.url, apiKey: "sim-key", managementApi, retryBaseDelayMs: 10 });

describe("health", () => {
  it("at rest: only /health is asked, and the undocumented worker counts stay unknown", async () => {
    const report = await client("rest").health("ep-busy");
    expect(report.workers).toEqual({ idle: 0, running: 0 });
    expect(sim.stats().restRequests).toBe(0);
  });

  it("with jobs queued over REST v2: the worker summary fills in initializing, throttled, unhealthy", async () => {
    await client("rest").submit("ep-busy", { id: "waits", input: {} });
    const report = await client("rest").health("ep-busy");
    expect(report.jobs.inQueue).toBe(1);
    expect(report.workers).toEqual({ idle: 0, running: 0, initializing: 0, throttled: 0, unhealthy: 0 });
    expect(sim.stats().restRequests).toBe(1);
  });

  it("over GraphQL nothing tells unhealthy workers apart, and a stuck queue says so", async () => {
    const c = client("graphql");
    await c.submit("ep-busy", { id: "waits", input: {} });
    const report = await c.health("ep-busy");
    expect(report.workers.unhealthy).toBeUndefined();
    const health = toHealth(report);
    const spec = { workload: "render", minWorkers: 0, maxWorkers: 1, idleTimeoutSeconds: 5 } as never;
    const condition = healthCondition(health, health, spec);
    expect(condition).toMatchObject({ status: "False", reason: "QueueNotDraining" });
    expect(condition.message).toContain("cannot be known");
  });

  it("unhealthy workers reported by REST v2 are the UnhealthyWorkers diagnosis", () => {
    const health = toHealth({
      jobs: { completed: 0, failed: 0, inProgress: 0, inQueue: 3 },
      workers: { idle: 0, running: 0, initializing: 0, throttled: 0, unhealthy: 2 },
    });
    const spec = { workload: "render", minWorkers: 0, maxWorkers: 2, idleTimeoutSeconds: 5 } as never;
    expect(healthCondition(health, undefined, spec)).toMatchObject({ reason: "UnhealthyWorkers" });
  });
});
