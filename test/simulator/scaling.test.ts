// The simulator's workers scale as RunPod's autoscalers do (QUEUE_DELAY, REQUEST_COUNT,
// policy.lowPriority), /health agrees with the workers, and /run's concurrency limit answers 429:
// all over real HTTP, as a RunPod client sees them.
import { PassThrough } from "node:stream";
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { scale } from "../../tools/simulator/scaler.js";
import { startSimulator, type Simulator, type SimulatorOptions } from "../../tools/simulator/server.js";

let sim: Simulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function start(opts: SimulatorOptions): Promise<Simulator> {
  sim = await startSimulator(opts);
  return sim;
}

async function call(method: "GET" | "POST", path: string, body?: unknown) {
  const res = await request(`${sim!.url}${path}`, {
    method,
    headers: { authorization: "Bearer sim-key", "content-type": "application/json" },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    headers: res.headers,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- bodies are checked field by field
    body: text === "" ? undefined : (JSON.parse(text) as any),
  };
}

const run = (ep: string, body: unknown = { input: {} }) => call("POST", `/v2/${ep}/run`, body);
const health = async (ep: string) => (await call("GET", `/v2/${ep}/health`)).body;
/** REST v2's worker summary: the only place initializing workers are counted. */
const workers = async (ep: string) => (await call("GET", `/v2/serverless/${ep}/workers`)).body.summary;

async function until<T>(fn: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("QUEUE_DELAY (RunPod's default scaler)", () => {
  it("starts one worker for the first job, adds the rest only once jobs have waited scalerValue seconds, up to workersMax", async () => {
    // timeScale 0.25: the 4 s threshold is 1 real second, a cold start 0.5 s, a job 3 s.
    await start({
      timeScale: 0.25,
      executionMs: 12_000,
      endpoints: [{ id: "qd", name: "media-render-qd", workersMax: 4, scalerValue: 4 }],
    });
    expect((await workers("qd")).total).toBe(0); // and the connection is warm
    const sent = Date.now();
    for (let i = 0; i < 6; i++) expect((await run("qd")).status).toBe(200);
    const early = await workers("qd");
    expect(Date.now() - sent).toBeLessThan(800);
    expect(early.total).toBe(1);

    await until(
      () => workers("qd"),
      (w) => w.total === 4,
    );
    // Not before the queue delay: the extra workers came for jobs that waited past 4 s (simulated).
    expect(Date.now() - sent).toBeGreaterThanOrEqual(1_000);
    const h = await until(
      () => health("qd"),
      (b) => b.workers.running === 4,
    );
    // /health agrees with the workers: each running worker has one job in progress, the rest queue.
    expect(h).toEqual({
      jobs: { completed: 0, failed: 0, inProgress: 4, inQueue: 2, retried: 0 },
      workers: { idle: 0, running: 4 },
    });
    // Never past workersMax, whatever the queue.
    expect((await workers("qd")).total).toBe(4);
  });
});

describe("REQUEST_COUNT", () => {
  it("runs ceil((inQueue + inProgress) / scalerValue) workers at once, and stops surplus idle workers without an idle timeout", async () => {
    await start({
      timeScale: 0.01,
      executionMs: 200_000,
      endpoints: [
        {
          id: "rc",
          name: "media-render-rc",
          workersMax: 10,
          idleTimeout: 3600,
          scalerType: "REQUEST_COUNT",
          scalerValue: 2,
        },
      ],
    });
    for (let i = 0; i < 5; i++) await run("rc");
    // ceil(5 / 2) = 3, at once: no queue delay to wait for.
    expect((await workers("rc")).total).toBe(3);
    for (let i = 0; i < 4; i++) await run("rc");
    expect((await workers("rc")).total).toBe(5); // ceil(9 / 2)
    const h = await until(
      () => health("rc"),
      (b) => b.workers.running === 5,
    );
    expect(h.jobs).toMatchObject({ inProgress: 5, inQueue: 4 });

    // Purging the queue leaves 5 jobs in progress: ceil(5 / 2) = 3 wanted, but running workers
    // are never stopped, so all 5 stay until their jobs end.
    expect((await call("POST", "/v2/rc/purge-queue")).body.removed).toBe(4);
    expect((await workers("rc")).total).toBe(5);
    // When the jobs end, the workers go at once although idleTimeout is an hour.
    await until(
      () => health("rc"),
      (b) => b.jobs.completed === 5,
    );
    await until(
      () => workers("rc"),
      (w) => w.total === 0,
      1_000,
    );
  });
});

describe("policy.lowPriority", () => {
  it("a low-priority job triggers no scaling; a worker that is up takes it", async () => {
    await start({
      timeScale: 0.01,
      endpoints: [{ id: "lp", name: "media-tts-lp", workersMax: 3, scalerValue: 1 }],
    });
    for (let i = 0; i < 3; i++) await run("lp", { input: {}, policy: { lowPriority: true } });
    // Well past the 1 s queue delay (10 real ms) and a cold start: still no worker.
    await new Promise((r) => setTimeout(r, 200));
    expect(await workers("lp")).toMatchObject({ total: 0 });
    expect((await health("lp")).jobs.inQueue).toBe(3);

    // A normal job starts a worker, which then drains the low-priority ones too.
    await run("lp");
    await until(
      () => health("lp"),
      (b) => b.jobs.completed === 4,
    );
  });

  it("answers 400 when lowPriority is not a boolean", async () => {
    await start({ endpoints: [{ id: "lp", name: "media-tts-lp" }] });
    const r = await run("lp", { input: {}, policy: { lowPriority: "yes" } });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatch(/lowPriority/);
  });
});

describe("/run concurrency: 200 requests under way per endpoint", () => {
  it("answers the 201st request under way with 429 and Retry-After, and takes requests again once answers went out", async () => {
    // One slow worker: the jobs queue (the queue-size 429 starts past 500 per worker).
    await start({
      executionMs: 600_000,
      endpoints: [
        { id: "c1", name: "media-render-c1", workersMax: 1 },
        { id: "c2", name: "media-render-c2", workersMax: 1 },
      ],
    });
    // 200 submissions whose bodies are still uploading: each is under way until it is answered.
    const bodies = Array.from({ length: 200 }, () => new PassThrough());
    const pending = bodies.map((body) =>
      request(`${sim!.url}/v2/c1/run`, {
        method: "POST",
        headers: { authorization: "Bearer sim-key", "content-type": "application/json" },
        body,
      }),
    );
    for (const b of bodies) b.write('{"input":');
    await until(
      async () => sim!.stats().requests,
      (n) => n >= 200,
    );
    const over = await run("c1");
    expect(over.status).toBe(429);
    expect(Number(over.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    // Limits are per endpoint.
    expect((await run("c2")).status).toBe(200);

    for (const b of bodies) b.end("{}}");
    const answers = await Promise.all(pending);
    for (const a of answers) await a.body.dump();
    expect(answers.map((a) => a.statusCode)).toEqual(Array(200).fill(200));
    expect((await run("c1")).status).toBe(200);
    const { jobs } = await health("c1");
    expect(jobs.inQueue + jobs.inProgress).toBe(201);
  });
});

describe("QUEUE_DELAY under both readings of RunPod's pages", () => {
  const base = {
    type: "QUEUE_DELAY" as const,
    value: 4,
    workersMin: 0,
    workersMax: 10,
    initializing: 0,
    idle: 0,
    running: 1,
  };
  const overdue = (n: number) => Array.from({ length: n }, () => ({ waitedMs: 5_000, lowPriority: false }));

  it("perOverdueJob (the default): one worker per job waiting past the threshold", () => {
    expect(scale({ ...base, queued: overdue(5) }).target).toBe(6);
  });

  it("onePerDelay (the earlier pages): one worker at a time, at most one per threshold period", () => {
    const first = scale({ ...base, queued: overdue(5), reading: "onePerDelay" });
    expect(first.target).toBe(2);
    // Just after that one was added: none more until the threshold has passed again.
    const soon = scale({
      ...base,
      running: 2,
      queued: overdue(5),
      reading: "onePerDelay",
      sinceLastAddMs: 1_000,
    });
    expect(soon.target).toBe(2);
    expect(soon.recheckInMs).toBe(3_001);
    const later = scale({
      ...base,
      running: 2,
      queued: overdue(5),
      reading: "onePerDelay",
      sinceLastAddMs: 4_000,
    });
    expect(later.target).toBe(3);
  });

  it("both start a worker for the first request on an endpoint with none", () => {
    for (const reading of ["perOverdueJob", "onePerDelay"] as const)
      expect(
        scale({
          ...base,
          running: 0,
          queued: [{ waitedMs: 0, lowPriority: false }],
          reading,
          sinceLastAddMs: 0,
        }).target,
      ).toBe(1);
  });

  it("onePerDelay over HTTP: a burst reaches workersMax one worker per threshold period", async () => {
    // timeScale 0.05: the 4 s threshold is 0.2 real seconds.
    await start({
      timeScale: 0.05,
      coldStartMs: 0,
      executionMs: 200_000,
      queueDelayReading: "onePerDelay",
      endpoints: [{ id: "od", name: "media-render-od", workersMax: 4, scalerValue: 4 }],
    });
    const sent = Date.now();
    for (let i = 0; i < 8; i++) expect((await run("od")).status).toBe(200);
    await until(
      () => workers("od"),
      (w) => w.total === 4,
    );
    // The first at once, then three more, one per 4 simulated seconds: at least 0.6 real seconds.
    expect(Date.now() - sent).toBeGreaterThanOrEqual(550);
  });
});

describe("crash-looping workers (the crashLoopWorkers fault)", () => {
  it("keep jobs IN_QUEUE while the worker summary shows them unhealthy; recovered, the jobs run", async () => {
    await start({
      timeScale: 0.01,
      coldStartMs: 1_000,
      executionMs: 1_000,
      faults: { crashLoopWorkers: true },
      endpoints: [{ id: "cl", name: "media-asr-cl", workersMax: 2 }],
    });
    const { body } = await run("cl");
    const summary = await until(
      () => workers("cl"),
      (w) => w.unhealthy > 0,
    );
    expect(summary.running + summary.idle).toBe(0);
    // Given time, restarting workers still take nothing.
    await new Promise((r) => setTimeout(r, 200));
    expect((await call("GET", `/v2/cl/status/${body.id}`)).body.status).toBe("IN_QUEUE");
    // They crash for a while, then recover.
    sim!.setFaults({});
    await until(
      async () => (await call("GET", `/v2/cl/status/${body.id}`)).body.status,
      (s) => s === "COMPLETED",
    );
  });
});
