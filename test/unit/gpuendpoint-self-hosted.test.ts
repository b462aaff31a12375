// A self-hosted GpuEndpoint (spec.baseUrl) in the domain: its pass plans nothing at the provider and
// is Ready with the id its jobs record, its in-flight window told to the dispatcher; its base URL is
// found by that id (the provider client's routing); and a job on it takes the end its status read
// reports, since no callback comes from it.
import { describe, expect, it } from "vitest";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import { planEndpoint, selfHostedBaseUrl } from "../../src/gpuendpoint/plan.js";
import type { Facts } from "../../src/mediajob/pass.js";
import { planJob } from "../../src/mediajob/plan.js";
import { providerReadDue } from "../../src/mediajob/processing.js";
import { makeGpuEndpoint, makeMediaJob, submittedStatus } from "../support/builders.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const BASE = "http://127.0.0.1:8000";

const endpoint = (name: string, spec: Partial<GpuEndpoint["spec"]>): GpuEndpoint =>
  makeGpuEndpoint(name, spec.workload)
    .ns("ns")
    .generation(2)
    .resourceVersion("1")
    .spec({ minWorkers: 0, maxWorkers: 3, idleTimeoutSeconds: 5, ...spec })
    .build();

const plan = (ep: GpuEndpoint) =>
  planEndpoint({
    endpoint: ep,
    now: NOW,
    mediaEnv: "test",
    naming: { conventionalName: "media-tts-test" },
    tickMs: 30_000,
    // What the executor gathers for a self-hosted endpoint: nothing read at the provider.
    key: { valid: true },
  });

describe("a self-hosted endpoint's pass", () => {
  it("is Ready with its name as its endpoint id, no action at the provider, its window observed", () => {
    const p = plan(endpoint("tts-local", { workload: "tts", baseUrl: `${BASE}/`, maxInFlight: 2 }));
    expect(p.action).toBeUndefined();
    expect(p.status).toMatchObject({
      endpointId: "tts-local",
      endpointName: "tts-local",
      resolvedBy: "baseUrl",
      observedGeneration: 2,
    });
    const ready = p.status.conditions!.find((c) => c.type === "Ready")!;
    expect(ready).toMatchObject({ status: "True", reason: "SelfHosted" });
    expect(ready.message).toBe(
      "self-hosted endpoint tts-local at http://127.0.0.1:8000, up to 2 jobs at once",
    );
    expect(p.observe).toEqual({ endpointId: "tts-local" });
  });

  it("takes spec.endpointId as its id, and drops what a provider endpoint recorded before", () => {
    const ep = endpoint("tts", { workload: "tts", baseUrl: BASE, maxInFlight: 1, endpointId: "local-1" });
    ep.status = { endpointId: "ep-old", workersMax: 3, scalerType: "QUEUE_DELAY", scalerValue: 4 };
    const p = plan(ep);
    expect(p.status).toMatchObject({ endpointId: "local-1", resolvedBy: "baseUrl" });
    expect(p.status).not.toHaveProperty("workersMax");
    expect(p.status).not.toHaveProperty("scalerType");
  });
});

describe("selfHostedBaseUrl", () => {
  const endpoints = [
    endpoint("asr", { workload: "asr", endpointId: "ep-provider" }),
    endpoint("tts", { workload: "tts", baseUrl: BASE, maxInFlight: 1 }),
  ];
  it("is the base URL of the self-hosted endpoint whose jobs record that id", () => {
    expect(selfHostedBaseUrl(endpoints, "tts")).toBe(BASE);
  });
  it("is undefined for a provider endpoint, even one named by the same id", () => {
    expect(selfHostedBaseUrl(endpoints, "ep-provider")).toBeUndefined();
    expect(selfHostedBaseUrl(endpoints, "asr")).toBeUndefined();
  });
});

describe("a job on a self-hosted endpoint", () => {
  const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();
  // Submitted a minute ago, its timeout (600 s) far off: a provider job would wait for its callback.
  const job = makeMediaJob("clip")
    .ns("ns")
    .uid("uid-1")
    .generation(1)
    .status(submittedStatus(ago(60)))
    .build();
  const facts = (o: Partial<Facts>): Facts => ({
    now: NOW,
    settings: { defaultTimeoutSeconds: 600, tickMs: 30_000 },
    newSubmissionId: "fresh",
    ...o,
  });
  const completed = { result: { id: "p-1", status: "COMPLETED" as const, output: { words: 3 } } };

  it("has its status read at every pass", () => {
    const nowMs = NOW.getTime();
    expect(providerReadDue(job, nowMs, 600)).toBeUndefined();
    expect(providerReadDue(job, nowMs, 600, false, undefined, true)).toMatchObject({ endpointId: "ep-1" });
  });

  it("ends as its status read reports, where a provider job's read waits for the callback", () => {
    const selfHosted = planJob(job, facts({ selfHosted: true, provider: completed }));
    expect(selfHosted.status).toMatchObject({ phase: "Completed", output: { words: 3 } });
    expect(selfHosted.events).toContainEqual([
      "Normal",
      "CompletedAtEndpoint",
      "the self-hosted endpoint reports COMPLETED",
    ]);
    expect(planJob(job, facts({ provider: completed })).status.phase).toBe("Processing");
  });

  it("keeps waiting while its status read reports it running", () => {
    const running = { result: { id: "p-1", status: "IN_PROGRESS" as const } };
    expect(planJob(job, facts({ selfHosted: true, provider: running })).status.phase).toBe("Processing");
  });
});
