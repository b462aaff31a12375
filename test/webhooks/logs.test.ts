// Every log line the sidecar writes, at trace level, while it handles good and bad deliveries:
// no webhook secret, callback secret, callback token, provider API key or signature may appear in
// any of them, and the reasons for refusals must.
import { randomBytes } from "node:crypto";
import { connect } from "node:net";
import { Writable } from "node:stream";
import { KubeConfig } from "@kubernetes/client-node";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callbackExpiry, callbackToken, callbackUrl, type CallbackTarget } from "../../src/callback/token.js";
import type { Env } from "../../src/config/env.js";
import { KubeApi } from "../../src/k8s/api.js";
import { createLogger } from "../../src/log.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { startWebhookServer, type RunningWebhookServer } from "../../src/webhooks/server.js";
import { signStripePayload } from "../../src/webhooks/signature.js";
import { CallbackJobs, simulatorClient, targetOf } from "../support/callbacks.js";
import { createTestNamespace, eventually, testKubeConfig } from "../support/kube.js";
import { startTestSimulator, testEnv } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const lines: string[] = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
    done();
  },
});
const log = createLogger("trace", "webhooks-log-test", sink);
const OLD = `whsec_rotating_${randomBytes(10).toString("hex")}`;
const PROVIDER_KEY = `provider_key_${randomBytes(10).toString("hex")}`;
let ns = "";
let env: Env;
let sim: Simulator;
let jobs: CallbackJobs;
let server: RunningWebhookServer;
let down: RunningWebhookServer;
/** Everything that must never be logged. */
const secrets: string[] = [];
const nowS = () => Math.floor(Date.now() / 1000);

async function post(url: string, body: string | Buffer, headers: Record<string, string> = {}) {
  const res = await request(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  await res.body.dump();
  return res.statusCode;
}

function signed(body: string, secret: string, t = nowS()) {
  const header = signStripePayload(body, secret, t);
  secrets.push(header.split("v1=")[1]!);
  return { "stripe-signature": header };
}

/** A callback URL for `target`, its token noted as a secret. */
function cb(base: string, target: CallbackTarget) {
  const grant = { expiresAt: callbackExpiry(Date.now(), 600) };
  secrets.push(callbackToken(env.CALLBACK_SECRET!, target, grant));
  return callbackUrl(base, env.CALLBACK_SECRET!, target, grant);
}

/** A target no MediaJob answers to. */
const nobody = (name: string): CallbackTarget => ({
  namespace: ns,
  name,
  uid: "9a3e5b2d-0000-4000-8000-000000000000",
  jobId: "9a3e5b2d-0000-4000-8000-000000000000",
  attempt: 1,
  submission: "submission-of-nobody",
});

beforeAll(async () => {
  ns = await createTestNamespace(kc, "webhooks-logs");
  const current = `whsec_current_${randomBytes(10).toString("hex")}`;
  env = testEnv(ns, {
    PAYMENT_PROVIDER_WEBHOOK_SECRET: `${current},${OLD}`,
    GPU_PROVIDER_API_KEY: PROVIDER_KEY,
    LOG_LEVEL: "trace",
  });
  secrets.push(current, OLD, env.CALLBACK_SECRET!, PROVIDER_KEY);
  sim = await startTestSimulator({ apiKeys: [PROVIDER_KEY] });
  jobs = new CallbackJobs({ api, namespace: ns, secret: env.CALLBACK_SECRET!, sim, apiKey: PROVIDER_KEY });
  const provider = simulatorClient(sim, PROVIDER_KEY);
  server = await startWebhookServer({ api, env, log, namespace: ns, host: "127.0.0.1", port: 0, provider });
  const unreachable = new KubeConfig();
  unreachable.loadFromOptions({
    clusters: [{ name: "down", server: "https://127.0.0.1:1", skipTLSVerify: true }],
    users: [{ name: "u", token: env.CALLBACK_SECRET! }],
    contexts: [{ name: "down", cluster: "down", user: "u" }],
    currentContext: "down",
  });
  down = await startWebhookServer({
    api: new KubeApi(unreachable),
    env,
    log,
    namespace: ns,
    host: "127.0.0.1",
    port: 0,
    provider,
  });
});

afterAll(async () => {
  await Promise.all([server?.close(), down?.close()]);
  await sim?.close();
});

describe("logs", () => {
  it("never contain a secret, a token or a signature, and say why requests were refused", async () => {
    const secret = env.PAYMENT_PROVIDER_WEBHOOK_SECRET!.split(",")[0]!;
    const pay = `${server.url}/webhooks/payment_provider`;
    const event = (type = "customer.subscription.updated", status = "active") =>
      JSON.stringify({
        id: `evt_${randomBytes(5).toString("hex")}`,
        type,
        created: nowS(),
        data: { object: { id: "sub_1", customer: "cus_logs", status } },
      });

    // Payments: accepted, replayed, rotated secret, every kind of refusal.
    const good = event();
    expect(await post(pay, good, signed(good, secret))).toBe(200);
    expect(await post(pay, good, signed(good, secret))).toBe(200);
    const rotated = event("invoice.paid");
    expect(await post(pay, rotated, signed(rotated, OLD))).toBe(200);
    const b = event();
    expect(await post(pay, b, signed(b, "whsec_wrong"))).toBe(400);
    expect(await post(pay, b, signed(b, secret, nowS() - 3600))).toBe(400);
    expect(await post(pay, b, signed(b.replace("active", "paused"), secret))).toBe(400);
    expect(await post(pay, b)).toBe(400);
    expect(await post(pay, b, { "stripe-signature": `t=${nowS()},v1=${secret}` })).toBe(400);
    expect(await post(pay, "{broken", signed("{broken", secret))).toBe(400);
    const unusable = event("customer.subscription.updated", "exploded");
    expect(await post(pay, unusable, signed(unusable, secret))).toBe(400);
    expect(await post(pay, b, { ...signed(b, secret), "content-type": "text/plain" })).toBe(415);
    const down1 = event();
    expect(await post(`${down.url}/webhooks/payment_provider`, down1, signed(down1, secret))).toBe(503);

    // Callbacks: accepted, forged, malformed (a body quoting its own URL, token included), unknown.
    const name = `logged-${randomBytes(3).toString("hex")}`;
    const { job, providerJobId } = await jobs.submitted(name, { webhook: false });
    await jobs.finished(job);
    const url = cb(server.url, targetOf(job));
    expect(await post(url, JSON.stringify({ id: providerJobId, status: "COMPLETED", webhook: url }))).toBe(
      200,
    );
    // A finished job's callbacks are answered before their body is read: bodies are refused on a
    // submission whose provider id is not recorded (the only one whose body is read).
    const { job: unconfirmed } = await jobs.submitted(`${name}-u`, { webhook: false, record: false });
    const hinted = cb(server.url, targetOf(unconfirmed));
    expect(await post(hinted, `{"id":"${providerJobId}","webhook":"${hinted}`)).toBe(400);
    expect(await post(hinted, JSON.stringify({ webhook: hinted, status: "WHATEVER" }))).toBe(400);
    expect(await post(hinted, "x".repeat(25 * 1024 * 1024))).toBe(413);
    expect(await post(hinted, "{}", { "content-type": "text/plain" })).toBe(415);
    const forged = new URL(url);
    forged.searchParams.set("token", `${forged.searchParams.get("token")!.slice(0, -2)}zz`);
    secrets.push(forged.searchParams.get("token")!);
    expect(await post(forged.toString(), "{}")).toBe(401);
    expect(
      await post(
        cb(server.url, nobody("nobody-here")),
        JSON.stringify({ id: "a-job-u1", status: "COMPLETED" }),
      ),
    ).toBe(404);
    expect(
      await post(cb(down.url, targetOf(job)), JSON.stringify({ id: providerJobId, status: "COMPLETED" })),
    ).toBe(503);
    const notFound = await request(`${server.url}/no/such/path?token=${encodeURIComponent(secrets[0]!)}`);
    await notFound.body.dump();
    expect(notFound.statusCode).toBe(404);

    // A request Node cannot even parse, its URL holding a token: Fastify logs it at trace level.
    const garbled = cb(server.url, nobody("garbled"));
    await new Promise<void>((resolve) => {
      const u = new URL(garbled);
      const sock = connect(Number(u.port), u.hostname, () => {
        sock.write(`POST ${u.pathname}${u.search} HTTP/1.1\r\nHost: x\r\nBroken Header Line\r\n\r\n`);
      });
      sock.on("data", () => sock.end());
      sock.on("close", () => resolve());
      sock.on("error", () => resolve());
    });
    // Its log line is the last one expected: once it is there, every line of the test is.
    await eventually(() => lines.some((l) => l.includes("client error")), {
      message: "the unparseable request to be logged",
    });

    const text = lines.join("\n");
    expect(lines.length).toBeGreaterThan(20);
    for (const s of secrets) expect(text, `a secret of ${s.length} characters leaked`).not.toContain(s);
    // The test would notice a leak: the URLs were logged, with the token replaced.
    expect(text).toContain("token=REDACTED");
    expect(text).toContain(`"name":"${name}"`);
    // Why refusals happened is in the logs.
    for (const reason of [
      "no_matching_signature",
      "timestamp_outside_tolerance",
      "missing_header",
      "missing_v1_signature",
      "gpu callback refused",
    ]) {
      expect(text).toContain(reason);
    }
    expect(lines.some((l) => l.includes("client error"))).toBe(true);
  });
});
