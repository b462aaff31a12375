// The job API where RunPod documents it (https://docs.runpod.io/serverless/endpoints/operation-reference,
// https://docs.runpod.io/serverless/endpoints/send-requests): runsync, status-sync, purge-queue,
// payload limits, policy.ttl ending a job mid-run, policy.executionTimeout.
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { startSimulator, type Simulator } from "../../tools/simulator/server.js";

let sim: Simulator | undefined;
afterEach(() => sim?.close());

async function call(method: "GET" | "POST", path: string, body?: unknown) {
  const res = await request(`${sim!.url}${path}`, {
    method,
    headers: { authorization: "Bearer sim-key", "content-type": "application/json" },
    ...(body !== undefined && { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: (text ? JSON.parse(text) : undefined) as Record<string, unknown> };
}

const start = (endpoints: Array<{ id: string; name: string; workersMax?: number }>, executionMs = 3_000) =>
  startSimulator({ timeScale: 0.01, coldStartMs: 500, executionMs, endpoints }).then((s) => (sim = s));

describe("runsync and status-sync", () => {
  it("runsync answers the finished job in one call, with a sync- id kept 1 minute", async () => {
    await start([{ id: "ep", name: "media-asr-dev" }]);
    const r = await call("POST", "/v2/ep/runsync", { input: { audio_url: "a.wav" } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: "COMPLETED", id: expect.stringMatching(/^sync-[0-9a-f-]+-u1$/) });
    expect(r.body.output).toBeDefined();
    expect(r.body.delayTime).toEqual(expect.any(Number));
    // Retained 1 simulated minute (600 ms here), then gone: long before a /run result's 30 minutes.
    const id = r.body.id as string;
    expect((await call("GET", `/v2/ep/status/${id}`)).status).toBe(200);
    await expect
      .poll(async () => (await call("GET", `/v2/ep/status/${id}`)).status, { timeout: 10_000 })
      .toBe(404);
  });

  it("a runsync whose wait ends first answers the id and the current status; status-sync waits for the end", async () => {
    await start([{ id: "idle", name: "media-render-idle", workersMax: 0 }]);
    const r = await call("POST", "/v2/idle/runsync?wait=1000", { input: {} });
    expect(r.body).toEqual({ id: expect.any(String), status: "IN_QUEUE" });
    const id = r.body.id as string;
    sim!.setEndpoint({ id: "idle", workersMax: 1 });
    const done = await call("GET", `/v2/idle/status-sync/${id}?wait=60000`);
    expect(done.body).toMatchObject({ id, status: "COMPLETED" });
  });

  it("?wait outside 1000..300000 ms is a 400", async () => {
    await start([{ id: "ep", name: "media-asr-dev" }]);
    for (const wait of ["999", "300001", "soon"])
      expect((await call("POST", `/v2/ep/runsync?wait=${wait}`, { input: {} })).status).toBe(400);
  });
});

describe("purge-queue", () => {
  it("removes queued jobs only, answers {removed, status: completed}; removed jobs are gone", async () => {
    await start([{ id: "one", name: "media-render-one", workersMax: 1 }], 600_000);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await call("POST", "/v2/one/run", { input: { i } })).body.id as string);
    // One worker: the first job starts, the other two wait.
    await expect
      .poll(async () => (await call("GET", `/v2/one/status/${ids[0]}`)).body.status, { timeout: 10_000 })
      .toBe("IN_PROGRESS");
    expect((await call("POST", "/v2/one/purge-queue")).body).toEqual({ removed: 2, status: "completed" });
    expect((await call("GET", `/v2/one/status/${ids[0]}`)).body.status).toBe("IN_PROGRESS");
    for (const id of ids.slice(1)) expect((await call("GET", `/v2/one/status/${id}`)).status).toBe(404);
  });
});

describe("limits and policies", () => {
  it("refuses a /run payload over 10 MB (413) and accepts up to 20 MB on /runsync", async () => {
    await start([{ id: "ep", name: "media-asr-dev" }]);
    const big = { input: { blob: "x".repeat(11 * 1024 * 1024) } };
    expect((await call("POST", "/v2/ep/run", big)).status).toBe(413);
    expect((await call("POST", "/v2/ep/runsync?wait=1000", big)).status).toBe(200);
    const huge = { input: { blob: "x".repeat(21 * 1024 * 1024) } };
    expect((await call("POST", "/v2/ep/runsync", huge)).status).toBe(413);
  });

  it("policy.ttl ending while the job runs removes it: status 404, no callback, the worker freed", async () => {
    await start([{ id: "one", name: "media-render-one", workersMax: 1 }], 600_000);
    const { id } = (await call("POST", "/v2/one/run", { input: {}, policy: { ttl: 60_000 } })).body as {
      id: string;
    };
    await expect
      .poll(async () => (await call("GET", `/v2/one/status/${id}`)).body?.status, { timeout: 10_000 })
      .toBe("IN_PROGRESS");
    await expect
      .poll(async () => (await call("GET", `/v2/one/status/${id}`)).status, { timeout: 10_000 })
      .toBe(404);
    expect(sim!.deliveries()).toEqual([]);
    const next = (await call("POST", "/v2/one/run", { input: {} })).body as { id: string };
    await expect
      .poll(async () => (await call("GET", `/v2/one/status/${next.id}`)).body?.status, { timeout: 10_000 })
      .toBe("IN_PROGRESS");
  });

  it("policy.executionTimeout ends a longer job TIMED_OUT", async () => {
    await start([{ id: "ep", name: "media-render-dev" }], 60_000);
    const r = await call("POST", "/v2/ep/runsync?wait=300000", {
      input: {},
      policy: { executionTimeout: 5_000 },
    });
    expect(r.body).toMatchObject({ status: "TIMED_OUT" });
    expect(r.body.executionTime).toBeGreaterThanOrEqual(5_000);
  });
});
