// No metric carries a customer id: /metrics is reachable from any pod where network policies are
// off (the default), so a label naming an account would tell every tenant who the other customers
// are and how much they run. Waiting jobs are counted per provider endpoint, every account's.
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { makeGpuEndpoint, makeMediaJob } from "../support/builders.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { Dispatcher } from "../../src/controller/dispatch/dispatcher.js";
import { DispatchMetrics } from "../../src/controller/dispatch/metrics.js";

const endpoint: GpuEndpoint = makeGpuEndpoint("asr")
  .ns("ns")
  .spec({ minWorkers: 0, maxWorkers: 1, idleTimeoutSeconds: 5, maxInFlight: 1 })
  .ready("ep-1", "", { workersMax: 1, health: { jobsInQueue: 0, jobsInProgress: 0 } })
  .build();

const job = (name: string, account: string | undefined, at: number): MediaJob =>
  makeMediaJob(name)
    .ns("ns")
    .uid(`uid-${name}`)
    .generation(1)
    .created(new Date(Date.parse("2026-01-01T00:00:00.000Z") + at * 1000).toISOString())
    .account(account)
    .build();

describe("the controller's metrics", () => {
  it("count the jobs waiting for a slot per endpoint, naming no customer", async () => {
    const registry = new Registry();
    const metrics = new DispatchMetrics(registry);
    const d = new Dispatcher({ wake: () => undefined, jobSeconds: 30, tickSeconds: 2 });
    d.lead([]);
    metrics.readFrom(d);
    const jobs = [
      job("a1", "cus_alice", 0),
      job("b1", "cus_bob_secret", 1),
      job("b2", "cus_bob_secret", 2),
      job("n1", undefined, 3),
    ];
    expect(d.gate(jobs[0]!, endpoint).granted).toBe(true);
    for (const j of jobs.slice(1)) expect(d.gate(j, endpoint).granted).toBe(false);

    const text = await registry.metrics();
    expect(text).toContain('media_orchestrator_dispatch_waiting_jobs{endpoint="ep-1"} 3');
    expect(text).not.toMatch(/cus_|account=/);
  });
});
