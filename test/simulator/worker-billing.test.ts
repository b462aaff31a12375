// The GPU side bills as RunPod does: worker time from start (cold start included) until the
// worker fully stops after its idle timeout, rounded up to the second per worker run; active (min)
// workers around the clock; a per-second price per GPU type from the endpoint's configuration. It
// serves that bill as RunPod's serverless billing history (GET /v2/billing/serverless) and keeps
// the per-worker ledger for tests. Sparse isolated jobs cost far more worker-seconds than their
// rounded-up execution times add up to: what a product metering execution seconds does not recover.
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { startSimulator, type Simulator, type SimulatorOptions } from "../../tools/simulator/server.js";
import {
  billedSeconds,
  billedSecondsIn,
  priceFor,
  type WorkerRun,
} from "../../tools/simulator/worker-ledger.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

const SCALE = 0.01;

async function sim(opts: SimulatorOptions = {}): Promise<Simulator> {
  const s = await startSimulator({
    timeScale: SCALE,
    coldStartMs: 10_000,
    executionMs: 2_000,
    endpoints: [{ id: "ep", name: "media-render-billing", workersMax: 1, idleTimeout: 5 }],
    ...opts,
    faults: { honourClientId: true, ...opts.faults },
  });
  closers.push(() => s.close());
  return s;
}

async function call(s: Simulator, method: "GET" | "POST", path: string, body?: unknown, key = "sim-key") {
  const res = await request(`${s.url}${path}`, {
    method,
    headers: {
      ...(key !== "" && { authorization: `Bearer ${key}` }),
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

async function until<T>(fn: () => T | Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const allStopped = (s: Simulator) =>
  until(
    () => s.workerLedger("ep"),
    (runs) => runs.length > 0 && runs.every((r) => r.stoppedAt !== undefined),
  );

/** Runs one job on a cold endpoint and waits for its worker to stop: its status and the runs. */
async function isolatedJob(s: Simulator, id: string) {
  await call(s, "POST", "/v2/ep/run", { id, input: {} });
  const status = await until(
    async () => (await call(s, "GET", `/v2/ep/status/${id}`)).body,
    (b) => b.status === "COMPLETED",
  );
  await allStopped(s);
  return status as { executionTime: number; delayTime: number };
}

const run = (over: Partial<WorkerRun>): WorkerRun => ({
  workerId: "w",
  endpointId: "ep",
  gpuType: "AMPERE_16",
  gpuCount: 1,
  pricePerSecondMicros: 160,
  startedAt: 0,
  active: false,
  jobs: 0,
  ...over,
});

describe("rounding and prices (pure)", () => {
  it("a run is rounded up to the second once; its pieces across bucket edges add up to it", () => {
    const r = run({ startedAt: 500, stoppedAt: 17_501 }); // 17.001 s
    expect(billedSeconds(r, 99_999)).toBe(18);
    const edges = [0, 3_000, 3_100, 10_000, 17_500, 40_000];
    let sum = 0;
    for (let i = 0; i + 1 < edges.length; i++)
      sum += billedSecondsIn(r, edges[i] as number, edges[i + 1] as number, 99_999);
    expect(sum).toBe(18);
    // A running worker is billed so far.
    expect(billedSeconds(run({ startedAt: 0 }), 4_200)).toBe(5);
  });

  it("the price is the endpoint's first GPU pool's, per GPU", () => {
    const prices = { AMPERE_16: 160, ADA_24: 310 };
    expect(priceFor({ gpuIds: "ADA_24,AMPERE_16", gpuCount: 2 }, prices)).toEqual({
      gpuType: "ADA_24",
      gpuCount: 2,
      pricePerSecondMicros: 620,
    });
    expect(priceFor({ gpuIds: "UNKNOWN" }, prices).pricePerSecondMicros).toBe(160);
  });
});

describe("worker time as the provider bills it", () => {
  it("a cold start, one job and the idle tail are one run, billed whole and rounded up", async () => {
    const s = await sim();
    const status = await isolatedJob(s, "a");
    const runs = s.workerLedger("ep");
    expect(runs).toHaveLength(1);
    const [r] = runs as [(typeof runs)[number]];
    const lived = (r.stoppedAt ?? 0) - r.startedAt;
    // Cold start (10 s +-20%) + execution + idle timeout (5 s): far more than the job's own time.
    expect(lived).toBeGreaterThanOrEqual(status.executionTime + 8_000 + 5_000);
    expect(r.billedSeconds).toBe(Math.ceil(lived / 1000));
    expect(r.jobs).toBe(1);
    expect(r.active).toBe(false);
    expect(r.gpuType).toBe("AMPERE_16");
    expect(r.amountMicros).toBe(r.billedSeconds * 160);
  });

  it("active (min) workers are billed continuously, with no job at all", async () => {
    const s = await sim({
      endpoints: [{ id: "ep", name: "media-render-active", workersMin: 1, workersMax: 2, idleTimeout: 5 }],
    });
    const first = await until(
      () => s.workerLedger("ep"),
      (runs) => runs.length === 1,
    );
    expect(first[0]?.active).toBe(true);
    // 60 simulated seconds later (0.6 s real) the worker still runs, billed for all of it.
    await new Promise((r) => setTimeout(r, 600));
    const later = s.workerLedger("ep");
    expect(later).toHaveLength(1);
    expect(later[0]?.stoppedAt).toBeUndefined();
    expect(later[0]?.billedSeconds).toBeGreaterThanOrEqual(60);
    expect(later[0]?.jobs).toBe(0);
  });

  it("a worker is priced at the endpoint's GPU pool and count, as configured through REST v2", async () => {
    const s = await sim({ endpoints: [], gpuPricesMicros: { ADA_24: 300 } });
    const created = await call(s, "POST", "/v2/serverless", {
      name: "media-render-priced",
      type: "QUEUE",
      templateId: "tpl-1",
      gpu: { pools: ["ADA_24", "AMPERE_16"], count: 2 },
      workers: { min: 1, max: 1, idleTimeout: 5 },
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
    });
    expect(created.status).toBe(201);
    const runs = await until(
      () => s.workerLedger(created.body.id as string),
      (r) => r.length === 1,
    );
    expect(runs[0]).toMatchObject({
      gpuType: "ADA_24",
      gpuCount: 2,
      pricePerSecondMicros: 600,
      active: true,
    });
  });

  it("sparse isolated jobs cost the provider far more worker-seconds than ceil(executionTime)", async () => {
    const s = await sim({
      endpoints: [{ id: "ep", name: "media-render-sparse", workersMax: 1, idleTimeout: 5 }],
    });
    let metered = 0;
    const JOBS = 8;
    for (let i = 0; i < JOBS; i++) {
      const status = await isolatedJob(s, `sparse-${i}`);
      metered += Math.ceil(status.executionTime / 1000);
    }
    const runs = s.workerLedger("ep");
    expect(runs).toHaveLength(JOBS); // every job found the endpoint cold
    const billed = runs.reduce((n, r) => n + r.billedSeconds, 0);
    // Each job pays ~10 s of cold start and 5 s of idle tail for ~2 s of execution (the issue
    // measured 6.9x with a 10 s cold start): at least 5x here, whatever the machine's lateness.
    expect(billed).toBeGreaterThanOrEqual(5 * metered);

    // A saturated burst on the same endpoint keeps one warm worker busy: close to 1x.
    const before = billed;
    const BURST = 12;
    for (let i = 0; i < BURST; i++) await call(s, "POST", "/v2/ep/run", { id: `burst-${i}`, input: {} });
    let burstMetered = 0;
    for (let i = 0; i < BURST; i++) {
      const st = await until(
        async () => (await call(s, "GET", `/v2/ep/status/burst-${i}`)).body,
        (b) => b.status === "COMPLETED",
      );
      burstMetered += Math.ceil((st.executionTime as number) / 1000);
    }
    await allStopped(s);
    const burstBilled = s.workerLedger("ep").reduce((n, r) => n + r.billedSeconds, 0) - before;
    expect(burstBilled / burstMetered).toBeLessThan(2);
  });
});

describe("GET /v2/billing/serverless", () => {
  it("answers RunPod's records and metadata, amounts from the ledger, and takes an endpoint filter", async () => {
    const s = await sim({
      endpoints: [
        { id: "ep", name: "media-render-history", workersMax: 1, idleTimeout: 5 },
        { id: "other", name: "media-render-other", workersMax: 1, idleTimeout: 5 },
      ],
    });
    s.setEndpoint({ id: "other", workersMin: 1 });
    await isolatedJob(s, "h1");
    const { status, body } = await call(s, "GET", "/v2/billing/serverless?bucketSize=hour&lastN=2");
    expect(status).toBe(200);
    const records = body.records as Array<Record<string, unknown>>;
    const meta = body.metadata as Record<string, unknown> & { query: Record<string, unknown> };
    expect(meta.query).toMatchObject({ bucketSize: "hour", serverlessId: null });
    expect(meta.uniqueServerlessCount).toBe(2);
    expect(meta.recordCount).toBe(records.length);
    for (const r of records) {
      expect(Object.keys(r).sort()).toEqual(
        [
          "cpuAmount",
          "diskAmount",
          "endTime",
          "feeAmount",
          "gpuAmount",
          "serverlessId",
          "startTime",
          "totalAmount",
        ].sort(),
      );
      expect(Date.parse(r.endTime as string) - Date.parse(r.startTime as string)).toBe(3_600_000);
      expect(new Date(r.startTime as string).getUTCMinutes()).toBe(0);
    }
    // The finished endpoint's buckets add up to its ledger exactly (USD of integer micro-units).
    const epMicros = s.workerLedger("ep").reduce((n, r) => n + r.amountMicros, 0);
    const epRecords = records.filter((r) => r.serverlessId === "ep");
    const epSum = Math.round(epRecords.reduce((n, r) => n + (r.totalAmount as number), 0) * 1e6);
    expect(epSum).toBe(epMicros);
    expect(epMicros).toBeGreaterThan(0);

    const one = await call(s, "GET", "/v2/billing/serverless?bucketSize=day&serverlessId=ep");
    expect(one.status).toBe(200);
    const oneRecords = one.body.records as Array<Record<string, unknown>>;
    expect(oneRecords.length).toBeGreaterThan(0);
    expect(oneRecords.every((r) => r.serverlessId === "ep")).toBe(true);
    expect((one.body.metadata as { query: Record<string, unknown> }).query.serverlessId).toBe("ep");
    const totals = (one.body.metadata as { totals: { totalAmount: number } }).totals;
    expect(Math.round(totals.totalAmount * 1e6)).toBe(epMicros);
  });

  it("snaps startTime down and endTime up to bucket edges", async () => {
    const s = await sim();
    const { status, body } = await call(
      s,
      "GET",
      "/v2/billing/serverless?bucketSize=day&startTime=2026-06-01T05:00:00Z&endTime=2026-06-02T01:00:00Z",
    );
    expect(status).toBe(200);
    expect((body.metadata as { query: Record<string, unknown> }).query).toMatchObject({
      startTime: "2026-06-01T00:00:00Z",
      endTime: "2026-06-03T00:00:00Z",
      bucketSize: "day",
    });
  });

  it("lastN is the last N buckets, the current one included, aligned to bucket edges (weeks start on Monday)", async () => {
    const s = await sim({ timeScale: 1 }); // the provider's clock is the real one
    const window = async (q: string) =>
      (
        (await call(s, "GET", `/v2/billing/serverless?${q}`)).body.metadata as {
          query: Record<string, string>;
        }
      ).query as { startTime: string; endTime: string };
    const now = Date.now();
    const day = await window("bucketSize=day&lastN=3");
    const today = Date.UTC(
      new Date(now).getUTCFullYear(),
      new Date(now).getUTCMonth(),
      new Date(now).getUTCDate(),
    );
    expect(Date.parse(day.endTime)).toBe(today + 86_400_000);
    expect(Date.parse(day.startTime)).toBe(today - 2 * 86_400_000);
    const week = await window("bucketSize=week&lastN=1");
    expect(new Date(week.startTime).getUTCDay()).toBe(1);
    expect(Date.parse(week.endTime) - Date.parse(week.startTime)).toBe(7 * 86_400_000);
    expect(Date.parse(week.startTime)).toBeLessThanOrEqual(now);
    const month = await window("bucketSize=month&lastN=2");
    expect(new Date(month.startTime).getUTCDate()).toBe(1);
    expect(new Date(month.endTime).getUTCDate()).toBe(1);
  });

  it("refuses a request without a bearer key (401) and a bad query (400), RFC 9457 problems", async () => {
    const s = await sim();
    const anon = await call(s, "GET", "/v2/billing/serverless", undefined, "");
    expect(anon.status).toBe(401);
    expect(anon.body).toMatchObject({ status: 401, detail: "missing bearer token" });
    expect((await call(s, "GET", "/v2/billing/serverless", undefined, "wrong")).status).toBe(401);
    for (const q of [
      "bucketSize=minute",
      "lastN=0",
      "lastN=3&startTime=2026-06-01T00:00:00Z",
      "startTime=yesterday",
      "startTime=2026-06-02T00:00:00Z&endTime=2026-06-01T00:00:00Z",
    ]) {
      const bad = await call(s, "GET", `/v2/billing/serverless?${q}`);
      expect(bad.status, q).toBe(400);
      expect(bad.body).toMatchObject({ title: "Bad Request", status: 400 });
    }
  });
});
