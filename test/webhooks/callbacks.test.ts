// POST /reports/gpu_provider over real HTTP against the real control plane. The jobs are put in
// the state the controller leaves them in after a submission (Processing, jobId fixed); no
// controller runs here, so every change seen is the sidecar's.
import { randomBytes } from "node:crypto";
import { pino } from "pino";
import { Registry } from "prom-client";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callbackToken, callbackUrl } from "../../src/callback/token.js";
import type { Env } from "../../src/config/env.js";
import { API_VERSION, type MediaJob, type MediaJobStatus } from "../../src/crds/index.js";
import { KubeApi } from "../../src/k8s/api.js";
import { startWebhookServer, type RunningWebhookServer } from "../../src/webhooks/server.js";
import { createTestNamespace, testKubeConfig } from "../support/kube.js";
import { testEnv } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let env: Env;
let server: RunningWebhookServer;
const registry = new Registry();
const uid = () => randomBytes(4).toString("hex");

/** A MediaJob as the controller leaves it after submitting it to the provider. */
async function processingJob(
  name: string,
  opts: { jobId?: string; maxAttempts?: number; status?: Partial<MediaJobStatus> } = {},
): Promise<MediaJob> {
  const created = await api.create<MediaJob>("mediajobs", ns, {
    apiVersion: API_VERSION,
    kind: "MediaJob",
    metadata: { name },
    spec: {
      workload: "asr",
      input: { audio: "a.wav" },
      ...(opts.maxAttempts ? { maxAttempts: opts.maxAttempts } : {}),
    },
  });
  const now = new Date().toISOString();
  return api.replaceStatus<MediaJob>("mediajobs", {
    ...created,
    status: {
      phase: "Processing",
      jobId: opts.jobId ?? `job-${name}`,
      attempts: 1,
      submittedAt: now,
      updatedAt: now,
      ...opts.status,
    },
  });
}

const job = (name: string) => api.get<MediaJob>("mediajobs", ns, name);
const urlFor = (name: string, jobId = `job-${name}`) =>
  callbackUrl(server.url, env.CALLBACK_SECRET!, { namespace: ns, name, jobId });

async function callback(url: string, body: unknown, contentType = "application/json") {
  const res = await request(url, {
    method: "POST",
    headers: { "content-type": contentType },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, json: JSON.parse(text) as Record<string, unknown> };
}

beforeAll(async () => {
  ns = await createTestNamespace(kc, "webhooks-callbacks");
  env = testEnv(ns);
  server = await startWebhookServer({
    api,
    env,
    log: pino({ level: "silent" }),
    namespace: ns,
    host: "127.0.0.1",
    port: 0,
    registry,
  });
});

afterAll(async () => {
  await server?.close();
});

/** The token with its last character changed: always a different token (a fixed "A" was not, 1 time in 16). */
function flipLastChar(token: string): string {
  const last = token.slice(-1);
  return `${token.slice(0, -1)}${last === "A" ? "B" : "A"}`;
}

describe("authentication", () => {
  it("answers 401 to a forged or altered callback URL and changes nothing", async () => {
    const name = `forged-${uid()}`;
    const before = await processingJob(name);
    const jobId = `job-${name}`;
    const good = new URL(urlFor(name));
    const body = { id: jobId, status: "COMPLETED", output: { text: "forged" } };
    const variants: Array<[string, (u: URL) => void]> = [
      ["no token", (u) => u.searchParams.delete("token")],
      ["empty token", (u) => u.searchParams.set("token", "")],
      ["token flipped", (u) => u.searchParams.set("token", flipLastChar(u.searchParams.get("token")!))],
      [
        "token of another secret",
        (u) => u.searchParams.set("token", callbackToken("guess", { namespace: ns, name, jobId })),
      ],
      [
        "token of another job",
        (u) =>
          u.searchParams.set(
            "token",
            callbackToken(env.CALLBACK_SECRET!, { namespace: ns, name: "other", jobId }),
          ),
      ],
      ["other job id", (u) => u.searchParams.set("job", "job-other")],
      ["other namespace", (u) => u.searchParams.set("ns", "default")],
      ["no job", (u) => u.searchParams.delete("job")],
      ["token twice", (u) => u.searchParams.append("token", u.searchParams.get("token")!)],
    ];
    for (const [label, mutate] of variants) {
      const u = new URL(good);
      mutate(u);
      const res = await callback(u.toString(), body);
      expect(res.status, label).toBe(401);
      expect(res.json, label).toEqual({ error: "unauthorized" });
    }
    // Unauthenticated requests are refused before the body is read: a malformed one is 401 too.
    const noToken = new URL(good);
    noToken.searchParams.delete("token");
    expect((await callback(noToken.toString(), "{not json")).status).toBe(401);
    expect((await job(name))?.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
  });

  it("refuses every callback when no callback secret is configured", async () => {
    const name = `nosecret-${uid()}`;
    await processingJob(name);
    const s = await startWebhookServer({
      api,
      env: { ...env, CALLBACK_SECRET: undefined },
      log: pino({ level: "silent" }),
      namespace: ns,
      host: "127.0.0.1",
      port: 0,
    });
    try {
      // A token computed with an empty key must not open the door.
      const u = callbackUrl(s.url, "", { namespace: ns, name, jobId: `job-${name}` });
      expect((await callback(u, { id: `job-${name}`, status: "COMPLETED" })).status).toBe(401);
    } finally {
      await s.close();
    }
    expect((await job(name))?.status?.phase).toBe("Processing");
  });
});

describe("validation and lookup", () => {
  it("answers 400 to malformed bodies with a valid token and changes nothing", async () => {
    const name = `malformed-${uid()}`;
    const before = await processingJob(name);
    const bodies = [
      "{not json",
      "[]",
      '"COMPLETED"',
      "null",
      "{}",
      JSON.stringify({ id: `job-${name}` }),
      JSON.stringify({ id: `job-${name}`, status: "EXPLODED" }),
      JSON.stringify({ id: "", status: "COMPLETED" }),
      JSON.stringify({ id: 7, status: "COMPLETED" }),
      '{"id":"x","status":"COMPLETED","__proto__":{"polluted":true}}',
    ];
    for (const body of bodies) {
      const res = await callback(urlFor(name), body);
      expect(res.status, body).toBe(400);
      expect(res.json).toEqual({ error: "bad request" });
    }
    expect((await job(name))?.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("answers 404 to a valid token for a job that does not exist, or no longer carries that id", async () => {
    const missing = `missing-${uid()}`;
    expect((await callback(urlFor(missing), { id: `job-${missing}`, status: "COMPLETED" })).status).toBe(404);
    const name = `recreated-${uid()}`;
    await processingJob(name, { jobId: "job-new-incarnation" });
    const stale = await callback(urlFor(name, "job-old-incarnation"), {
      id: "job-old-incarnation",
      status: "COMPLETED",
    });
    expect(stale.status).toBe(404);
    expect((await job(name))?.status?.phase).toBe("Processing");
  });
});

describe("applying provider results", () => {
  it("completes the job on COMPLETED, and duplicates and a late FAILED change nothing", async () => {
    const name = `done-${uid()}`;
    await processingJob(name);
    const jobId = `job-${name}`;
    const res = await callback(urlFor(name), {
      id: jobId,
      status: "COMPLETED",
      delayTime: 120,
      executionTime: 900,
      output: { transcript: "hello" },
      workerId: "w1",
      input: { audio: "a.wav" },
      webhook: urlFor(name),
    });
    expect(res).toEqual({ status: 200, json: { received: true, applied: true } });
    const done = await job(name);
    expect(done?.status).toMatchObject({
      phase: "Completed",
      output: { transcript: "hello" },
      providerJobId: jobId,
      jobId,
    });
    expect(done?.status?.completedAt).toBeTruthy();
    expect(done?.status?.conditions?.find((c) => c.type === "Succeeded")).toMatchObject({
      status: "True",
      reason: "Completed",
    });
    const dupes = await Promise.all(
      [1, 2, 3].map(() =>
        callback(urlFor(name), { id: jobId, status: "COMPLETED", output: { transcript: "other" } }),
      ),
    );
    expect(dupes.map((d) => d.json)).toEqual(Array(3).fill({ received: true, applied: false }));
    const late = await callback(urlFor(name), { id: jobId, status: "FAILED", error: "worker crashed" });
    expect(late).toEqual({ status: 200, json: { received: true, applied: false } });
    const after = await job(name);
    expect(after?.metadata.resourceVersion).toBe(done?.metadata.resourceVersion);
    expect(after?.status?.phase).toBe("Completed");
  });

  it("follows the retry policy on FAILED and TIMED_OUT", async () => {
    const retried = `retry-${uid()}`;
    await processingJob(retried, { maxAttempts: 2 });
    expect(
      (await callback(urlFor(retried), { id: `job-${retried}`, status: "FAILED", error: "oom" })).json,
    ).toEqual({
      received: true,
      applied: true,
    });
    const pending = await job(retried);
    expect(pending?.status).toMatchObject({ phase: "Pending", failures: 1, error: "FAILED: oom" });
    expect(pending?.status?.providerJobId).toBeUndefined();
    // The same FAILED again speaks of a submission that is over: nothing moves.
    expect((await callback(urlFor(retried), { id: `job-${retried}`, status: "FAILED" })).json.applied).toBe(
      false,
    );
    expect((await job(retried))?.status?.failures).toBe(1);

    const final = `final-${uid()}`;
    await processingJob(final);
    await callback(urlFor(final), { id: `job-${final}`, status: "TIMED_OUT" });
    expect((await job(final))?.status).toMatchObject({ phase: "Failed", failures: 1 });
    expect((await job(final))?.status?.error).toContain("TIMED_OUT");
  });

  it("ignores non-terminal statuses and results about an earlier submission", async () => {
    const name = `ooo-${uid()}`;
    const jobId = `job-${name}`;
    // The second submission (after one failure) runs as <jobId>-retry-1.
    const before = await processingJob(name, { maxAttempts: 3, status: { attempts: 2, failures: 1 } });
    for (const body of [
      { id: `${jobId}-retry-1`, status: "IN_PROGRESS" },
      { id: `${jobId}-retry-1`, status: "IN_QUEUE" },
      { id: jobId, status: "COMPLETED", output: { stale: true } },
    ]) {
      expect((await callback(urlFor(name), body)).json).toEqual({ received: true, applied: false });
    }
    expect((await job(name))?.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(
      (await callback(urlFor(name), { id: `${jobId}-retry-1`, status: "COMPLETED", output: { ok: 1 } })).json
        .applied,
    ).toBe(true);
    expect((await job(name))?.status).toMatchObject({ phase: "Completed", output: { ok: 1 } });
  });

  it("applies exactly one of many concurrent, contradictory callbacks", async () => {
    const conflicts = async () =>
      (
        (await registry.getSingleMetric("media_orchestrator_webhooks_patch_conflicts_total")?.get())
          ?.values ?? []
      ).find((v) => v.labels.resource === "mediajobs")?.value ?? 0;
    const before = await conflicts();
    // A burst only races when its requests overlap at the apiserver; on a loaded machine one may
    // run nearly in sequence. Every burst must apply exactly one callback; bursts repeat (on fresh
    // jobs) until one of them has gone through the conflict path.
    for (let round = 0; round < 8 && (await conflicts()) === before; round++) {
      const name = `race-${uid()}`;
      await processingJob(name);
      const jobId = `job-${name}`;
      const bodies = Array.from({ length: 16 }, (_, i) =>
        i % 2
          ? { id: jobId, status: "COMPLETED", output: { n: i } }
          : { id: jobId, status: "FAILED", error: `e${i}` },
      );
      const answers = await Promise.all(bodies.map((b) => callback(urlFor(name), b)));
      expect(answers.every((a) => a.status === 200)).toBe(true);
      const winners = answers.flatMap((a, i) => (a.json.applied ? [bodies[i]!] : []));
      expect(winners).toHaveLength(1);
      const final = await job(name);
      const w = winners[0]!;
      if (w.status === "COMPLETED")
        expect(final?.status).toMatchObject({ phase: "Completed", output: w.output });
      else expect(final?.status).toMatchObject({ phase: "Failed", error: `FAILED: ${w.error}` });
    }
    expect(await conflicts()).toBeGreaterThan(before);
  });
});
