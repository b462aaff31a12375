// The GPU side reports delayTime and executionTime (ms) as its workers spent them: queue wait and
// cold start before a worker took the job, the worker's run after, adding up exactly, the same in
// /status, the cancel answer and the callback, for completed, failed, timed-out and cancelled jobs.
// These are the numbers usage is billed from.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { startSimulator, type Simulator, type SimulatorOptions } from "../../tools/simulator/server.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

// Real timers fire late on a busy machine, and one real ms is 100 simulated ms at this scale: the
// exact claims are equalities between what was reported and what the worker did; bounds against
// the configured durations only allow for that lateness.
const SCALE = 0.01;
const SLACK = 600;
const LATE = 10_000;

async function sim(opts: SimulatorOptions = {}): Promise<Simulator> {
  const s = await startSimulator({
    timeScale: SCALE,
    coldStartMs: 2000,
    executionMs: 3000,
    endpoints: [{ id: "ep", name: "media-render-timing", workersMax: 1, idleTimeout: 600 }],
    ...opts,
    faults: { honourClientId: true, ...opts.faults },
  });
  closers.push(() => s.close());
  return s;
}

/** A callback receiver: the last body per job id. */
async function receiver(): Promise<{ url: string; bodies: Map<string, Record<string, unknown>> }> {
  const bodies = new Map<string, Record<string, unknown>>();
  const server: Server = createServer((req, res) => {
    let text = "";
    req.on("data", (c: Buffer) => (text += c.toString("utf8")));
    req.on("end", () => {
      const body = JSON.parse(text) as Record<string, unknown>;
      bodies.set(String(body.id), body);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/cb`, bodies };
}

async function call(s: Simulator, method: "GET" | "POST", path: string, body?: unknown) {
  const res = await request(`${s.url}${path}`, {
    method,
    headers: {
      authorization: "Bearer sim-key",
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return (await res.body.json()) as Record<string, unknown> & {
    delayTime?: number;
    executionTime?: number;
    status: string;
  };
}

async function until<T>(fn: () => T | Promise<T>, ok: (v: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const ended = (s: Simulator, id: string) =>
  until(
    () => call(s, "GET", `/v2/ep/status/${id}`),
    (j) => ["COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED"].includes(j.status),
  );

/** /status, the job's timeline and its callback tell one story. */
function consistent(
  s: Simulator,
  status: { delayTime?: number; executionTime?: number },
  callback: Record<string, unknown> | undefined,
  id: string,
) {
  const t = s.getJob(id)?.timeline;
  if (t === undefined) throw new Error(`no job ${id}`);
  expect(Number.isInteger(status.delayTime) && Number.isInteger(status.executionTime)).toBe(true);
  if (t.started === undefined) {
    expect(status.delayTime).toBe((t.ended ?? Number.NaN) - t.submitted);
    expect(status.executionTime).toBe(0);
  } else {
    expect(status.delayTime).toBe(t.started - t.submitted);
    expect(status.executionTime).toBe((t.ended ?? Number.NaN) - t.started);
    expect((status.delayTime ?? 0) + (status.executionTime ?? 0)).toBe((t.ended ?? Number.NaN) - t.submitted);
  }
  expect(callback).toMatchObject({ delayTime: status.delayTime, executionTime: status.executionTime });
  return t;
}

describe("delayTime and executionTime", () => {
  it("a cold start, a queue wait behind another job and a warm start add up as the worker spent them", async () => {
    const s = await sim();
    const cb = await receiver();
    await call(s, "POST", "/v2/ep/run", { id: "a", input: {}, webhook: cb.url });
    await call(s, "POST", "/v2/ep/run", { id: "b", input: {}, webhook: cb.url });
    const a = await ended(s, "a");
    const b = await ended(s, "b");
    await until(
      () => cb.bodies.size,
      (n) => n === 2,
    );
    const ta = consistent(s, a, cb.bodies.get("a"), "a");
    const tb = consistent(s, b, cb.bodies.get("b"), "b");
    // a waited only for the worker to boot (2000 ms +-20%), then ran (3000 ms +-20%).
    expect(ta.coldStartMs).toBeGreaterThanOrEqual(1600);
    expect(ta.coldStartMs).toBeLessThanOrEqual(2400 + LATE);
    expect((a.delayTime ?? 0) - (ta.coldStartMs ?? 0)).toBeLessThanOrEqual(SLACK);
    expect(a.executionTime).toBeGreaterThanOrEqual(2400);
    expect(a.executionTime).toBeLessThanOrEqual(3600 + LATE);
    // b arrived with a: it waited for the same boot and for a's whole run on the only worker.
    expect(tb.started).toBeGreaterThanOrEqual(ta.ended ?? Number.NaN);
    // b's share of the same boot is a's, less the time between their arrivals.
    const sooner = (ta.coldStartMs ?? 0) - (tb.coldStartMs ?? 0);
    expect(sooner).toBeGreaterThanOrEqual(0);
    expect(sooner).toBeLessThanOrEqual(tb.submitted - ta.submitted);
    expect((tb.started ?? 0) - (ta.ended ?? 0)).toBeLessThanOrEqual(SLACK); // taken as soon as a ended

    // The worker is warm now: the next job waits for nothing.
    await call(s, "POST", "/v2/ep/run", { id: "c", input: {}, webhook: cb.url });
    const c = await ended(s, "c");
    await until(
      () => cb.bodies.size,
      (n) => n === 3,
    );
    expect(consistent(s, c, cb.bodies.get("c"), "c").coldStartMs).toBe(0);
    expect(c.delayTime).toBeLessThanOrEqual(SLACK);
  });

  it("a job cancelled in the queue reports the wait until the cancel and no execution", async () => {
    const s = await sim({ endpoints: [{ id: "ep", name: "media-render-idle", workersMax: 0 }] });
    const cb = await receiver();
    await call(s, "POST", "/v2/ep/run", { id: "q", input: {}, webhook: cb.url });
    await new Promise((r) => setTimeout(r, 50)); // 5000 simulated ms in the queue
    const cancelled = await call(s, "POST", "/v2/ep/cancel/q");
    expect(cancelled.status).toBe("CANCELLED");
    expect(cancelled.executionTime).toBe(0);
    expect(cancelled.delayTime).toBeGreaterThanOrEqual(5000);
    await until(
      () => cb.bodies.size,
      (n) => n === 1,
    );
    consistent(s, await call(s, "GET", "/v2/ep/status/q"), cb.bodies.get("q"), "q");
  });

  it("a job cancelled while running reports its run until the cancel", async () => {
    const s = await sim({ executionMs: 600_000 });
    const cb = await receiver();
    await call(s, "POST", "/v2/ep/run", { id: "r", input: {}, webhook: cb.url });
    await until(
      () => call(s, "GET", "/v2/ep/status/r"),
      (j) => j.status === "IN_PROGRESS",
    );
    await new Promise((r) => setTimeout(r, 40)); // about 4000 simulated ms of work
    const cancelled = await call(s, "POST", "/v2/ep/cancel/r");
    expect(cancelled.status).toBe("CANCELLED");
    expect(cancelled.executionTime).toBeGreaterThanOrEqual(3900);
    expect(cancelled.executionTime).toBeLessThan(600_000);
    await until(
      () => cb.bodies.size,
      (n) => n === 1,
    );
    consistent(s, await call(s, "GET", "/v2/ep/status/r"), cb.bodies.get("r"), "r");
  });

  it("failed and timed-out jobs report what their workers ran", async () => {
    const s = await sim({
      executionMs: 10_000,
      endpoints: [{ id: "ep", name: "media-render-timing", workersMax: 2, idleTimeout: 600 }],
    });
    const cb = await receiver();
    await call(s, "POST", "/v2/ep/run", {
      id: "slow",
      input: {},
      webhook: cb.url,
      policy: { executionTimeout: 5000 },
    });
    const timedOut = await ended(s, "slow");
    expect(timedOut.status).toBe("TIMED_OUT");
    expect(timedOut.executionTime).toBe(5000); // stopped at its timeout, however late the timer fired
    s.setFaults({ honourClientId: true, failJob: 1 });
    await call(s, "POST", "/v2/ep/run", { id: "bad", input: {}, webhook: cb.url });
    const failed = await ended(s, "bad");
    expect(failed.status).toBe("FAILED");
    expect(failed.executionTime).toBeGreaterThanOrEqual(8000);
    await until(
      () => cb.bodies.size,
      (n) => n === 2,
    );
    consistent(s, timedOut, cb.bodies.get("slow"), "slow");
    consistent(s, failed, cb.bodies.get("bad"), "bad");
  });
});
