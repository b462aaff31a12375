// POST /reports/gpu_provider over real HTTP, against the real control plane and the provider
// simulator. Jobs are put in the state the controller leaves them in when it submits (the
// submission intent, /run at the simulator with the callback URL as webhook, the provider's id);
// no controller runs here, so every change seen is the sidecar's. The body of a callback is only a
// hint: what is written is what the provider's status API confirms.
import { randomBytes } from "node:crypto";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callbackToken, callbackUrl, type CallbackTarget } from "../../src/callback/token.js";
import type { Env } from "../../src/config/env.js";
import type { MediaJob } from "../../src/crds/index.js";
import { KubeApi } from "../../src/k8s/api.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { startWebhookServer, type RunningWebhookServer } from "../../src/webhooks/server.js";
import { CallbackJobs, simulatorClient, targetOf } from "../support/callbacks.js";
import { createTestNamespace, eventually, testKubeConfig } from "../support/kube.js";
import { startTestSidecar, startTestSimulator, testEnv, testLogger, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let env: Env;
let sim: Simulator;
let server: RunningWebhookServer;
let jobs: CallbackJobs;
const uid = () => randomBytes(4).toString("hex");

const job = (name: string) => api.get<MediaJob>("mediajobs", ns, name);

async function callback(url: string, body: unknown, contentType = "application/json") {
  const res = await request(url, {
    method: "POST",
    headers: { "content-type": contentType },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, json: JSON.parse(text) as Record<string, unknown> };
}

/** A counter of the sidecar's /metrics, read over HTTP. */
async function metric(name: string, labels: string): Promise<number> {
  const res = await request(`${server.url}/metrics`);
  const text = await res.body.text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

const superseded = () =>
  metric(
    "media_orchestrator_webhooks_requests_total",
    'route="/reports/gpu_provider",outcome="superseded",code="401"',
  );

/** RunPod's callback attempts per job, and the simulator's default. */
const CALLBACK_ATTEMPTS = 3;

/** The simulator's callback attempts for one provider job, once it has stopped (a 2xx, or all attempts). */
const deliveries = (providerJobId: string) =>
  eventually(
    () => {
      const d = sim.deliveries().filter((x) => x.jobId === providerJobId);
      return d.some((x) => x.ok) || d.length >= CALLBACK_ATTEMPTS ? d : undefined;
    },
    { message: `the callback attempts for ${providerJobId}` },
  );

beforeAll(async () => {
  ns = await createTestNamespace(kc, "webhooks-callbacks");
  // Port 0: startTestSidecar listens where the environment says, and test files run side by side.
  env = testEnv(ns, { WEBHOOKS_HOST: "127.0.0.1", WEBHOOKS_PORT: "0" });
  // 8 s of simulated execution (80 ms real) is beyond the smallest executionTimeout the provider
  // accepts (5 s), so a job submitted with it always times out.
  sim = await startTestSimulator({ executionMs: 8_000 });
  server = await startTestSidecar(api, env, ns, sim);
  jobs = new CallbackJobs({
    api,
    namespace: ns,
    secret: env.CALLBACK_SECRET!,
    sim,
    sidecarUrl: () => server.url,
  });
});

afterAll(async () => {
  await server?.close();
  await sim?.close();
});

/** The token with its last character changed: always a different token (a fixed "A" was not, 1 time in 16). */
function flipLastChar(token: string): string {
  const last = token.slice(-1);
  return `${token.slice(0, -1)}${last === "A" ? "B" : "A"}`;
}

describe("authentication", () => {
  it("answers 401 to a forged or altered callback URL, asks the provider nothing and changes nothing", async () => {
    const name = `forged-${uid()}`;
    const { job: before, providerJobId } = await jobs.submitted(name, { webhook: false });
    await jobs.finished(before);
    const target = targetOf(before);
    const good = new URL(jobs.url(before));
    const body = { id: providerJobId, status: "COMPLETED", output: { text: "forged" } };
    const tokenOf = (secret: string, t: Partial<CallbackTarget>) =>
      callbackToken(secret, { ...target, ...t });
    const variants: Array<[string, (u: URL) => void]> = [
      ["no token", (u) => u.searchParams.delete("token")],
      ["empty token", (u) => u.searchParams.set("token", "")],
      ["token flipped", (u) => u.searchParams.set("token", flipLastChar(u.searchParams.get("token")!))],
      ["token of another secret", (u) => u.searchParams.set("token", tokenOf("guess", {}))],
      [
        "token of another job",
        (u) => u.searchParams.set("token", tokenOf(env.CALLBACK_SECRET!, { name: "other" })),
      ],
      ["other job id", (u) => u.searchParams.set("job", "job-other")],
      ["other namespace", (u) => u.searchParams.set("ns", "default")],
      ["other uid", (u) => u.searchParams.set("uid", "00000000-0000-0000-0000-000000000000")],
      ["other attempt", (u) => u.searchParams.set("attempt", "2")],
      ["other submission", (u) => u.searchParams.set("sub", "another-submission")],
      ["attempt not a number", (u) => u.searchParams.set("attempt", "1.0")],
      ["no job", (u) => u.searchParams.delete("job")],
      ["no uid", (u) => u.searchParams.delete("uid")],
      ["no submission", (u) => u.searchParams.delete("sub")],
      ["token twice", (u) => u.searchParams.append("token", u.searchParams.get("token")!)],
    ];
    const providerRequests = sim.stats().requests;
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
    expect(sim.stats().requests).toBe(providerRequests);
    expect((await job(name))?.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
  });

  it("refuses every callback when no callback secret is configured", async () => {
    const name = `nosecret-${uid()}`;
    const { job: submitted, providerJobId } = await jobs.submitted(name, { webhook: false });
    await jobs.finished(submitted);
    const s = await startWebhookServer({
      api,
      env: { ...env, CALLBACK_SECRET: undefined },
      log: testLogger(),
      namespace: ns,
      provider: simulatorClient(sim),
    });
    try {
      // A token computed with an empty key must not open the door.
      const u = callbackUrl(s.url, "", targetOf(submitted));
      expect((await callback(u, { id: providerJobId, status: "COMPLETED" })).status).toBe(401);
    } finally {
      await s.close();
    }
    expect((await job(name))?.status?.phase).toBe("Processing");
  });
});

describe("validation and lookup", () => {
  it("answers 400 to malformed bodies with a valid token and changes nothing", async () => {
    const name = `malformed-${uid()}`;
    const before = await jobs.intent(name);
    const providerRequests = sim.stats().requests;
    const bodies = [
      "{not json",
      "[]",
      '"COMPLETED"',
      "null",
      "{}",
      JSON.stringify({ id: "some-job-u1" }),
      JSON.stringify({ id: "some-job-u1", status: "EXPLODED" }),
      JSON.stringify({ id: "", status: "COMPLETED" }),
      JSON.stringify({ id: 7, status: "COMPLETED" }),
      '{"id":"x","status":"COMPLETED","__proto__":{"polluted":true}}',
    ];
    for (const body of bodies) {
      const res = await callback(jobs.url(before), body);
      expect(res.status, body).toBe(400);
      expect(res.json).toEqual({ error: "bad request" });
    }
    expect(sim.stats().requests).toBe(providerRequests);
    expect((await job(name))?.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("answers 404 to a valid token for a MediaJob that does not exist", async () => {
    const name = `missing-${uid()}`;
    const url = callbackUrl(server.url, env.CALLBACK_SECRET!, {
      namespace: ns,
      name,
      uid: "4b0f7c1e-0000-4000-8000-000000000000",
      jobId: "4b0f7c1e-0000-4000-8000-000000000000",
      attempt: 1,
      submission: "never-written-anywhere",
    });
    const res = await callback(url, { id: "some-job-u1", status: "COMPLETED" });
    expect(res).toEqual({ status: 404, json: { error: "not found" } });
  });

  it("answers 401 to the callback of an earlier attempt, and changes nothing", async () => {
    const name = `earlier-${uid()}`;
    const { job: first, providerJobId } = await jobs.submitted(name, { hold: true });
    const jobId = first.status!.jobId!;
    const firstUrl = jobs.url(first);
    // The job is reset and submitted again: its status now names attempt 2 and a new submission id.
    const second = await jobs.nextIntent(first);
    expect(second.status?.submission?.attempt).toBe(2);
    const refusedBefore = await superseded();
    const providerRequests = sim.stats().requests;
    // The first attempt ends: the provider delivers its callback (3 attempts, all refused).
    sim.releaseJob(jobId);
    const attempts = await deliveries(providerJobId);
    expect(attempts.map((d) => d.httpStatus)).toEqual([401, 401, 401]);
    // The same callback sent again by hand, with the provider's own status object: refused too.
    const late = await callback(firstUrl, sim.getJob(providerJobId));
    expect(late).toEqual({ status: 401, json: { error: "unauthorized" } });
    expect(await superseded()).toBe(refusedBefore + 4);
    expect(sim.stats().requests).toBe(providerRequests);
    const after = await job(name);
    expect(after?.metadata.resourceVersion).toBe(second.metadata.resourceVersion);
    expect(after?.status).toMatchObject({
      phase: "Processing",
      submission: { attempt: 2, state: "Sending" },
    });
    expect(after?.status?.providerJobId).toBeUndefined();
  });

  it("answers 401 to the callback of a MediaJob deleted and re-created under the same name", async () => {
    // Re-created and submitted anew (a new submission id), or restored from a backup with its spec
    // and status (the same job id and submission id): either way the object has a new uid.
    for (const restored of [false, true]) {
      const name = `recreated-${uid()}`;
      const spec = { id: `job-${name}` };
      const { job: old, providerJobId } = await jobs.submitted(name, { hold: true, spec });
      await api.delete("mediajobs", ns, name);
      await eventually(async () => (await job(name)) === undefined, { message: `${name} to be deleted` });
      const fresh = restored
        ? await api.replaceStatus<MediaJob>("mediajobs", {
            ...(await api.create<MediaJob>("mediajobs", ns, { ...old, metadata: { name } })),
            status: old.status,
          })
        : await jobs.intent(name, { spec });
      expect(fresh.metadata.uid).not.toBe(old.metadata.uid);
      expect(fresh.status?.submission?.id === old.status?.submission?.id).toBe(restored);
      const refusedBefore = await superseded();
      sim.releaseJob(old.status!.jobId!);
      const attempts = await deliveries(providerJobId);
      expect(
        attempts.map((d) => d.httpStatus),
        `restored: ${restored}`,
      ).toEqual([401, 401, 401]);
      expect(await superseded()).toBe(refusedBefore + CALLBACK_ATTEMPTS);
      const after = await job(name);
      expect(after?.metadata.resourceVersion).toBe(fresh.metadata.resourceVersion);
      expect(after?.status?.phase).toBe("Processing");
      expect(after?.status?.output).toBeUndefined();
    }
  });
});

describe("applying confirmed provider results", () => {
  it("completes the job with the provider's output; duplicates and a late FAILED change nothing", async () => {
    const name = `done-${uid()}`;
    const { job: submitted, providerJobId } = await jobs.submitted(name);
    const jobId = submitted.status!.jobId!;
    // The simulator delivers the callback itself.
    const done = await waitForPhase(api, ns, name, "Completed");
    const atProvider = await jobs.finished(submitted);
    expect(atProvider.status).toBe("COMPLETED");
    expect(done.status?.output).toEqual(atProvider.output);
    expect(done.status).toMatchObject({
      providerJobId,
      jobId,
      submission: { attempt: 1, state: "Accepted" },
    });
    expect(done.status?.completedAt).toBeTruthy();
    expect(done.status?.conditions?.find((c) => c.type === "Succeeded")).toMatchObject({
      status: "True",
      reason: "Completed",
    });
    expect(await deliveries(providerJobId)).toMatchObject([{ ok: true, httpStatus: 200 }]);
    const url = jobs.url(submitted);
    const dupes = await Promise.all(
      [1, 2, 3].map(() =>
        callback(url, { id: providerJobId, status: "COMPLETED", output: { transcript: "other" } }),
      ),
    );
    expect(dupes.map((d) => d.json)).toEqual(Array(3).fill({ received: true, applied: false }));
    const late = await callback(url, { id: providerJobId, status: "FAILED", error: "worker crashed" });
    expect(late).toEqual({ status: 200, json: { received: true, applied: false } });
    const after = await job(name);
    expect(after?.metadata.resourceVersion).toBe(done.metadata.resourceVersion);
    expect(after?.status?.phase).toBe("Completed");
  });

  it("costs one read and one write of the MediaJob", async () => {
    // Every Kubernetes call of the sidecar for this job, in order: the checks' read is the one the
    // write starts from (a second read would be another apiserver round trip per job).
    const calls: string[] = [];
    const counting = Object.create(api) as KubeApi;
    counting.get = (async (plural, namespace, name, opts) => {
      calls.push(`GET ${plural}/${name}`);
      return api.get(plural, namespace, name, opts);
    }) as KubeApi["get"];
    counting.replaceStatus = (async (plural, obj, opts) => {
      calls.push(`PUT ${plural}/${obj.metadata.name}/status`);
      return api.replaceStatus(plural, obj, opts);
    }) as KubeApi["replaceStatus"];
    const counted = await startTestSidecar(counting, env, ns, sim);
    try {
      const name = `one-read-${uid()}`;
      const { job: submitted, providerJobId } = await jobs.submitted(name, { webhook: false });
      await jobs.finished(submitted);
      const url = new URL(jobs.url(submitted));
      const res = await callback(`${counted.url}${url.pathname}${url.search}`, {
        id: providerJobId,
        status: "COMPLETED",
      });
      expect(res).toEqual({ status: 200, json: { received: true, applied: true } });
      expect((await job(name))?.status?.phase).toBe("Completed");
      expect(calls.filter((c) => c.includes(`/${name}`))).toEqual([
        `GET mediajobs/${name}`,
        `PUT mediajobs/${name}/status`,
      ]);
    } finally {
      await counted.close();
    }
  });

  it("never writes a forged body: the outcome written is the one the provider confirms", async () => {
    // The provider says IN_PROGRESS: a body claiming COMPLETED completes nothing.
    // A marker no provider output contains (a job's input, its name among it, can reappear there).
    const FORGED = "written-by-the-caller";
    const running = `running-${uid()}`;
    const { job: held, providerJobId } = await jobs.submitted(running, { hold: true });
    const forged = { id: providerJobId, status: "COMPLETED", output: { transcript: FORGED } };
    expect(await callback(jobs.url(held), forged)).toEqual({
      status: 200,
      json: { received: true, applied: false },
    });
    expect((await job(running))?.metadata.resourceVersion).toBe(held.metadata.resourceVersion);
    // When the job really ends, the provider's output is written, never the forged one.
    sim.releaseJob(held.status!.jobId!);
    const completed = await waitForPhase(api, ns, running, "Completed");
    const atProvider = await jobs.finished(held);
    expect(completed.status?.output).toEqual(atProvider.output);
    expect(JSON.stringify(completed.status)).not.toContain(FORGED);

    // The provider says COMPLETED with its own output: a body with another output, or another
    // status, still writes the provider's answer.
    for (const claim of [
      { status: "COMPLETED", output: { transcript: FORGED } },
      { status: "FAILED", error: FORGED },
    ]) {
      const name = `claimed-${uid()}`;
      const { job: quiet, providerJobId: id } = await jobs.submitted(name, { webhook: false });
      const provider = await jobs.finished(quiet);
      expect(provider.status).toBe("COMPLETED");
      const res = await callback(jobs.url(quiet), { id, ...claim });
      expect(res, claim.status).toEqual({ status: 200, json: { received: true, applied: true } });
      const after = await job(name);
      expect(after?.status?.phase).toBe("Completed");
      expect(after?.status?.output).toEqual(provider.output);
      expect(after?.status?.error).toBeUndefined();
      expect(JSON.stringify(after?.status)).not.toContain(FORGED);
    }
  });

  it("follows the retry policy on FAILED and TIMED_OUT", async () => {
    const retried = `retry-${uid()}`;
    sim.setFaults({ failJob: 1 });
    let submitted: MediaJob;
    try {
      ({ job: submitted } = await jobs.submitted(retried, { spec: { maxAttempts: 2 } }));
      await waitForPhase(api, ns, retried, "Pending");
    } finally {
      sim.setFaults({});
    }
    const failed = await jobs.finished(submitted);
    expect(failed.status).toBe("FAILED");
    const pending = await job(retried);
    expect(pending?.status).toMatchObject({
      phase: "Pending",
      failures: 1,
      error: `FAILED: ${failed.error}`,
    });
    expect(pending?.status?.providerJobId).toBeUndefined();
    expect(pending?.status?.submission).toBeUndefined();
    // The same FAILED again speaks of a submission that is over: refused, nothing moves.
    expect((await callback(jobs.url(submitted), failed)).status).toBe(401);
    expect((await job(retried))?.metadata.resourceVersion).toBe(pending?.metadata.resourceVersion);

    const final = `final-${uid()}`;
    await jobs.submitted(final, { policy: { executionTimeout: 5_000 } });
    const timedOut = await waitForPhase(api, ns, final, "Failed");
    expect(timedOut.status).toMatchObject({ phase: "Failed", failures: 1 });
    expect(timedOut.status?.error).toContain("TIMED_OUT");
  });

  it("ignores non-terminal statuses and results about another provider job", async () => {
    const name = `ooo-${uid()}`;
    // Attempt 1 ran to completion at the provider, but the job was reset and submitted again.
    const { job: first, providerJobId: firstId } = await jobs.submitted(name, { webhook: false });
    const jobId = first.status!.jobId!;
    await jobs.finished(first);
    const intent = await jobs.nextIntent(first);
    const secondId = await jobs.submit(intent, { hold: true });
    const before = await jobs.accept(intent, secondId);
    const url = jobs.url(before);
    for (const body of [
      { id: secondId, status: "IN_PROGRESS" },
      { id: secondId, status: "IN_QUEUE" },
      { id: firstId, status: "COMPLETED", output: { stale: true } },
    ]) {
      expect((await callback(url, body)).json, body.status).toEqual({ received: true, applied: false });
    }
    expect((await job(name))?.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    sim.releaseJob(jobId);
    const done = await waitForPhase(api, ns, name, "Completed");
    expect(done.status?.output).toEqual(sim.getJob(secondId)?.output);
    expect(done.status).toMatchObject({ providerJobId: secondId, submission: { attempt: 2 } });
  });

  it("adopts the callback of an unconfirmed submission: the provider's id comes from its status", async () => {
    // The intent is written and /run was called, but its answer never reached the controller.
    const name = `early-${uid()}`;
    const { job: unconfirmed, providerJobId } = await jobs.submitted(name, { hold: true, record: false });
    expect(unconfirmed.status?.providerJobId).toBeUndefined();
    const url = jobs.url(unconfirmed);
    // A job the provider does not know is not adopted.
    expect(await callback(url, { id: "8d1c43e0-made-up-u1", status: "COMPLETED", output: {} })).toEqual({
      status: 200,
      json: { received: true, applied: false },
    });
    expect((await job(name))?.metadata.resourceVersion).toBe(unconfirmed.metadata.resourceVersion);
    // Still running at the provider: the id is recorded, the job stays Processing.
    expect(await callback(url, { id: providerJobId, status: "COMPLETED", output: { forged: 1 } })).toEqual({
      status: 200,
      json: { received: true, applied: false },
    });
    const adopted = await job(name);
    expect(adopted?.status).toMatchObject({
      phase: "Processing",
      providerJobId,
      submission: { attempt: 1, state: "Accepted" },
    });
    expect(adopted?.status?.conditions?.find((c) => c.type === "Submitted")).toMatchObject({
      status: "True",
      message: `submitted as ${providerJobId}`,
    });

    // A callback that beats the controller's record of /run, for a finished job: adopted and applied.
    const fast = `early-done-${uid()}`;
    const { job: fastJob, providerJobId: fastId } = await jobs.submitted(fast, { record: false });
    const done = await waitForPhase(api, ns, fast, "Completed");
    expect(done.status).toMatchObject({ providerJobId: fastId, submission: { state: "Accepted" } });
    expect(done.status?.output).toEqual((await jobs.finished(fastJob)).output);
  });

  it("answers 503 while the provider's status API is unavailable; the retried callback applies", async () => {
    const name = `unavailable-${uid()}`;
    const { job: before, providerJobId } = await jobs.submitted(name, { webhook: false });
    const result = await jobs.finished(before);
    sim.setFaults({ serverErrors: 1 });
    try {
      const res = await callback(jobs.url(before), result);
      expect(res).toEqual({ status: 503, json: { error: "unavailable, retry later" } });
    } finally {
      sim.setFaults({});
    }
    expect((await job(name))?.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect((await callback(jobs.url(before), { id: providerJobId, status: "COMPLETED" })).json).toEqual({
      received: true,
      applied: true,
    });
    expect((await job(name))?.status?.output).toEqual(result.output);
  });

  it("applies exactly one of many concurrent, contradictory callbacks", async () => {
    // One replica takes one callback per job at a time: the others are answered 429 (RunPod
    // retries them). Replicas do not share that, so the race between them is settled by the
    // status write's resourceVersion: each burst spreads its callbacks over four replicas.
    const replicas = [
      server,
      ...(await Promise.all([1, 2, 3].map(() => startTestSidecar(api, env, ns, sim)))),
    ];
    const conflicts = async () => {
      let n = 0;
      for (const r of replicas) {
        const res = await request(`${r.url}/metrics`);
        const line = (await res.body.text())
          .split("\n")
          .find((l) =>
            l.startsWith('media_orchestrator_webhooks_patch_conflicts_total{resource="mediajobs"}'),
          );
        n += line ? Number(line.split(" ").at(-1)) : 0;
      }
      return n;
    };
    try {
      const before = await conflicts();
      // A burst only races when its requests overlap at the apiserver; on a loaded machine one may
      // run nearly in sequence. Every burst must apply exactly one callback; bursts repeat (on fresh
      // jobs) until one of them has gone through the conflict path.
      for (let round = 0; round < 8 && (await conflicts()) === before; round++) {
        const name = `race-${uid()}`;
        const { job: submitted, providerJobId } = await jobs.submitted(name, { webhook: false });
        const result = await jobs.finished(submitted);
        const bodies = Array.from({ length: 16 }, (_, i) =>
          i % 2
            ? { id: providerJobId, status: "COMPLETED", output: { n: i } }
            : { id: providerJobId, status: "FAILED", error: `e${i}` },
        );
        const path = new URL(jobs.url(submitted));
        const answers = await Promise.all(
          bodies.map((b, i) =>
            callback(`${replicas[i % replicas.length]!.url}${path.pathname}${path.search}`, b),
          ),
        );
        // Each is answered: 200, or 429 while another callback for the job is in flight there.
        expect(answers.every((a) => a.status === 200 || a.status === 429)).toBe(true);
        expect(answers.filter((a) => a.json.applied)).toHaveLength(1);
        // Whichever body won, the provider's result is what was written.
        const final = await job(name);
        expect(final?.status?.phase).toBe("Completed");
        expect(final?.status?.output).toEqual(result.output);
      }
      expect(await conflicts()).toBeGreaterThan(before);
    } finally {
      await Promise.all(replicas.slice(1).map((r) => r.close()));
    }
  });
});
