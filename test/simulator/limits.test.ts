// RunPod's documented job API limits in the simulator: requests per 10 s per key, endpoint and
// operation (send-requests "Rate limits"), and the queue-size 429 on submissions.
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { startSimulator, type Simulator } from "../../tools/simulator/server.js";

let sim: Simulator | undefined;
afterEach(() => sim?.close());

async function post(path: string, body?: unknown, key = "sim-key") {
  const res = await request(`${sim!.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  await res.body.dump();
  return { status: res.statusCode, retryAfter: res.headers["retry-after"] };
}

/** Sends `n` requests, `batch` at a time, and counts the answers by status. */
async function burst(n: number, send: () => Promise<{ status: number }>, batch = 50) {
  const counts = new Map<number, number>();
  for (let done = 0; done < n; done += batch) {
    const answers = await Promise.all(Array.from({ length: Math.min(batch, n - done) }, send));
    for (const a of answers) counts.set(a.status, (counts.get(a.status) ?? 0) + 1);
  }
  return counts;
}

describe("rate limits per operation (timeScale 1: a real 10 s window)", () => {
  it("/cancel: 100 per 10 s, then 429 with Retry-After; other endpoints and keys are not affected", async () => {
    sim = await startSimulator({
      apiKeys: ["sim-key", "other-key"],
      endpoints: [
        { id: "ep-a", name: "a" },
        { id: "ep-b", name: "b" },
      ],
    });
    const counts = await burst(100, () => post("/v2/ep-a/cancel/no-such-job"));
    expect(counts).toEqual(new Map([[404, 100]]));
    const over = await post("/v2/ep-a/cancel/no-such-job");
    expect(over.status).toBe(429);
    expect(Number(over.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(over.retryAfter)).toBeLessThanOrEqual(10);
    expect((await post("/v2/ep-b/cancel/no-such-job")).status).toBe(404);
    expect((await post("/v2/ep-a/cancel/no-such-job", undefined, "other-key")).status).toBe(404);
    expect(sim.stats().rateLimited).toBe(1);
  });

  it("/run: 1000 per 10 s, the 1001st is 429", async () => {
    sim = await startSimulator({
      endpoints: [{ id: "ep-run", name: "run", workersMax: 3 }],
      executionMs: 60_000,
    });
    const counts = await burst(1000, () => post("/v2/ep-run/run", { input: {} }), 100);
    expect(counts).toEqual(new Map([[200, 1000]]));
    expect((await post("/v2/ep-run/run", { input: {} })).status).toBe(429);
    // Another operation has its own budget.
    expect((await post("/v2/ep-run/cancel/x")).status).toBe(404);
  });

  it("/status: 2000 per 10 s, the 2001st is 429", async () => {
    sim = await startSimulator({ endpoints: [{ id: "ep-s", name: "s" }] });
    const get = async () => {
      const res = await request(`${sim!.url}/v2/ep-s/status/no-such-job`, {
        headers: { authorization: "Bearer sim-key" },
      });
      await res.body.dump();
      return { status: res.statusCode };
    };
    expect(await burst(2000, get, 100)).toEqual(new Map([[404, 2000]]));
    expect((await get()).status).toBe(429);
  });

  it("/purge-queue: 2 per 10 s", async () => {
    sim = await startSimulator({ endpoints: [{ id: "ep-p", name: "p" }] });
    await post("/v2/ep-p/purge-queue");
    await post("/v2/ep-p/purge-queue");
    expect((await post("/v2/ep-p/purge-queue")).status).toBe(429);
  });

  it("an unknown endpoint is a 404, never counted against a limit", async () => {
    sim = await startSimulator({ endpoints: [{ id: "ep-p", name: "p" }] });
    const counts = await burst(5, () => post("/v2/nope/purge-queue"));
    expect(counts).toEqual(new Map([[404, 5]]));
  });
});

describe("queue size", () => {
  it("refuses a submission with 429 while more than 50 jobs are queued and more than workersMax x 500", async () => {
    sim = await startSimulator({
      timeScale: 0.01,
      endpoints: [{ id: "ep-zero", name: "zero", workersMax: 0 }],
    });
    const counts = await burst(51, () => post("/v2/ep-zero/run", { input: {} }));
    expect(counts).toEqual(new Map([[200, 51]]));
    expect((await post("/v2/ep-zero/run", { input: {} })).status).toBe(429);
    // With workers allowed the queue drains into them and the limit is 500 per worker.
    sim.setEndpoint({ id: "ep-zero", workersMax: 1 });
    expect((await post("/v2/ep-zero/run", { input: {} })).status).toBe(200);
  });
});
