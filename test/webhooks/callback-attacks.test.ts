// The GPU callback route as an attacker uses it, over real HTTP, against the real control plane and
// the provider simulator: a leaked URL of a finished job with a huge body, concurrent callbacks for
// one job, an expired URL, a rotated secret, a callback steering an unconfirmed submission to
// another tenant's provider job, a hint id that is a path, an output nested 5,000 deep. No
// controller runs: every change seen is the sidecar's.
import { randomBytes } from "node:crypto";
import { request as httpRequest, type ClientRequest } from "node:http";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callbackExpiry, callbackUrl } from "../../src/callback/token.js";
import type { Env } from "../../src/config/env.js";
import type { MediaJob } from "../../src/crds/index.js";
import { KubeApi } from "../../src/k8s/api.js";
import { isProviderError } from "../../src/provider/index.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { startWebhookServer, type RunningWebhookServer } from "../../src/webhooks/server.js";
import { CallbackJobs, simulatorClient, targetOf } from "../support/callbacks.js";
import { createTestNamespace, eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { startTestSidecar, startTestSimulator, testEnv, testLogger, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let otherNs = "";
let env: Env;
let sim: Simulator;
let server: RunningWebhookServer;
let jobs: CallbackJobs;
let tenantB: CallbackJobs;
const uid = () => randomBytes(4).toString("hex");
const job = (name: string, namespace = ns) => api.get<MediaJob>("mediajobs", namespace, name);

async function callback(url: string, body: unknown) {
  const res = await request(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, json: JSON.parse(text) as Record<string, unknown> };
}

interface Opened {
  req: ClientRequest;
  /** The answer, whenever it comes (before the body is complete, if the server does not wait). */
  answer: Promise<{ status: number; headers: Record<string, unknown>; json: unknown }>;
  /** Bytes of the body written so far. */
  written: () => number;
}

/** A POST whose headers announce `length` bytes, of which only `first` are sent now. */
function open(url: string, length: number, first: Buffer): Opened {
  let written = 0;
  const req = httpRequest(url, {
    method: "POST",
    headers: { "content-type": "application/json", "content-length": String(length) },
    agent: false,
  });
  const answer = new Promise<{ status: number; headers: Record<string, unknown>; json: unknown }>(
    (resolve, reject) => {
      req.on("response", (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            json: text ? JSON.parse(text) : undefined,
          }),
        );
      });
      req.on("error", reject);
    },
  );
  answer.catch(() => undefined);
  req.flushHeaders();
  req.write(first);
  written += first.length;
  return { req, answer, written: () => written };
}

const within = <T>(p: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([
    p,
    new Promise<T>((_, reject) =>
      setTimeout(() => reject(new Error(`no answer within ${ms} ms: ${what}`)), ms),
    ),
  ]);

/** `[{},{},...]` of `bytes` bytes: the cheapest body to make a JSON.parse allocate millions of objects. */
function manyObjects(bytes: number): Buffer {
  const n = Math.floor((bytes - 2) / 3);
  return Buffer.from(`[${"{},".repeat(n - 1)}{}]`);
}

beforeAll(async () => {
  ns = await createTestNamespace(kc, "webhooks-cb-attacks");
  otherNs = await createTestNamespace(kc, "webhooks-cb-tenant-b");
  env = testEnv(ns, { WEBHOOKS_HOST: "127.0.0.1", WEBHOOKS_PORT: "0" });
  sim = await startTestSimulator();
  server = await startTestSidecar(api, env, ns, sim);
  const secret = env.CALLBACK_SECRET!;
  jobs = new CallbackJobs({ api, namespace: ns, secret, sim, sidecarUrl: () => server.url });
  tenantB = new CallbackJobs({ api, namespace: otherNs, secret, sim, sidecarUrl: () => server.url });
});

afterAll(async () => {
  await server?.close();
  await sim?.close();
});

describe("memory bounded by configuration, not by the caller", () => {
  it("answers a finished job's callback before its 16 MiB body is sent", async () => {
    const name = `done-${uid()}`;
    const { job: submitted } = await jobs.submitted(name);
    await waitForPhase(api, ns, name, "Completed");
    const body = manyObjects(16 * 1024 * 1024);
    const sent = open(jobs.url(submitted), body.length, body.subarray(0, 64 * 1024));
    try {
      // The server answers with 64 KiB of the 16 MiB sent: it did not wait for (or parse) the rest.
      const answer = await within(sent.answer, 5_000, "a finished job's callback with a body still to come");
      expect(answer).toMatchObject({ status: 200, json: { received: true, applied: false } });
      expect(sent.written()).toBe(64 * 1024);
    } finally {
      sent.req.destroy();
    }
  });

  it("reads an unconfirmed job's 16 MiB body for its id and status only, without holding it", async () => {
    const name = `big-${uid()}`;
    const { job: unconfirmed, providerJobId } = await jobs.submitted(name, { webhook: false, record: false });
    await jobs.finished(unconfirmed);
    // The genuine fields, then 16 MiB of objects a whole-body parse would allocate one by one.
    const tail = manyObjects(16 * 1024 * 1024).toString();
    const body = `{"id":${JSON.stringify(providerJobId)},"status":"COMPLETED","output":${tail}}`;
    let peak = 0;
    const base = process.memoryUsage().heapUsed;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed - base)), 5);
    try {
      const res = await callback(jobs.url(unconfirmed), body);
      expect(res).toMatchObject({ status: 200, json: { received: true, applied: true } });
    } finally {
      clearInterval(sampler);
    }
    // The body itself is 16 MiB in this process (the client's copy); a parsed tree of 5.6 million
    // objects would be hundreds more.
    expect(peak).toBeLessThan(128 * 1024 * 1024);
    const after = await job(name);
    expect(after?.status?.phase).toBe("Completed");
    expect(after?.status?.output).toEqual(sim.getJob(providerJobId)?.output);
  });

  it("answers a finished submission's duplicates from memory: one read of the job, however many come", async () => {
    // Whoever holds a leaked URL of a finished job can send it as often as they like: after the
    // first answer, neither the apiserver nor the route's budget pays for it.
    class CountingKube extends KubeApi {
      gets = 0;
      override rawJson<T>(method: string, path: string, ...rest: unknown[]): Promise<T> {
        if (method === "GET" && path.includes("/mediajobs/")) this.gets++;
        return (super.rawJson as (...a: unknown[]) => Promise<T>).call(this, method, path, ...rest);
      }
    }
    const counting = new CountingKube(kc);
    const own = await startTestSidecar(counting, env, ns, sim);
    try {
      const name = `dup-${uid()}`;
      const { job: done, providerJobId } = await jobs.submitted(name, { webhook: false });
      await jobs.finished(done);
      const url = jobs.url(done, own.url);
      const body = JSON.stringify({ id: providerJobId, status: "COMPLETED" });
      expect(await callback(url, body)).toMatchObject({ status: 200, json: { applied: true } });
      const reads = counting.gets;
      for (let i = 0; i < 50; i++)
        expect(await callback(url, body)).toMatchObject({ status: 200, json: { applied: false } });
      expect(counting.gets - reads).toBeLessThanOrEqual(1);
    } finally {
      await own.close();
    }
  });

  it("takes one callback per job at a time: a concurrent one is answered 429 with Retry-After", async () => {
    const name = `busy-${uid()}`;
    const { job: held, providerJobId } = await jobs.submitted(name, { hold: true, webhook: false });
    const url = jobs.url(held);
    const body = Buffer.from(JSON.stringify({ id: providerJobId, status: "COMPLETED" }));
    // The first callback is in flight: its headers are in, its body is not complete. Its socket
    // connects first and the server is given time to admit it: a second callback that overtook it
    // would take the job's slot itself, and the first would be the one answered 429.
    const first = open(url, body.length, body.subarray(0, 5));
    let firstAnswered = false;
    void first.answer.then(() => (firstAnswered = true));
    await new Promise<void>((resolve) =>
      first.req.once("socket", (s) => (s.connecting ? s.once("connect", () => resolve()) : resolve())),
    );
    await new Promise((r) => setTimeout(r, 300));
    try {
      const second = await eventually(
        async () => {
          if (firstAnswered) throw new Error("the first callback was answered before its body was complete");
          const res = await callback(url, body.toString());
          return res.status === 429 ? res : undefined;
        },
        // Spaced so the per-job rate limit (2/s) never answers first.
        { timeoutMs: 10_000, intervalMs: 500, message: "a concurrent callback to be answered 429" },
      );
      expect(second.headers["retry-after"]).toBe("10");
      expect(second.json).toEqual({ error: "too many requests" });
      first.req.end(body.subarray(5));
      expect(await within(first.answer, 5_000, "the first callback")).toMatchObject({
        status: 200,
        json: { received: true, applied: false },
      });
    } finally {
      first.req.destroy();
    }
    // Once the first is answered, the next one is taken.
    jobs.release(held);
    await jobs.finished(held);
    const next = await callback(url, body.toString());
    expect(next).toMatchObject({ status: 200, json: { received: true, applied: true } });
  });
});

describe("tokens that expire and keys that rotate", () => {
  it("accepts a URL until its expiry and refuses it after, asking the provider nothing", async () => {
    const name = `expiry-${uid()}`;
    const { job: submitted, providerJobId } = await jobs.submitted(name, { webhook: false });
    await jobs.finished(submitted);
    const nowS = Math.floor(Date.now() / 1000);
    const requests = sim.stats().requests;
    const expired = await callback(jobs.url(submitted, server.url, nowS - 1), {
      id: providerJobId,
      status: "COMPLETED",
    });
    expect(expired).toMatchObject({ status: 401, json: { error: "unauthorized" } });
    expect(sim.stats().requests).toBe(requests);
    expect((await job(name))?.metadata.resourceVersion).toBe(submitted.metadata.resourceVersion);
    // The same URL with a later expiry is the job's genuine callback.
    const valid = await callback(jobs.url(submitted, server.url, nowS + 60), {
      id: providerJobId,
      status: "COMPLETED",
    });
    expect(valid).toMatchObject({ status: 200, json: { received: true, applied: true } });
  });

  it("accepts URLs of the previous secret during a rotation, and no other secret's", async () => {
    const rotated = await startWebhookServer({
      api,
      env: {
        ...env,
        CALLBACK_SECRET: `rotated-callback-secret-${randomBytes(8).toString("hex")}`,
        CALLBACK_SECRET_PREVIOUS: env.CALLBACK_SECRET,
      },
      log: testLogger(),
      namespace: ns,
      provider: simulatorClient(sim),
      host: "127.0.0.1",
      port: 0,
    });
    try {
      const name = `rotation-${uid()}`;
      const { job: submitted, providerJobId } = await jobs.submitted(name, { webhook: false });
      await jobs.finished(submitted);
      const exp = { expiresAt: callbackExpiry(Date.now(), 600) };
      const stranger = callbackUrl(
        rotated.url,
        `some-other-secret-${randomBytes(8).toString("hex")}`,
        targetOf(submitted),
        exp,
      );
      expect((await callback(stranger, { id: providerJobId, status: "COMPLETED" })).status).toBe(401);
      // Minted before the rotation, with the secret that is now the previous one.
      const minted = jobs.url(submitted, rotated.url);
      expect(await callback(minted, { id: providerJobId, status: "COMPLETED" })).toMatchObject({
        status: 200,
        json: { received: true, applied: true },
      });
      expect((await job(name))?.status?.phase).toBe("Completed");
    } finally {
      await rotated.close();
    }
  });
});

describe("adoption that cannot be steered", () => {
  it("refuses to adopt for one job a provider job another tenant's MediaJob holds", async () => {
    // Tenant B's job ran on the same endpoint and its callback was applied.
    const b = `tenant-b-${uid()}`;
    const { providerJobId: bId } = await tenantB.submitted(b);
    await waitForPhase(api, otherNs, b, "Completed");
    // Tenant A's submission is unconfirmed (its /run answer was lost) and still running.
    const a = `tenant-a-${uid()}`;
    const { job: unconfirmed } = await jobs.submitted(a, { hold: true, record: false, webhook: false });
    const res = await callback(jobs.url(unconfirmed), { id: bId, status: "COMPLETED" });
    expect(res).toMatchObject({ status: 200, json: { received: true, applied: false } });
    const after = await job(a);
    expect(after?.metadata.resourceVersion).toBe(unconfirmed.metadata.resourceVersion);
    expect(after?.status?.phase).toBe("Processing");
    expect(after?.status?.providerJobId).toBeUndefined();
    jobs.release(unconfirmed);
  });

  it("refuses, on a replica that never saw it, a provider job a MediaJob of its watched scope holds", async () => {
    // Tenant B's job ran on the same endpoint; its id is recorded, its callback never came.
    const b = `tenant-b-${uid()}`;
    const { job: bJob, providerJobId: bId } = await tenantB.submitted(b, { webhook: false });
    await tenantB.finished(bJob);
    const sameNs = `same-ns-b-${uid()}`;
    const { job: sJob, providerJobId: sId } = await jobs.submitted(sameNs, { webhook: false });
    await jobs.finished(sJob);
    // Fresh replicas, one watching every namespace, one watching tenant A's only: neither has
    // seen a callback of B's jobs, so only the apiserver can say who holds them.
    const cases = [
      { sidecarEnv: { ...env, WATCH_NAMESPACE: undefined }, named: bId },
      { sidecarEnv: env, named: sId },
    ];
    for (const { sidecarEnv, named } of cases) {
      const fresh = await startTestSidecar(api, sidecarEnv, ns, sim);
      try {
        const a = `tenant-a-${uid()}`;
        const { job: unconfirmed } = await jobs.submitted(a, { hold: true, record: false, webhook: false });
        const res = await callback(jobs.url(unconfirmed, fresh.url), { id: named, status: "COMPLETED" });
        expect(res, named).toMatchObject({ status: 200, json: { received: true, applied: false } });
        const after = await job(a);
        expect(after?.metadata.resourceVersion).toBe(unconfirmed.metadata.resourceVersion);
        expect(after?.status?.providerJobId).toBeUndefined();
        const metrics = await (await request(`${fresh.url}/metrics`)).body.text();
        expect(metrics).toMatch(
          /media_orchestrator_webhooks_callback_adoptions_total\{outcome="refused_recorded_elsewhere"\} 1/,
        );
        jobs.release(unconfirmed);
      } finally {
        await fresh.close();
      }
    }
  });

  it("marks a result adopted on a callback's word: AdoptedByCallback, a Warning Event, a metric", async () => {
    // A provider job no MediaJob of the sidecar's scope holds (tenant B is outside it: another
    // installation on the same endpoint): nothing tells the two apart but the callback.
    const fresh = await startTestSidecar(api, env, ns, sim);
    try {
      const b = `tenant-b-${uid()}`;
      const { job: bJob, providerJobId: bId } = await tenantB.submitted(b, { webhook: false });
      const bOutput = (await tenantB.finished(bJob)).output;
      const a = `steered-${uid()}`;
      const { job: unconfirmed } = await jobs.submitted(a, { hold: true, record: false, webhook: false });
      const url = jobs.url(unconfirmed, fresh.url);
      expect(await callback(url, { id: bId, status: "COMPLETED" })).toMatchObject({
        status: 200,
        json: { received: true, applied: true },
      });
      const adopted = (await job(a))!;
      expect(adopted.status?.output).toEqual(bOutput);
      // Never silent: the condition, an Event and a metric say how the id was learnt.
      expect(adopted.status?.conditions?.find((c) => c.type === "Submitted")).toMatchObject({
        status: "True",
        reason: "AdoptedByCallback",
      });
      const events = await eventually(async () => {
        const mine = (await eventsOf(kc, ns, a)).filter((e) => e.reason === "AdoptedByCallback");
        return mine.length ? mine : undefined;
      });
      expect(events[0]?.type).toBe("Warning");
      jobs.release(unconfirmed);
      const metrics = await (await request(`${fresh.url}/metrics`)).body.text();
      expect(metrics).toMatch(/media_orchestrator_webhooks_callback_adoptions_total\{outcome="adopted"\} 1/);
    } finally {
      await fresh.close();
    }
  });

  it("refuses a hint id that is not a provider job id (`..`), before the provider is asked", async () => {
    const name = `dotdot-${uid()}`;
    const { job: unconfirmed } = await jobs.submitted(name, { hold: true, record: false, webhook: false });
    const requests = sim.stats().requests;
    for (const id of ["..", ".", "a/../..", "../health", "%2e%2e", " x"]) {
      const res = await callback(jobs.url(unconfirmed), { id, status: "COMPLETED" });
      expect(res.status, id).toBe(400);
    }
    expect(sim.stats().requests).toBe(requests);
    expect((await job(name))?.metadata.resourceVersion).toBe(unconfirmed.metadata.resourceVersion);
    // The provider client refuses such an id too, whoever calls it.
    const err = await simulatorClient(sim)
      .status(jobs.endpointId, "..")
      .catch((e: unknown) => e);
    expect(isProviderError(err, "BAD_REQUEST")).toBe(true);
    expect(sim.stats().requests).toBe(requests);
    jobs.release(unconfirmed);
  });
});

describe("outputs the status cannot hold", () => {
  it("completes a job whose output is nested 5,000 deep with a marker, never leaving it Processing", async () => {
    let deep: unknown = { leaf: true };
    for (let i = 0; i < 5000; i++) deep = { next: deep };
    // The simulator's outputs are plain; this provider answers the simulator's status with a deep one.
    const real = simulatorClient(sim);
    const deepProvider = {
      status: async (endpointId: string, id: string) => ({
        ...(await real.status(endpointId, id)),
        output: deep,
      }),
    };
    const s = await startWebhookServer({
      api,
      env,
      log: testLogger(),
      namespace: ns,
      provider: deepProvider,
      host: "127.0.0.1",
      port: 0,
    });
    try {
      const name = `deep-${uid()}`;
      const { job: submitted, providerJobId } = await jobs.submitted(name, { webhook: false });
      await jobs.finished(submitted);
      const res = await callback(jobs.url(submitted, s.url), { id: providerJobId, status: "COMPLETED" });
      expect(res).toMatchObject({ status: 200, json: { received: true, applied: true } });
      const done = await job(name);
      expect(done?.status?.phase).toBe("Completed");
      expect(done?.status?.output).toMatchObject({ truncated: true, maxDepth: 64 });
    } finally {
      await s.close();
    }
  });
});
