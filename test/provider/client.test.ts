import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { pino } from "pino";
import { request } from "undici";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  GpuProviderClient,
  ProviderError,
  TERMINAL_STATUSES,
  type GpuProviderClientOptions,
  type ProviderErrorCode,
} from "../../src/provider/index.js";
import { startSimulator, type Simulator } from "../../tools/simulator/server.js";

// The client against the simulator over real HTTP on 127.0.0.1, one case per error and fault.

const KEY = "rp_TESTKEY_5f1c0a9e7d3b4c2a";
const SUSPENDED_KEY = "rp_SUSPENDED_0b9c8d7e6f";
const EP = "ep-asr-test";

const logLines: string[] = [];
const logger = pino(
  { level: "debug" },
  new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(chunk.toString());
      done();
    },
  }),
);
const errorsSeen: unknown[] = [];

let sim: Simulator;

beforeEach(async () => {
  sim = await startSimulator({
    apiKeys: [KEY],
    accountProblemKeys: [SUSPENDED_KEY],
    timeScale: 0.01,
    endpoints: [{ id: EP, name: "media-asr-test", workersMax: 2 }],
    // These tests address jobs by the id they sent; "jobs at a provider that ignores ids" below
    // runs in RunPod's own mode.
    faults: { honourClientId: true },
    logger,
  });
});
afterEach(() => sim.close());

function client(opts: Partial<GpuProviderClientOptions> = {}): GpuProviderClient {
  return new GpuProviderClient({
    apiUrl: sim.url,
    apiKey: KEY,
    logger,
    timeoutMs: 2_000,
    retryBudgetMs: 5_000,
    retryBaseDelayMs: 20,
    ...opts,
  });
}

async function expectCode(p: Promise<unknown>, code: ProviderErrorCode): Promise<ProviderError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  errorsSeen.push(err);
  expect(err).toBeInstanceOf(ProviderError);
  expect((err as ProviderError).code).toBe(code);
  return err as ProviderError;
}

async function waitFor<T>(fn: () => T | Promise<T>, ok: (v: T) => boolean, ms = 5_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Waits until a marker job's callback, held back twice the simulator's callback retry delay
 * (10 s simulated), has reached `r`. The simulator's timers fire in order, so a retry it had
 * scheduled before the marker (one more attempt of a delivery the test expects to be over) would
 * have been sent before it: once the marker is in, `r.got` holds every attempt there was.
 */
async function afterRetriesWouldHaveRun(r: { base: string; got: Array<{ url: string }> }): Promise<void> {
  sim.setFaults({ ...sim.faults(), delayCallbackMs: 20_000 });
  await client().submit(EP, { id: "marker", input: {}, webhook: `${r.base}/marker` });
  await waitFor(
    () => r.got.some((g) => g.url === "/marker"),
    (seen) => seen,
  );
}

/** A webhook receiver that records bodies and answers with the given statuses in turn, then 200. */
async function receiver(statuses: number[] = []) {
  const got: Array<{ url: string; body: string; headers: IncomingHttpHeaders }> = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      got.push({ url: req.url ?? "", body, headers: req.headers });
      res.statusCode = statuses[got.length - 1] ?? 200;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { got, base, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe("errors", () => {
  it("a wrong key is INVALID_API_KEY at once, on the job API and on the key check", async () => {
    const c = client({ apiKey: "rp_WRONG_KEY_abcdef" });
    await expectCode(c.status(EP, "x"), "INVALID_API_KEY");
    await expectCode(c.checkKey(), "INVALID_API_KEY");
    expect(sim.stats().requests).toBe(2); // neither was retried
  });

  it("a suspended account is ACCOUNT_PROBLEM on the key check and on submit", async () => {
    const c = client({ apiKey: SUSPENDED_KEY });
    await expectCode(c.checkKey(), "ACCOUNT_PROBLEM");
    await expectCode(c.submit(EP, { id: "j", input: {} }), "ACCOUNT_PROBLEM");
  });

  it("a 404 on an endpoint surfaces as ENDPOINT_NOT_FOUND, on a job as JOB_NOT_FOUND", async () => {
    const c = client();
    const e = await expectCode(c.submit("no-such-endpoint", { id: "j1", input: {} }), "ENDPOINT_NOT_FOUND");
    expect(e.status).toBe(404);
    await expectCode(c.status("no-such-endpoint", "j1"), "ENDPOINT_NOT_FOUND");
    await expectCode(c.health("no-such-endpoint"), "ENDPOINT_NOT_FOUND");
    await expectCode(c.status(EP, "no-such-job"), "JOB_NOT_FOUND");
    await expectCode(c.cancel(EP, "no-such-job"), "JOB_NOT_FOUND");
    expect(sim.stats().requests).toBe(5);
  });

  it("a rejected request (400) is BAD_REQUEST and not retried", async () => {
    const e = await expectCode(
      client().submit(EP, { id: "j", input: {}, policy: { ttl: 5 } }),
      "BAD_REQUEST",
    );
    expect(e.retryable).toBe(false);
    expect(sim.stats().requests).toBe(1);
  });

  it("429: waits as long as Retry-After says, then succeeds", async () => {
    sim.setFaults({ honourClientId: true, rateLimit: { requestsPerSecond: 1 } });
    const c = client();
    await c.health(EP);
    const started = Date.now();
    await c.health(EP);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(sim.stats().rateLimited).toBe(1);
    const retryLog = logLines.map((l) => JSON.parse(l)).find((l) => l.code === "RATE_LIMITED");
    expect(retryLog).toMatchObject({ op: "health", status: 429, delayMs: 1000 });
  });

  it("429 with a Retry-After beyond the budget fails fast with RATE_LIMITED and the wait", async () => {
    sim.setFaults({ honourClientId: true, rateLimit: { requestsPerSecond: 1 } });
    const c = client({ retryBudgetMs: 500 });
    await c.health(EP);
    const e = await expectCode(c.health(EP), "RATE_LIMITED");
    // It did not sit out the 1 s Retry-After: after it the bucket has a token again and a retry
    // would have succeeded. One refused request, no retry.
    expect(sim.stats()).toMatchObject({ requests: 2, rateLimited: 1 });
    expect(e.retryAfterMs).toBe(1000);
    expect(e.retryable).toBe(true);
  });

  it("5xx then success: retried with backoff", async () => {
    sim.setFaults({ honourClientId: true, serverErrorsFirst: 2 });
    const health = await client().health(EP);
    expect(health.jobs.completed).toBe(0);
    expect(sim.stats().serverErrors).toBe(2);
    expect(sim.stats().requests).toBe(3);
    expect(
      logLines.some((l) => l.includes('"code":"PROVIDER_UNAVAILABLE"') && l.includes('"status":503')),
    ).toBe(true);
  });

  it("5xx that never ends: PROVIDER_UNAVAILABLE within the budget", async () => {
    sim.setFaults({ honourClientId: true, serverErrors: 1 });
    const started = Date.now();
    const e = await expectCode(client({ retryBudgetMs: 400 }).health(EP), "PROVIDER_UNAVAILABLE");
    // The 400 ms budget plus one request in flight, with room for a loaded CI machine.
    expect(Date.now() - started).toBeLessThan(400 + 1_000);
    expect(e.retryable).toBe(true);
    expect(sim.stats().serverErrors).toBeGreaterThanOrEqual(2);
  });

  it("a provider that does not answer in time: PROVIDER_UNAVAILABLE after the timeout and budget", async () => {
    sim.setFaults({ honourClientId: true, responseDelay: { ms: 2_000 } });
    const started = Date.now();
    const e = await expectCode(
      client({ timeoutMs: 100, retryBudgetMs: 300 }).health(EP),
      "PROVIDER_UNAVAILABLE",
    );
    const took = Date.now() - started;
    expect(e.message).toMatch(/no answer within \d+ ms/);
    expect(took).toBeGreaterThanOrEqual(100);
    expect(took).toBeLessThan(300 + 1_000);
  });

  it("a slow answer is retried and the next fast one wins", async () => {
    sim.setFaults({ honourClientId: true, responseDelay: { ms: 2_000, first: 1 } });
    const health = await client({ timeoutMs: 100 }).health(EP);
    expect(health.workers.running).toBe(0);
    expect(sim.stats().requests).toBe(2);
  });

  it("a network error (nothing listening) is PROVIDER_UNAVAILABLE", async () => {
    const url = sim.url;
    await sim.close();
    await expectCode(
      new GpuProviderClient({ apiUrl: url, apiKey: KEY, retryBudgetMs: 200, retryBaseDelayMs: 10 }).health(
        EP,
      ),
      "PROVIDER_UNAVAILABLE",
    );
  });
});

describe("jobs (ids honoured, to address jobs by the id sent)", () => {
  it("runs a job to COMPLETED with a transcript, and reports it in health", async () => {
    const c = client();
    const submitted = await c.submit(EP, { id: "job-a", input: { audio_url: "s3://bucket/a.wav" } });
    expect(submitted).toEqual({ id: "job-a", status: "IN_QUEUE" });
    const done = await waitFor(
      () => c.status(EP, "job-a"),
      (j) => TERMINAL_STATUSES.has(j.status),
    );
    expect(done.status).toBe("COMPLETED");
    expect(done.output).toMatchObject({ transcript: expect.any(String), language: "en" });
    expect(done.delayTime).toBeGreaterThan(0);
    expect(done.executionTime).toBeGreaterThan(0);
    expect(done.workerId).toMatch(/^[a-z0-9]{14}$/);
    expect((await c.health(EP)).jobs.completed).toBe(1);
  });

  it("a duplicate submission returns the existing job and executes once", async () => {
    const c = client();
    const first = await c.submit(EP, { id: "dup-1", input: { audio_url: "a" } });
    const again = await Promise.all(
      [1, 2, 3].map(() => c.submit(EP, { id: "dup-1", input: { audio_url: "a" } })),
    );
    expect(again.map((r) => r.id)).toEqual(["dup-1", "dup-1", "dup-1"]);
    await waitFor(
      () => c.status(EP, "dup-1"),
      (j) => j.status === "COMPLETED",
    );
    const late = await c.submit(EP, { id: "dup-1", input: { audio_url: "a" } });
    expect(late).toEqual({ id: first.id, status: "COMPLETED" });
    expect(sim.executions("dup-1")).toBe(1);
    expect(sim.stats().duplicateSubmissions).toBe(4);
  });

  it("cancel ends a queued job CANCELLED", async () => {
    sim.setEndpoint({ id: EP, workersMax: 0 });
    const c = client();
    await c.submit(EP, { id: "to-cancel", input: {} });
    const cancelled = await c.cancel(EP, "to-cancel");
    expect(cancelled.status).toBe("CANCELLED");
    expect(sim.executions("to-cancel")).toBe(0);
  });

  it("keeps the provider's own id when the provider ignores ours (like RunPod)", async () => {
    sim.setFaults({ ignoreClientId: true });
    const c = client();
    const a = await c.submit(EP, { id: "ours-1", input: {} });
    const b = await c.submit(EP, { id: "ours-1", input: {} });
    expect(a.id).toMatch(/^[0-9a-f-]{36}-u1$/);
    expect(b.id).not.toBe(a.id);
    await expectCode(c.status(EP, "ours-1"), "JOB_NOT_FOUND");
    await waitFor(
      () => c.status(EP, a.id),
      (j) => j.status === "COMPLETED",
    );
    await waitFor(
      () => sim.executions("ours-1"),
      (n) => n === 2,
    );
  });
});

describe("submissions at a provider that ignores ids (RunPod)", () => {
  // RunPod ignores `id` on /run, so a second POST is a second billed run: /run is retried only
  // where the provider provably did not take the request.
  it("a 5xx on /run is not retried: one request, at most one execution, the error says it may be running", async () => {
    sim.setFaults({ serverErrors: 1 });
    const before = sim.stats().requests;
    const e = await expectCode(
      client({ retryBaseDelayMs: 5 }).submit(EP, {
        id: "five-1",
        input: {},
        webhook: "http://127.0.0.1:9/cb?job=five-1",
      }),
      "PROVIDER_UNAVAILABLE",
    );
    expect(e.mayHaveBeenAccepted).toBe(true);
    expect(sim.stats().requests - before).toBe(1);
    expect(sim.executions("five-1")).toBeLessThanOrEqual(1);
  });

  it("an answer lost after the job was accepted is not retried: the job runs exactly once", async () => {
    sim.setFaults({ lostRunAnswers: 1 });
    const e = await expectCode(
      client({ retryBaseDelayMs: 5 }).submit(EP, {
        id: "lost-1",
        input: {},
        webhook: "http://127.0.0.1:9/cb?job=lost-1",
      }),
      "PROVIDER_UNAVAILABLE",
    );
    expect(e.mayHaveBeenAccepted).toBe(true);
    expect(sim.stats().lostRunAnswers).toBe(1);
    sim.setFaults({});
    await waitFor(
      () => Promise.resolve(sim.executions("lost-1")),
      (n) => n === 1,
    );
    expect(sim.stats().submissions).toBe(1);
  });

  it("a 429 on /run is retried (the provider refused it) and the job runs once", async () => {
    sim.setFaults({ rateLimit: { requestsPerSecond: 1 } });
    const c = client({ retryBaseDelayMs: 5 });
    await c.health(EP); // spends the bucket's token
    const submitted = await c.submit(EP, {
      id: "rl-1",
      input: {},
      webhook: "http://127.0.0.1:9/cb?job=rl-1",
    });
    expect(sim.stats().rateLimited).toBeGreaterThanOrEqual(1);
    await waitFor(
      () => Promise.resolve(sim.executions("rl-1")),
      (n) => n === 1,
    );
    expect(submitted.id).not.toBe("rl-1");
    expect(sim.stats().submissions).toBe(1);
  });

  it("a timeout on /run is not retried and says the job may be running", async () => {
    sim.setFaults({ responseDelay: { ms: 2_000 } });
    const e = await expectCode(
      client({ timeoutMs: 100, retryBudgetMs: 5_000 }).submit(EP, { id: "slow-1", input: {} }),
      "PROVIDER_UNAVAILABLE",
    );
    expect(e.mayHaveBeenAccepted).toBe(true);
    expect(sim.stats().requests).toBe(1);
  });

  it("nothing listening: retried (never sent), and the error says the job is not running", async () => {
    const url = sim.url;
    await sim.close();
    const e = await expectCode(
      new GpuProviderClient({ apiUrl: url, apiKey: KEY, retryBudgetMs: 200, retryBaseDelayMs: 10 }).submit(
        EP,
        {
          id: "nobody",
          input: {},
        },
      ),
      "PROVIDER_UNAVAILABLE",
    );
    expect(e.mayHaveBeenAccepted).toBe(false);
  });
});

describe("callbacks (ids honoured, to address jobs by the id sent)", () => {
  it("posts the status object to the webhook URL exactly as given", async () => {
    const r = await receiver();
    try {
      const webhook = `${r.base}/reports/gpu_provider?job=cb-1&token=a%2Bb`;
      await client().submit(EP, { id: "cb-1", input: { audio_url: "x" }, webhook });
      await waitFor(
        () => r.got.length,
        (n) => n === 1,
      );
      const [hit] = r.got;
      expect(hit?.url).toBe("/reports/gpu_provider?job=cb-1&token=a%2Bb");
      expect(hit?.headers["content-type"]).toBe("application/json");
      expect(JSON.parse(hit?.body ?? "")).toMatchObject({ id: "cb-1", status: "COMPLETED", webhook });
    } finally {
      await r.close();
    }
  });

  it("dropped callbacks never arrive (counts as configured)", async () => {
    sim.setFaults({ honourClientId: true, dropCallback: 1 });
    const r = await receiver();
    try {
      const c = client();
      for (const id of ["d1", "d2", "d3"])
        await c.submit(EP, { id, input: {}, webhook: `${r.base}/cb?job=${id}` });
      await waitFor(
        () => sim.droppedCallbacks().length,
        (n) => n === 3,
      );
      // A drop is decided when the job ends, before anything is scheduled: all three are decided.
      expect(r.got).toHaveLength(0);
      expect(sim.deliveries()).toHaveLength(0);
      expect(sim.droppedCallbacks().sort()).toEqual(["d1", "d2", "d3"]);
    } finally {
      await r.close();
    }
  });

  it("duplicated callbacks arrive twice each, with the same body", async () => {
    sim.setFaults({ honourClientId: true, duplicateCallback: 1 });
    const r = await receiver();
    try {
      const c = client();
      for (const id of ["u1", "u2"]) await c.submit(EP, { id, input: {}, webhook: `${r.base}/cb?job=${id}` });
      // Each copy is retried until it succeeds: once four deliveries succeeded, none is left to send.
      await waitFor(
        () => sim.deliveries().filter((d) => d.ok).length,
        (n) => n >= 4,
      );
      expect(r.got).toHaveLength(4);
      for (const id of ["u1", "u2"]) {
        const bodies = r.got.filter((g) => g.url === `/cb?job=${id}`).map((g) => g.body);
        expect(bodies).toHaveLength(2);
        expect(bodies[0]).toBe(bodies[1]);
      }
      expect(sim.deliveries().filter((d) => d.ok)).toHaveLength(4);
    } finally {
      await r.close();
    }
  });

  it("a failed delivery is retried: three attempts in all, 10 s (scaled) apart", async () => {
    const r = await receiver([500, 503, 500, 500]);
    try {
      await client().submit(EP, { id: "f1", input: {}, webhook: `${r.base}/cb` });
      await waitFor(
        () => sim.deliveries().length,
        (n) => n === 3,
      );
      await afterRetriesWouldHaveRun(r);
      const attempts = sim.deliveries().filter((d) => d.key === "f1");
      expect(attempts.map((d) => [d.attempt, d.httpStatus, d.ok])).toEqual([
        [1, 500, false],
        [2, 503, false],
        [3, 500, false],
      ]);
      expect((attempts[1]?.at ?? 0) - (attempts[0]?.at ?? 0)).toBeGreaterThanOrEqual(90);
      expect(r.got.filter((g) => g.url === "/cb")).toHaveLength(3);
    } finally {
      await r.close();
    }
  });

  it("a delivery that succeeds on the second attempt stops there", async () => {
    const r = await receiver([502]);
    try {
      await client().submit(EP, { id: "f2", input: {}, webhook: `${r.base}/cb` });
      await waitFor(
        () => sim.deliveries().filter((d) => d.ok).length,
        (n) => n === 1,
      );
      await afterRetriesWouldHaveRun(r);
      expect(
        sim
          .deliveries()
          .filter((d) => d.key === "f2")
          .map((d) => d.ok),
      ).toEqual([false, true]);
      expect(r.got.filter((g) => g.url === "/cb")).toHaveLength(2);
    } finally {
      await r.close();
    }
  });
});

describe("management over GraphQL (GPU_PROVIDER_MANAGEMENT_API=graphql)", () => {
  const gql = (opts: Partial<GpuProviderClientOptions> = {}) => client({ managementApi: "graphql", ...opts });

  it("checkKey returns the account id", async () => {
    const { accountId, via } = await gql().checkKey();
    expect(via).toBe("graphql");
    expect(accountId).toMatch(/^user_[0-9a-f]{20}$/);
    expect(accountId).not.toContain(KEY);
  });

  it("updateEndpointWorkers changes workers and keeps every other field (full replace done right)", async () => {
    const c = gql();
    const [ep] = await c.listEndpoints();
    expect(ep).toMatchObject({ id: EP, name: "media-asr-test", workersMin: 0, workersMax: 2 });
    await c.saveEndpoint({
      ...ep!,
      scalerValue: 7,
      locations: "US",
      networkVolumeIds: [{ networkVolumeId: "vol-1" }],
    });
    const updated = await c.updateEndpointWorkers(EP, { workersMin: 1, workersMax: 4 });
    expect(updated).toMatchObject({
      id: EP,
      workersMin: 1,
      workersMax: 4,
      scalerValue: 7,
      locations: "US",
      templateId: "sim-asr-template",
      networkVolumeIds: [{ networkVolumeId: "vol-1" }],
    });
    expect(sim.getEndpoint(EP)).toMatchObject({ workersMin: 1, workersMax: 4, scalerValue: 7 });
  });

  it("the simulator's saveEndpoint really is a full replace: omitted fields reset", async () => {
    const c = gql();
    const [ep] = await c.listEndpoints();
    await c.saveEndpoint({ ...ep!, scalerValue: 9 });
    const partial = {
      query: "mutation($input: EndpointInput!) { saveEndpoint(input: $input) { id scalerValue workersMax } }",
      variables: {
        input: { id: EP, name: ep!.name, templateId: ep!.templateId, gpuIds: ep!.gpuIds, workersMax: 1 },
      },
    };
    const res = await request(`${sim.url}/graphql`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify(partial),
    });
    expect(await res.body.json()).toEqual({
      data: { saveEndpoint: { id: EP, scalerValue: 4, workersMax: 1 } },
    });
  });

  it("updateEndpointWorkers on an unknown endpoint is ENDPOINT_NOT_FOUND; min above max is BAD_REQUEST", async () => {
    await expectCode(gql().updateEndpointWorkers("nope", { workersMax: 1 }), "ENDPOINT_NOT_FOUND");
    await expectCode(gql().updateEndpointWorkers(EP, { workersMin: 5 }), "BAD_REQUEST");
    await expectCode(
      gql().saveEndpoint({ id: "nope", name: "x", workersMin: 0, workersMax: 0, idleTimeout: 5 }),
      "ENDPOINT_NOT_FOUND",
    );
  });

  it("management calls are retried through 5xx like job calls", async () => {
    sim.setFaults({ serverErrorsFirst: 2 });
    expect(await gql().listEndpoints()).toHaveLength(1);
    expect(sim.stats().serverErrors).toBe(2);
  });

  it("a retired GraphQL API is a 4xx error, not retried", async () => {
    sim.setFaults({ graphqlRetired: true });
    const before = sim.stats().requests;
    const err = await expectCode(gql().listEndpoints(), "BAD_REQUEST");
    expect(err.status).toBe(410);
    expect(sim.stats().requests - before).toBe(1);
  });
});

describe("management over REST v2 (the default)", () => {
  it("checkKey lists the endpoints and names no account; wrong and suspended keys are told apart", async () => {
    expect(await client().checkKey()).toEqual({ via: "rest" });
    await expectCode(client({ apiKey: "rp_WRONG_KEY_abcdef" }).checkKey(), "INVALID_API_KEY");
    await expectCode(client({ apiKey: SUSPENDED_KEY }).checkKey(), "ACCOUNT_PROBLEM");
  });

  it("a key check followed by a listing is one request; the next listing asks again", async () => {
    const c = client();
    const before = sim.stats().restRequests;
    await c.checkKey();
    expect(await c.listEndpoints()).toHaveLength(1);
    expect(sim.stats().restRequests - before).toBe(1);
    sim.setEndpoint({ id: EP, workersMax: 5 });
    expect((await c.listEndpoints())[0]).toMatchObject({ workersMax: 5 });
    expect(sim.stats().restRequests - before).toBe(2);
  });

  it("lists endpoints in the operator's terms (workers.min/max/idleTimeout, gpu.pools)", async () => {
    expect(await client().listEndpoints()).toEqual([
      expect.objectContaining({
        id: EP,
        name: "media-asr-test",
        workersMin: 0,
        workersMax: 2,
        idleTimeout: 5,
        gpuIds: "AMPERE_16",
        // scaling {type, queueDelay} read as GraphQL names it: what sizes the in-flight window.
        scalerType: "QUEUE_DELAY",
        scalerValue: 4,
        executionTimeoutMs: 600_000,
      }),
    ]);
    expect(await client().getEndpoint(EP)).toMatchObject({ id: EP, workersMax: 2 });
  });

  it("reads a REQUEST_COUNT scaler's value from scaling.requestCount", async () => {
    sim.setEndpoint({ id: EP, scalerType: "REQUEST_COUNT", scalerValue: 2 });
    try {
      expect((await client().listEndpoints())[0]).toMatchObject({
        scalerType: "REQUEST_COUNT",
        scalerValue: 2,
      });
    } finally {
      sim.setEndpoint({ id: EP, scalerType: "QUEUE_DELAY", scalerValue: 4 });
    }
  });

  it("updateEndpointWorkers is one PATCH that changes only what it names", async () => {
    await client({ managementApi: "graphql" }).saveEndpoint({
      ...(await client({ managementApi: "graphql" }).listEndpoints())[0]!,
      scalerValue: 7,
      workersMin: 1,
    });
    const before = sim.stats().requests;
    const updated = await client().updateEndpointWorkers(EP, { workersMax: 5 });
    expect(sim.stats().requests - before).toBe(1); // no read before the write
    expect(updated).toMatchObject({ id: EP, workersMin: 1, workersMax: 5, idleTimeout: 5 });
    expect(sim.getEndpoint(EP)).toMatchObject({ workersMin: 1, workersMax: 5, scalerValue: 7 });
  });

  it("unknown endpoint is ENDPOINT_NOT_FOUND; a rejected change is BAD_REQUEST naming the field", async () => {
    await expectCode(client().updateEndpointWorkers("nope", { workersMax: 1 }), "ENDPOINT_NOT_FOUND");
    await expectCode(client().getEndpoint("nope"), "ENDPOINT_NOT_FOUND");
    const err = await expectCode(client().updateEndpointWorkers(EP, { workersMin: 5 }), "BAD_REQUEST");
    expect(err.status).toBe(400);
    expect(err.message).toContain("$.workers.min");
    await expectCode(client().updateEndpointWorkers(EP, { workersMin: 3, workersMax: 1 }), "BAD_REQUEST");
    expect(sim.getEndpoint(EP)).toMatchObject({ workersMin: 0, workersMax: 2 });
  });

  it("creates an endpoint (201) from a template, GPU pools and workers", async () => {
    const created = await client().saveEndpoint({
      name: "media-tts-test",
      templateId: "tpl-tts",
      gpuIds: "ADA_24,AMPERE_24",
      gpuCount: 2,
      workersMin: 0,
      workersMax: 4,
      idleTimeout: 30,
    } as unknown as Parameters<GpuProviderClient["saveEndpoint"]>[0]);
    expect(created).toMatchObject({
      name: "media-tts-test",
      gpuIds: "ADA_24,AMPERE_24",
      gpuCount: 2,
      workersMax: 4,
      idleTimeout: 30,
    });
    expect(sim.getEndpoint(created.id)).toMatchObject({
      name: "media-tts-test",
      workersMax: 4,
      idleTimeout: 30,
    });
    expect(await client().listEndpoints()).toHaveLength(2);
  });

  it("a create that fails ambiguously (5xx) is not retried: it may have taken effect", async () => {
    sim.setFaults({ serverErrors: 1 });
    const before = sim.stats().requests;
    await expectCode(
      client().management.createEndpoint({
        name: "media-render-test",
        templateId: "tpl",
        gpuIds: ["ADA_24"],
        workersMin: 0,
        workersMax: 1,
        idleTimeout: 5,
      }),
      "PROVIDER_UNAVAILABLE",
    );
    expect(sim.stats().requests - before).toBe(1);
  });

  it("reads and PATCHes are retried through 5xx", async () => {
    sim.setFaults({ serverErrorsFirst: 2 });
    expect(await client().updateEndpointWorkers(EP, { workersMax: 3 })).toMatchObject({ workersMax: 3 });
    expect(sim.stats().serverErrors).toBe(2);
  });

  it("keeps working when GraphQL is retired", async () => {
    sim.setFaults({ graphqlRetired: true });
    expect(await client().listEndpoints()).toHaveLength(1);
    expect(await client().updateEndpointWorkers(EP, { workersMax: 1 })).toMatchObject({ workersMax: 1 });
  });
});

describe("the CLI's key check (GraphQL first, REST when GraphQL is gone)", () => {
  it("answers over GraphQL with the account id while GraphQL is there", async () => {
    const r = await client().checkKeyAnyApi();
    expect(r).toMatchObject({ via: "graphql", accountId: expect.stringMatching(/^user_/) });
  });

  it("falls back to REST v2 when GraphQL is retired, and says why", async () => {
    sim.setFaults({ graphqlRetired: true });
    const r = await client().checkKeyAnyApi();
    expect(r.via).toBe("rest");
    expect(r.accountId).toBeUndefined();
    expect(r.graphqlProblem).toContain("HTTP 410");
  });

  it("does not fall back for a key GraphQL rejects", async () => {
    await expectCode(client({ apiKey: "rp_WRONG_KEY_abcdef" }).checkKeyAnyApi(), "INVALID_API_KEY");
    await expectCode(client({ apiKey: SUSPENDED_KEY }).checkKeyAnyApi(), "ACCOUNT_PROBLEM");
  });
});

afterAll(() => {
  // Whatever happened above, the key never reached a log line or an error.
  expect(logLines.length).toBeGreaterThan(0);
  for (const line of logLines) {
    expect(line).not.toContain(KEY);
    expect(line).not.toContain(SUSPENDED_KEY);
  }
  expect(errorsSeen.length).toBeGreaterThan(10);
  for (const err of errorsSeen) {
    const text = `${String(err)} ${(err as Error).stack ?? ""} ${JSON.stringify(err)}`;
    expect(text).not.toContain(KEY);
    expect(text).not.toContain(SUSPENDED_KEY);
  }
});
