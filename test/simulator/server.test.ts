import { createHmac } from "node:crypto";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import { afterEach, describe, expect, it, vi } from "vitest";
import { startSimulator, type Simulator, type SimulatorOptions } from "../../tools/simulator/server.js";

// The simulator on its own, over raw HTTP: what a RunPod client would see.

const sims: Simulator[] = [];
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

// Most tests here address jobs by the id they submitted, so they opt into honoured ids; RunPod's
// own behaviour (ids ignored, the simulator's default) has tests of its own below.
async function sim(opts: SimulatorOptions = {}): Promise<Simulator> {
  const s = await startSimulator({
    timeScale: 0.01,
    endpoints: [{ id: "ep", name: "media-tts-test", workersMax: 2 }],
    ...opts,
    faults: { honourClientId: true, ...opts.faults },
  });
  sims.push(s);
  return s;
}

async function call(
  s: Simulator,
  method: "GET" | "POST" | "PUT" | "DELETE",
  path: string,
  body?: unknown,
  auth: string | null = "Bearer sim-key",
) {
  const res = await request(`${s.url}${path}`, {
    method,
    headers: {
      ...(auth !== null && { authorization: auth }),
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    headers: res.headers,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- bodies are checked field by field with expect()
    body: text === "" ? undefined : (JSON.parse(text) as any),
  };
}

const run = (s: Simulator, body: unknown, ep = "ep") => call(s, "POST", `/v2/${ep}/run`, body);
const status = (s: Simulator, id: string, ep = "ep") => call(s, "GET", `/v2/${ep}/status/${id}`);
const graphql = (s: Simulator, query: string, variables?: unknown, auth = "Bearer sim-key") =>
  call(s, "POST", "/graphql", { query, ...(variables !== undefined && { variables }) }, auth);

async function until<T>(fn: () => Promise<T> | T, ok: (v: T) => boolean, ms = 5_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
/**
 * Runs `fn` with the simulator's timers on logical time (the HTTP traffic stays real): timers set
 * inside fire only when `fn` advances the clock, so "nothing happened by then" needs no real wait.
 */
async function onLogicalTime(fn: (advance: (ms: number) => Promise<void>) => Promise<void>): Promise<void> {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  try {
    await fn(async (ms) => {
      await vi.advanceTimersByTimeAsync(ms);
    });
  } finally {
    vi.useRealTimers();
  }
}

async function receiver() {
  const got: Array<{ url: string; body: string; headers: IncomingHttpHeaders; at: number }> = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      got.push({ url: req.url ?? "", body, headers: req.headers, at: Date.now() });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { got, base, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe("job API (ids honoured, to address jobs by the id sent)", () => {
  it("goes IN_QUEUE -> IN_PROGRESS -> COMPLETED with plausible timings (simulated ms)", async () => {
    // 0.1: the 3 s execution lasts 300 ms of real time, long enough for a 10 ms poll to see it.
    const s = await sim({ timeScale: 0.1 });
    const submitted = (await run(s, { id: "j1", input: { text: "hello" } })).body;
    expect(submitted).toEqual({ id: "j1", status: "IN_QUEUE" });
    // The answer to /run is the first observation: on a loaded machine the first poll can come
    // after the 100 ms (scaled) queue phase.
    const seen = new Set<string>([submitted.status]);
    const done = await until(
      async () => (await status(s, "j1")).body,
      (b) => {
        seen.add(b.status);
        return b.status === "COMPLETED";
      },
    );
    expect([...seen]).toEqual(expect.arrayContaining(["IN_QUEUE", "IN_PROGRESS", "COMPLETED"]));
    expect(Object.keys(done).sort()).toEqual([
      "delayTime",
      "executionTime",
      "id",
      "output",
      "status",
      "workerId",
    ]);
    // A timer may fire a real millisecond early: 10 simulated ms at this scale.
    const slack = 1 / 0.1;
    expect(done.delayTime).toBeGreaterThanOrEqual(1600 - slack); // cold start 2000 +-20%
    expect(done.executionTime).toBeGreaterThanOrEqual(2400 - slack); // execution 3000 +-20%
    expect(done.executionTime).toBeLessThan(10_000);
    expect(done.output.audio).toMatchObject({ format: "wav" });
  });

  it("accepts a bare key; rejects a missing or wrong key with 401", async () => {
    const s = await sim();
    expect((await call(s, "GET", "/v2/ep/health", undefined, "sim-key")).status).toBe(200);
    expect((await call(s, "GET", "/v2/ep/health", undefined, null)).status).toBe(401);
    expect((await call(s, "GET", "/v2/ep/health", undefined, "Bearer nope")).status).toBe(401);
  });

  it("answers 403 to a suspended account", async () => {
    const s = await sim({ accountProblemKeys: ["broke"] });
    const r = await call(s, "POST", "/v2/ep/run", { input: {} }, "Bearer broke");
    expect(r.status).toBe(403);
    expect(r.body.error).toMatch(/suspended/i);
  });

  it("names what was not found in a 404", async () => {
    const s = await sim();
    expect(await status(s, "j", "nope")).toMatchObject({
      status: 404,
      body: { error: "endpoint not found" },
    });
    expect(await status(s, "nope")).toMatchObject({ status: 404, body: { error: "job not found" } });
    expect(await run(s, { input: {} }, "nope")).toMatchObject({
      status: 404,
      body: { error: "endpoint not found" },
    });
  });

  it("validates the submission", async () => {
    const s = await sim();
    for (const body of [
      {},
      { input: "x" },
      { input: {}, id: "" },
      { input: {}, webhook: "ftp://x" },
      { input: {}, policy: { executionTimeout: 10 } },
      { input: {}, policy: { ttl: 1 } },
    ]) {
      expect((await run(s, body)).status, JSON.stringify(body)).toBe(400);
    }
    const raw = await request(`${s.url}/v2/ep/run`, {
      method: "POST",
      headers: { authorization: "sim-key" },
      body: "{",
    });
    expect(raw.statusCode).toBe(400);
    await raw.body.dump();
    expect((await run(s, { input: { blob: "x".repeat(11 * 1024 * 1024) } })).status).toBe(413);
  });

  it("generates RunPod-style ids when no id is sent, repeatably with the seed", async () => {
    const a = await sim({ seed: 7 });
    const b = await sim({ seed: 7 });
    const ida = (await run(a, { input: {} })).body.id;
    expect(ida).toMatch(/^[0-9a-f-]{36}-u1$/);
    expect((await run(b, { input: {} })).body.id).toBe(ida);
  });

  it("cancels queued and running jobs", async () => {
    const s = await sim({ executionMs: 100_000 });
    s.setEndpoint({ id: "ep", workersMax: 1 });
    await run(s, { id: "running", input: {} });
    await run(s, { id: "queued", input: {} });
    await until(
      async () => (await status(s, "running")).body.status,
      (st) => st === "IN_PROGRESS",
    );
    // It waited in the queue until the cancel and no worker ran it.
    expect((await call(s, "POST", "/v2/ep/cancel/queued")).body).toEqual({
      id: "queued",
      status: "CANCELLED",
      delayTime: expect.any(Number) as number,
      executionTime: 0,
    });
    const c = await call(s, "POST", "/v2/ep/cancel/running");
    expect(c.body).toMatchObject({ id: "running", status: "CANCELLED", workerId: expect.any(String) });
    expect(s.executions("queued")).toBe(0);
    expect(s.executions("running")).toBe(1);
  });

  it("ends a job TIMED_OUT past policy.executionTimeout, FAILED under the failJob fault", async () => {
    const s = await sim({ executionMs: 20_000 });
    await run(s, { id: "slow", input: {}, policy: { executionTimeout: 5_000 } });
    const t = await until(
      async () => (await status(s, "slow")).body,
      (b) => b.status !== "IN_QUEUE" && b.status !== "IN_PROGRESS",
    );
    expect(t).toMatchObject({ status: "TIMED_OUT", error: expect.stringMatching(/timed out/) });
    expect(t.executionTime).toBeGreaterThanOrEqual(5_000);
    expect(t.executionTime).toBeLessThan(30_000);

    s.setFaults({ honourClientId: true, failJob: 1 });
    await run(s, { id: "fails", input: {}, policy: { executionTimeout: 60_000 } });
    const f = await until(
      async () => (await status(s, "fails")).body,
      (b) => b.status === "FAILED",
    );
    expect(JSON.parse(f.error)).toMatchObject({ error_message: expect.any(String) });
    expect(f.output).toBeUndefined();
  });

  it("forgets status after the retention time, and after policy.ttl for a job that never ran", async () => {
    const s = await sim({ statusRetentionMs: 5_000 });
    await run(s, { id: "kept", input: {} });
    await until(
      async () => (await status(s, "kept")).body.status,
      (st) => st === "COMPLETED",
    );
    await until(
      async () => (await status(s, "kept")).status,
      (code) => code === 404,
      2_000,
    );
    s.setEndpoint({ id: "ep", workersMax: 0 });
    await run(s, { id: "short-lived", input: {}, policy: { ttl: 10_000 } });
    expect((await status(s, "short-lived")).status).toBe(200);
    await until(
      async () => (await status(s, "short-lived")).body,
      (b) => b.error === "job not found",
      2_000,
    );
  });

  it("with ignoreClientId behaves like RunPod: every submission runs under a new id", async () => {
    const s = await sim({ faults: { ignoreClientId: true } });
    const a = (await run(s, { id: "mine", input: {} })).body.id;
    const b = (await run(s, { id: "mine", input: {} })).body.id;
    expect(a).not.toBe(b);
    expect((await status(s, "mine")).status).toBe(404);
    await until(
      () => s.executions("mine"),
      (n) => n === 2,
    );
  });

  it("injects 5xx at the configured rate, and some /run calls are accepted before the 500", async () => {
    const s = await sim({ faults: { serverErrors: 1 }, seed: 3 });
    const codes = [];
    for (let i = 0; i < 20; i++) codes.push((await run(s, { id: `x${i}`, input: {} })).status);
    expect(codes.every((c) => c === 500 || c === 503)).toBe(true);
    expect(codes).toContain(500); // accepted, answer lost
    expect(codes).toContain(503); // refused
    const accepted = codes.map((c, i) => [c, i] as const).filter(([c]) => c === 500);
    for (const [, i] of accepted) expect(s.getJob(`x${i}`)).toBeDefined();
    expect(s.stats().serverErrors).toBe(20);
  });

  it("serverErrorsFirst refuses exactly the next N requests (503, nothing accepted), then answers", async () => {
    const s = await sim({ faults: { serverErrorsFirst: 2 } });
    const codes = [];
    for (let i = 0; i < 3; i++) codes.push((await run(s, { id: `o${i}`, input: {} })).status);
    expect(codes).toEqual([503, 503, 200]);
    expect(s.getJob("o0")).toBeUndefined();
    expect(s.getJob("o1")).toBeUndefined();
    expect(s.stats().serverErrors).toBe(2);
    // Setting the faults again starts a new outage of the same length.
    s.setFaults({ honourClientId: true, serverErrorsFirst: 1 });
    expect((await call(s, "GET", "/v2/ep/health")).status).toBe(503);
    expect((await call(s, "GET", "/v2/ep/health")).status).toBe(200);
  });

  it("responseDelay with first delays only the next N answers", async () => {
    const s = await sim({ faults: { responseDelay: { ms: 60_000, first: 1 } } });
    await onLogicalTime(async (advance) => {
      let slow: number | undefined;
      void call(s, "GET", "/v2/ep/health").then((r) => (slow = r.status));
      expect((await call(s, "GET", "/v2/ep/health")).status).toBe(200);
      expect(slow).toBeUndefined();
      await advance(60_000);
      await until(
        () => slow,
        (st) => st === 200,
      );
    });
  });

  it("rate limits with 429 and a Retry-After in seconds", async () => {
    const s = await sim({ faults: { rateLimit: { requestsPerSecond: 2 } } });
    const codes = [];
    let retryAfter;
    for (let i = 0; i < 4; i++) {
      const r = await call(s, "GET", "/v2/ep/health");
      codes.push(r.status);
      if (r.status === 429) retryAfter = r.headers["retry-after"];
    }
    expect(codes).toEqual([200, 200, 429, 429]);
    expect(retryAfter).toBe("1");
  });
});

describe("workers (ids honoured, to address jobs by the id sent)", () => {
  it("workersMax = 0 keeps jobs queued; raising it runs them; /health counts both, exactly as documented", async () => {
    const s = await sim();
    s.setEndpoint({ id: "ep", workersMax: 0 });
    await onLogicalTime(async (advance) => {
      for (const id of ["q1", "q2", "q3"]) await run(s, { id, input: {} });
      await advance(10_000); // far past a cold start and an execution (30 ms scaled)
      const h = (await call(s, "GET", "/v2/ep/health")).body;
      expect(h).toEqual({
        jobs: { completed: 0, failed: 0, inProgress: 0, inQueue: 3, retried: 0 },
        workers: { idle: 0, running: 0 },
      });
      expect(s.executions("q1")).toBe(0);
    });

    s.setEndpoint({ id: "ep", workersMax: 1 });
    await until(
      async () => (await call(s, "GET", "/v2/ep/health")).body.jobs.completed,
      (n) => n === 3,
    );
    const workerIds = new Set<string>();
    for (const id of ["q1", "q2", "q3"]) workerIds.add((await status(s, id)).body.workerId);
    expect(workerIds.size).toBe(1);
  });

  it("keeps workersMin warm (no cold start) and stops idle extra workers after idleTimeout", async () => {
    // A queue delay of 1 s: the two jobs the warm worker cannot take add two workers after it.
    const s = await sim({
      endpoints: [
        { id: "warm", name: "media-asr-warm", workersMin: 1, workersMax: 3, idleTimeout: 5, scalerValue: 1 },
      ],
    });
    await until(
      async () => (await call(s, "GET", "/v2/warm/health")).body.workers.idle,
      (n) => n === 1,
    );
    await run(s, { id: "w1", input: {} }, "warm");
    const done = await until(
      async () => (await status(s, "w1", "warm")).body,
      (b) => b.status === "COMPLETED",
    );
    expect(done.delayTime).toBeLessThan(1000);

    for (const id of ["w2", "w3", "w4"]) await run(s, { id, input: {} }, "warm");
    // /health does not count initializing workers; REST v2's worker summary does.
    const workers = async () => (await call(s, "GET", "/v2/serverless/warm/workers")).body.summary.total;
    await until(workers, (n) => n === 3);
    await until(
      async () => (await call(s, "GET", "/v2/warm/health")).body.jobs.completed,
      (n) => n === 4,
    );
    await until(workers, (n) => n === 1);
  });
});

describe("control from tests (ids honoured, to address jobs by the id sent)", () => {
  it("holdJob keeps a job IN_PROGRESS until releaseJob", async () => {
    const s = await sim();
    s.holdJob("held");
    await onLogicalTime(async (advance) => {
      await run(s, { id: "held", input: {} });
      await advance(10_000); // far past its cold start and 30 ms (scaled) execution
      expect((await status(s, "held")).body.status).toBe("IN_PROGRESS");
      expect(s.executions("held")).toBe(1);
    });
    s.releaseJob("held");
    expect((await status(s, "held")).body.status).toBe("COMPLETED");
  });

  it("forgetJob: status 404 from then on, and no callback", async () => {
    const s = await sim();
    const r = await receiver();
    try {
      s.holdJob("lost");
      await run(s, { id: "lost", input: {}, webhook: `${r.base}/cb-forgotten` });
      await until(
        async () => (await status(s, "lost")).body.status,
        (st) => st === "IN_PROGRESS",
      );
      expect(s.forgetJob("lost")).toBe(true);
      s.releaseJob("lost");
      expect((await status(s, "lost")).body).toEqual({ error: "job not found" });
      // A resubmission after the loss runs again: the dedupe window is the provider's memory.
      await run(s, { id: "lost", input: {}, webhook: `${r.base}/cb` });
      await until(
        () => r.got.length,
        (n) => n === 1,
      );
      expect(s.executions("lost")).toBe(2);
      // The forgotten job's callback, had it been sent at its release, would have come first.
      expect(r.got.map((c) => c.url)).toEqual(["/cb"]);
    } finally {
      await r.close();
    }
  });

  it("removeEndpoint makes the endpoint 404", async () => {
    const s = await sim();
    expect(s.removeEndpoint("ep")).toBe(true);
    expect((await call(s, "GET", "/v2/ep/health")).body).toEqual({ error: "endpoint not found" });
    expect(s.getEndpoint("ep")).toBeUndefined();
  });
});

describe("callback faults (ids honoured, to address jobs by the id sent)", () => {
  it("delays callbacks by delayCallbackMs (scaled)", async () => {
    const s = await sim({ faults: { delayCallbackMs: 100_000 } });
    const r = await receiver();
    try {
      await run(s, { id: "late", input: {}, webhook: `${r.base}/cb` });
      const completedAt = (
        await until(
          async () => ({ b: (await status(s, "late")).body, t: Date.now() }),
          (x) => x.b.status === "COMPLETED",
        )
      ).t;
      await until(
        () => r.got.length,
        (n) => n === 1,
      );
      // 1,000 ms (scaled) after completion; completedAt was observed by polling, so late by up to a
      // poll on a loaded machine: without the delay the gap would be a few ms.
      expect((r.got[0]?.at ?? 0) - completedAt).toBeGreaterThanOrEqual(600);
    } finally {
      await r.close();
    }
  });

  it("reorders callbacks: released newest first", async () => {
    const s = await sim({
      timeScale: 0.1,
      coldStartMs: 100,
      executionMs: 200,
      endpoints: [{ id: "one", name: "media-render-one", workersMin: 1, workersMax: 1 }],
      faults: { reorderCallbacks: true },
    });
    const r = await receiver();
    try {
      for (const id of ["a", "b", "c"])
        await run(s, { id, input: {}, webhook: `${r.base}/cb?job=${id}` }, "one");
      await until(
        () => r.got.length,
        (n) => n === 3,
      );
      expect(r.got.map((g) => JSON.parse(g.body).id)).toEqual(["c", "b", "a"]);
    } finally {
      await r.close();
    }
  });

  it("failCallbackDelivery fails attempts without reaching the receiver, and they are retried", async () => {
    const s = await sim({ faults: { failCallbackDelivery: 1 } });
    const r = await receiver();
    try {
      await run(s, { id: "nf", input: {}, webhook: `${r.base}/cb` });
      await until(
        () => s.deliveries().length,
        (n) => n === 3,
      );
      expect(s.deliveries().map((d) => [d.attempt, d.ok, d.error])).toEqual([
        [1, false, "injected delivery failure"],
        [2, false, "injected delivery failure"],
        [3, false, "injected delivery failure"],
      ]);
      expect(r.got).toHaveLength(0);
    } finally {
      await r.close();
    }
  });

  it("the same seed drops the same callbacks", async () => {
    const dropped = [];
    for (let i = 0; i < 2; i++) {
      const s = await sim({ seed: 11, faults: { dropCallback: 0.5 } });
      for (let j = 0; j < 8; j++) await run(s, { id: `s${j}`, input: {}, webhook: "http://127.0.0.1:9/cb" });
      // A callback is dropped or sent when its job ends: once all have ended, the list is final.
      await until(
        () => Array.from({ length: 8 }, (_, j) => s.getJob(`s${j}`)?.status),
        (sts) => sts.every((st) => st === "COMPLETED"),
      );
      dropped.push(s.droppedCallbacks().sort());
    }
    expect(dropped[0]?.length).toBeGreaterThan(0);
    expect(dropped[0]?.length).toBeLessThan(8);
    expect(dropped[1]).toEqual(dropped[0]);
  });
});

describe("GraphQL management", () => {
  it("answers the key check, also with ?api_key=", async () => {
    const s = await sim();
    const r = await graphql(s, "query { myself { id } }");
    expect(r.body.data.myself.id).toMatch(/^user_/);
    const q = await request(`${s.url}/graphql?api_key=sim-key`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: "query { myself { id } }" }),
    });
    expect(q.statusCode).toBe(200);
    await q.body.dump();
    expect((await graphql(s, "query { myself { id } }", undefined, "Bearer bad")).status).toBe(401);
  });

  it("reports a suspended account as a GraphQL error", async () => {
    const s = await sim({ accountProblemKeys: ["broke"] });
    const r = await graphql(s, "query { myself { id } }", undefined, "Bearer broke");
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      data: { myself: null },
      errors: [{ message: expect.stringMatching(/balance/) }],
    });
  });

  it("rejects unknown fields and bad syntax with 400, like a GraphQL server", async () => {
    const s = await sim();
    expect((await graphql(s, "query { myself { password } }")).body.errors[0].message).toMatch(
      /Cannot query field/,
    );
    expect((await graphql(s, "query { myself { id }")).status).toBe(400);
    expect((await call(s, "POST", "/graphql", { nothing: 1 })).status).toBe(400);
  });

  it("creates endpoints with saveEndpoint and deletes them only at zero workers", async () => {
    const s = await sim();
    const save = "mutation($input: EndpointInput!) { saveEndpoint(input: $input) { id name workersMax } }";
    const created = await graphql(s, save, {
      input: { name: "media-asr-new", templateId: "t", gpuIds: "ADA_24" },
    });
    const id = created.body.data.saveEndpoint.id;
    expect(id).toMatch(/^[a-z0-9]{14}$/);
    expect(s.getEndpoint(id)).toMatchObject({ workload: "asr", workersMax: 3 });
    const refused = await graphql(s, `mutation { deleteEndpoint(id: "${id}") }`);
    expect(refused.body.errors[0].message).toMatch(/0 min and 0 max/);
    await graphql(s, save, {
      input: { id, name: "media-asr-new", templateId: "t", gpuIds: "ADA_24", workersMax: 0 },
    });
    expect((await graphql(s, `mutation { deleteEndpoint(id: "${id}") }`)).body).toEqual({
      data: { deleteEndpoint: null },
    });
    expect(s.getEndpoint(id)).toBeUndefined();
    const missing = await graphql(s, save, { input: { name: "x" } });
    expect(missing.status).toBe(400);
  });
});

describe("inspection API (/_sim) (ids honoured, to address jobs by the id sent)", () => {
  it("exposes executions, deliveries, jobs, stats and faults", async () => {
    const s = await sim();
    const r = await receiver();
    try {
      await run(s, { id: "i1", input: {}, webhook: `${r.base}/cb` });
      await until(
        async () => (await call(s, "GET", "/_sim/deliveries")).body.deliveries.length,
        (n) => n === 1,
      );
      expect((await call(s, "GET", "/_sim/executions")).body).toEqual({ executions: { i1: 1 } });
      expect((await call(s, "GET", "/_sim/executions/i1")).body).toEqual({ id: "i1", executions: 1 });
      expect((await call(s, "GET", "/_sim/jobs/i1")).body).toMatchObject({
        id: "i1",
        status: "COMPLETED",
        endpointId: "ep",
      });
      expect((await call(s, "GET", "/_sim/stats")).body).toMatchObject({ submissions: 1, requests: 1 });

      expect((await call(s, "PUT", "/_sim/faults", { dropCallback: 2 })).status).toBe(400);
      expect((await call(s, "PUT", "/_sim/faults", { nonsense: true })).status).toBe(400);
      expect((await call(s, "PUT", "/_sim/faults", { dropCallback: 1 })).body).toEqual({ dropCallback: 1 });
      expect(s.faults()).toEqual({ dropCallback: 1 });
      expect((await call(s, "GET", "/_sim/faults")).body).toEqual({ dropCallback: 1 });
    } finally {
      await r.close();
    }
  });

  it("changes, creates and deletes endpoints", async () => {
    const s = await sim();
    expect((await call(s, "PUT", "/_sim/endpoints/ep", { workersMax: 0 })).body).toMatchObject({
      id: "ep",
      workersMax: 0,
    });
    expect((await call(s, "PUT", "/_sim/endpoints/new", { workersMax: 1 })).status).toBe(400);
    expect((await call(s, "PUT", "/_sim/endpoints/new", { name: "media-render-new" })).body).toMatchObject({
      id: "new",
      workload: "render",
    });
    expect((await call(s, "GET", "/_sim/endpoints")).body.endpoints.map((e: { id: string }) => e.id)).toEqual(
      ["ep", "new"],
    );
    expect((await call(s, "DELETE", "/_sim/endpoints/new")).status).toBe(204);
    expect((await call(s, "GET", "/_sim/endpoints/new")).status).toBe(404);
  });

  it("holds, releases and forgets jobs", async () => {
    const s = await sim();
    await call(s, "POST", "/_sim/jobs/h1/hold");
    await onLogicalTime(async (advance) => {
      await run(s, { id: "h1", input: {} });
      await advance(10_000); // far past its cold start and execution
      expect((await status(s, "h1")).body.status).toBe("IN_PROGRESS");
    });
    await call(s, "POST", "/_sim/jobs/h1/release");
    expect((await status(s, "h1")).body.status).toBe("COMPLETED");
    expect((await call(s, "POST", "/_sim/jobs/h1/forget")).status).toBe(200);
    expect((await status(s, "h1")).status).toBe(404);
    expect((await call(s, "POST", "/_sim/jobs/h1/forget")).status).toBe(404);
  });
});

describe("payment provider", () => {
  it("sends Stripe-signed events and redelivers them on the redeliver call", async () => {
    const secret = "whsec_test_123";
    const s = await sim({ paymentApiKeys: ["pay-key"] });
    const r = await receiver();
    try {
      expect((await call(s, "POST", "/_sim/payment/send", { type: "x" })).status).toBe(409); // no webhook yet
      await call(s, "PUT", "/_sim/payment/webhook", { url: `${r.base}/webhooks/payment_provider`, secret });
      const sent = await call(s, "POST", "/_sim/payment/send", {
        id: "evt_1",
        type: "customer.subscription.updated",
      });
      expect(sent.body).toMatchObject({ id: expect.stringMatching(/^whdel_/), eventId: "evt_1" });
      expect(r.got).toHaveLength(1);

      const verify = (hit: (typeof r.got)[number]) => {
        const header = String(hit.headers["stripe-signature"]);
        const t = /t=(\d+)/.exec(header)?.[1];
        const v1 = /v1=([0-9a-f]{64})/.exec(header)?.[1];
        expect(Math.abs(Number(t) - Date.now() / 1000)).toBeLessThan(5);
        expect(v1).toBe(createHmac("sha256", secret).update(`${t}.${hit.body}`).digest("hex"));
      };
      verify(r.got[0]!);
      expect(JSON.parse(r.got[0]!.body)).toMatchObject({
        id: "evt_1",
        object: "event",
        type: "customer.subscription.updated",
      });

      const path = `/v1/webhooks/deliveries/${sent.body.id}/redeliver`;
      expect((await call(s, "POST", path, undefined, "Bearer wrong")).status).toBe(401);
      expect(
        (await call(s, "POST", "/v1/webhooks/deliveries/whdel_nope/redeliver", undefined, "Bearer pay-key"))
          .status,
      ).toBe(404);
      const again = await call(s, "POST", path, undefined, "Bearer pay-key");
      expect(again.body).toMatchObject({
        id: sent.body.id,
        eventId: "evt_1",
        redelivered: true,
        attempt: { ok: true },
      });
      expect(r.got).toHaveLength(2);
      expect(r.got[1]!.body).toBe(r.got[0]!.body);
      verify(r.got[1]!);
      expect(s.paymentDeliveries()[0]?.attempts.map((a) => a.redelivery)).toEqual([false, true]);
    } finally {
      await r.close();
    }
  });
});
