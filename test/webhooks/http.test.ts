// Around the two routes, over real HTTP: body limit, content types, rate limits, probes, metrics,
// the Kubernetes API going away, and a graceful shutdown that finishes the requests in flight.
// GPU callbacks are confirmed with the provider simulator's status API.
import { randomBytes } from "node:crypto";
import { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { Registry } from "prom-client";
import { request as httpRequest } from "node:http";
import { request } from "undici";
import { describe, expect, it } from "vitest";
import { callbackUrl } from "../../src/callback/token.js";
import { ConfigError } from "../../src/config/env.js";
import {
  billingAccountName,
  paymentEventName,
  type BillingAccount,
  type MediaJob,
  type PaymentEvent,
} from "../../src/crds/index.js";
import { KubeApi, type KubeObject, type Plural } from "../../src/k8s/api.js";
import { startWebhookServer } from "../../src/webhooks/server.js";
import { recordedOutcome } from "../../src/webhooks/paymentrecord.js";
import { runWebhooks } from "../../src/webhooks/run.js";
import { simulatorClient } from "../support/callbacks.js";
import { eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import { paymentEvent, signedDelivery } from "../support/payments.js";
import { sidecarTestBed } from "../support/sidecar.js";
import { testEnv } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const bed = sidecarTestBed(kc, "webhooks-http");
const silent = pino({ level: "silent" });
const PAY = "/webhooks/payment_provider";
const uid = () => randomBytes(4).toString("hex");
const nowS = () => Math.floor(Date.now() / 1000);

async function call(
  url: string,
  init: { method?: "GET" | "POST"; headers?: Record<string, string>; body?: string } = {},
) {
  const res = await request(url, { method: init.method ?? "POST", headers: init.headers, body: init.body });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

/** A delivery of an event of `type`, signed with the sidecar's secret. */
const signedEvent = (type = "invoice.paid", object: Record<string, unknown> = {}) =>
  signedDelivery(paymentEvent(type, object), bed.env.PAYMENT_PROVIDER_WEBHOOK_SECRET!);

/** A MediaJob whose submission the provider has finished: a callback for it completes it. */
async function finishedJob(name: string): Promise<{ job: MediaJob; providerJobId: string }> {
  const submitted = await bed.jobs.submitted(name, { webhook: false });
  await bed.jobs.finished(submitted.job);
  return submitted;
}

const json = { "content-type": "application/json" };

describe("HTTP shape", () => {
  it("answers 413 above the body limit and 415 to anything but JSON, on both routes", async () => {
    const s = await bed.start({ bodyLimit: 16 * 1024, callbackBodyLimit: 16 * 1024 });
    const name = `shape-${uid()}`;
    const { job: before, providerJobId } = await finishedJob(name);
    for (const url of [`${s.url}${PAY}`, bed.jobs.url(before, s.url)]) {
      // A payment delivery without a well-formed, fresh signature header is refused (400) before
      // its body is looked at; with one (not necessarily valid), the body's shape is judged.
      const sig: Record<string, string> = url.endsWith(PAY)
        ? { "stripe-signature": `t=${nowS()},v1=${"ab".repeat(32)}` }
        : {};
      const big = JSON.stringify({ id: providerJobId, status: "COMPLETED", pad: "x".repeat(20 * 1024) });
      const tooLarge = await call(url, {
        headers: { "content-type": "application/json", ...sig },
        body: big,
      });
      expect(tooLarge.status, url).toBe(413);
      expect(JSON.parse(tooLarge.text)).toEqual({ error: "payload too large" });
      for (const type of [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/xml",
        "application/jsonx",
        "multipart/form-data; boundary=x",
      ]) {
        const res = await call(url, {
          headers: { "content-type": type, ...sig },
          body: '{"id":"x","status":"COMPLETED"}',
        });
        expect(res.status, `${url} ${type}`).toBe(415);
        expect(JSON.parse(res.text)).toEqual({ error: "unsupported media type" });
      }
      expect((await call(url, { headers: sig, body: '{"a":1}' })).status, "no content type").toBe(415);
    }
    const unsigned = await call(`${s.url}${PAY}`, { headers: json, body: "x".repeat(20 * 1024) });
    expect(unsigned.status).toBe(400);
    // A charset parameter is fine (the signature is over bytes either way).
    const ev = signedEvent();
    const ok = await call(`${s.url}${PAY}`, {
      headers: { ...ev.headers, "content-type": "application/json; charset=utf-8" },
      body: ev.body,
    });
    expect(ok.status).toBe(200);
    expect((await api.get("mediajobs", bed.ns, name))?.metadata.resourceVersion).toBe(
      before.metadata.resourceVersion,
    );
  });

  it("answers 404 to unknown paths and methods, with a generic body", async () => {
    const s = await bed.start();
    for (const [method, path] of [
      ["GET", "/nope"],
      ["GET", PAY],
      ["POST", "/webhooks/other"],
      ["GET", "/reports/gpu_provider?token=abc"],
    ] as const) {
      const res = await call(`${s.url}${path}`, { method });
      expect(res.status, path).toBe(404);
      expect(JSON.parse(res.text)).toEqual({ error: "not found" });
    }
  });
});

describe("rate limits", () => {
  it("limits the payment route as a whole, with Retry-After", async () => {
    const s = await bed.start({ rateLimits: { payment: { capacity: 3, refillPerSecond: 0.01 } } });
    const codes: number[] = [];
    let retryAfter: unknown;
    for (let i = 0; i < 5; i++) {
      const ev = signedEvent();
      const res = await call(`${s.url}${PAY}`, { headers: ev.headers, body: ev.body });
      codes.push(res.status);
      if (res.status === 429) retryAfter = res.headers["retry-after"];
    }
    expect(codes).toEqual([200, 200, 200, 429, 429]);
    expect(Number(retryAfter)).toBeGreaterThan(0);
  });

  describe("forgeries cannot block genuine deliveries", () => {
    const limits = {
      payment: { capacity: 10, refillPerSecond: 1 },
      failuresPerSource: { capacity: 5, refillPerSecond: 1 },
    };
    const forged = () => {
      const ev = signedEvent();
      return {
        body: ev.body,
        headers: { ...ev.headers, "stripe-signature": `t=${nowS()},v1=${"ab".repeat(32)}` },
      };
    };

    /** One POST from a chosen local address (node:http: undici's pool does not bind one). */
    function postFrom(url: string, localAddress: string, headers: Record<string, string>, body: string) {
      return new Promise<number>((resolve, reject) => {
        const req = httpRequest(`${url}${PAY}`, { method: "POST", headers, localAddress }, (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        });
        req.on("error", reject);
        req.end(body);
      });
    }

    /** 5x the route's burst of forged requests, all at once, from `from`; the answers' codes. */
    function flood(url: string, from: string, headers: () => Record<string, string> = () => ({})) {
      return Promise.all(
        Array.from({ length: 5 * limits.payment.capacity }, () => {
          const f = forged();
          return postFrom(url, from, { ...f.headers, ...headers() }, f.body);
        }),
      );
    }

    async function genuineDuring(
      url: string,
      floods: () => Promise<number[]>,
      headers: Record<string, string> = {},
    ) {
      const first = await floods(); // the route's burst would be spent by now if forgeries could spend it
      const genuine: number[] = [];
      const [second] = await Promise.all([
        floods(),
        (async () => {
          for (let i = 0; i < 8; i++) {
            const ev = signedEvent();
            genuine.push(
              (await call(`${url}${PAY}`, { headers: { ...ev.headers, ...headers }, body: ev.body })).status,
            );
          }
        })(),
      ]);
      return { genuine, forged: [...first, ...second] };
    }

    it("from another address: every genuine delivery is answered 200, the forger gets 400 then 429", async () => {
      const s = await bed.start({ rateLimits: limits });
      // The forger's X-Forwarded-For is not believed: no proxy is trusted here.
      const r = await genuineDuring(s.url, () =>
        flood(s.url, "127.0.0.2", () => ({
          "x-forwarded-for": `198.51.100.${Math.floor(Math.random() * 250)}`,
        })),
      );
      expect(r.genuine).toEqual(Array(8).fill(200));
      expect(r.forged.every((c) => c === 400 || c === 429)).toBe(true);
      expect(r.forged.filter((c) => c === 400).length).toBeLessThanOrEqual(10);
      expect(r.forged.filter((c) => c === 429).length).toBeGreaterThan(0);
    });

    it("behind a trusted proxy: sources are the addresses the proxy names", async () => {
      const s = await bed.start({
        rateLimits: limits,
        env: { ...bed.env, WEBHOOKS_TRUSTED_PROXIES: "127.0.0.1,::1" },
      });
      const r = await genuineDuring(
        s.url,
        () => flood(s.url, "127.0.0.1", () => ({ "x-forwarded-for": "203.0.113.9" })),
        { "x-forwarded-for": "198.51.100.7" },
      );
      expect(r.genuine).toEqual(Array(8).fill(200));
      expect(r.forged.filter((c) => c === 429).length).toBeGreaterThan(0);
      expect(r.forged.every((c) => c === 400 || c === 429)).toBe(true);
    });

    it("replays of a captured genuine delivery do not spend the route's limit", async () => {
      const s = await bed.start({ rateLimits: { payment: { capacity: 3, refillPerSecond: 0.01 } } });
      const captured = signedEvent();
      expect((await call(`${s.url}${PAY}`, { headers: captured.headers, body: captured.body })).status).toBe(
        200,
      );
      for (let i = 0; i < 20; i++)
        expect(
          (await call(`${s.url}${PAY}`, { headers: captured.headers, body: captured.body })).status,
        ).toBe(200);
      for (let i = 0; i < 2; i++) {
        const ev = signedEvent();
        expect((await call(`${s.url}${PAY}`, { headers: ev.headers, body: ev.body })).status).toBe(200);
      }
    });
  });

  it("limits callbacks per job, so one noisy job does not block the others from the same IP", async () => {
    const s = await bed.start({ rateLimits: { callbackPerJob: { capacity: 2, refillPerSecond: 0.01 } } });
    const noisy = await bed.jobs.submitted(`noisy-${uid()}`, { webhook: false, hold: true });
    const quiet = await finishedJob(`quiet-${uid()}`);
    const codes: number[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await call(bed.jobs.url(noisy.job, s.url), {
        headers: json,
        body: JSON.stringify({ id: noisy.providerJobId, status: "IN_PROGRESS" }),
      });
      codes.push(res.status);
    }
    expect(codes).toEqual([200, 200, 429, 429]);
    const other = await call(bed.jobs.url(quiet.job, s.url), {
      headers: json,
      body: JSON.stringify({ id: quiet.providerJobId, status: "COMPLETED" }),
    });
    expect(other.status).toBe(200);
    expect((await api.get<MediaJob>("mediajobs", bed.ns, quiet.job.metadata.name))?.status?.phase).toBe(
      "Completed",
    );
    // Forged callbacks are refused before the per-job bucket, and before the provider is asked:
    // they cannot use up a real job's tokens.
    const forged = new URL(bed.jobs.url(noisy.job, s.url));
    forged.searchParams.set("token", "forged");
    const providerRequests = bed.sim.stats().requests;
    for (let i = 0; i < 4; i++)
      expect((await call(forged.toString(), { headers: json, body: "{}" })).status).toBe(401);
    expect(bed.sim.stats().requests).toBe(providerRequests);
  });
});

describe("probes and metrics", () => {
  it("serves /healthz, /readyz and /metrics", async () => {
    const registry = new Registry();
    const s = await bed.start({ registry });
    expect((await call(`${s.url}/healthz`, { method: "GET" })).status).toBe(200);
    expect((await call(`${s.url}/readyz`, { method: "GET" })).status).toBe(200);
    const ev = signedEvent();
    await call(`${s.url}${PAY}`, { headers: ev.headers, body: ev.body });
    await call(`${s.url}${PAY}`, { headers: ev.headers, body: ev.body });
    await call(`${s.url}${PAY}`, { headers: { "content-type": "application/json" }, body: ev.body });
    const metrics = await call(`${s.url}/metrics`, { method: "GET" });
    expect(metrics.status).toBe(200);
    expect(metrics.headers["content-type"]).toContain("text/plain");
    const text = metrics.text;
    expect(text).toMatch(
      /media_orchestrator_webhooks_requests_total\{route="\/webhooks\/payment_provider",outcome="ignored",code="200"\} 1/,
    );
    expect(text).toMatch(
      /media_orchestrator_webhooks_requests_total\{route="\/webhooks\/payment_provider",outcome="duplicate",code="200"\} 1/,
    );
    expect(text).toMatch(
      /media_orchestrator_webhooks_requests_total\{route="\/webhooks\/payment_provider",outcome="bad_signature",code="400"\} 1/,
    );
    expect(text).toMatch(/media_orchestrator_webhooks_signature_failures_total\{reason="missing_header"\} 1/);
    expect(text).toMatch(
      /media_orchestrator_webhooks_duplicates_total\{route="\/webhooks\/payment_provider"\} 1/,
    );
    expect(text).toMatch(
      /media_orchestrator_webhooks_request_duration_seconds_count\{route="\/webhooks\/payment_provider"\} 3/,
    );
    expect(text).toContain("media_orchestrator_webhooks_patch_conflicts_total");
  });

  it("is not ready, and answers 503 (never 500) while the Kubernetes API is unreachable", async () => {
    const down = new KubeConfig();
    down.loadFromOptions({
      clusters: [{ name: "down", server: "https://127.0.0.1:1", skipTLSVerify: true }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "down", cluster: "down", user: "u" }],
      currentContext: "down",
    });
    const s = await bed.start({ api: new KubeApi(down) });
    expect((await call(`${s.url}/healthz`, { method: "GET" })).status).toBe(200);
    expect((await call(`${s.url}/readyz`, { method: "GET" })).status).toBe(503);
    const ev = signedEvent("customer.subscription.updated", {
      id: "sub_down",
      customer: `cus_down_${uid()}`,
      status: "active",
    });
    const pay = await call(`${s.url}${PAY}`, { headers: ev.headers, body: ev.body });
    expect(pay.status).toBe(503);
    expect(pay.headers["retry-after"]).toBeDefined();
    expect(JSON.parse(pay.text)).toEqual({ error: "unavailable, retry later" });
    const name = `down-${uid()}`;
    const url = callbackUrl(s.url, bed.env.CALLBACK_SECRET!, {
      namespace: bed.ns,
      name,
      uid: "2f6e1a7c-0000-4000-8000-000000000000",
      jobId: "2f6e1a7c-0000-4000-8000-000000000000",
      attempt: 1,
      submission: "submission-of-a-job-nobody-can-read",
    });
    const cb = await call(url, {
      headers: json,
      body: JSON.stringify({ id: "a-job-u1", status: "COMPLETED" }),
    });
    expect(cb.status).toBe(503);
  });
});

/** Reads started so far by the gated clients below: a request is in flight once its first read started. */
let slowReads = 0;
/** Reads wait on this until the test opens it: requests stay in flight while the server shuts down. */
let gate: Promise<void> = Promise.resolve();
let openGate: () => void = () => {};
const closeGate = () => {
  gate = new Promise<void>((r) => (openGate = r));
};

/** The real API, held at the gate: requests stay in flight until the test lets them go on. */
class SlowKubeApi extends KubeApi {
  override async get<T extends KubeObject>(
    plural: Plural,
    namespace: string,
    name: string,
  ): Promise<T | undefined> {
    slowReads++;
    await gate;
    return super.get<T>(plural, namespace, name);
  }
}

describe("graceful shutdown", () => {
  it("finishes the requests in flight, then stops accepting", async () => {
    const slow = new SlowKubeApi(kc);
    slowReads = 0;
    closeGate();
    const s = await startWebhookServer({
      api: slow,
      env: bed.env,
      log: silent,
      namespace: bed.ns,
      host: "127.0.0.1",
      port: 0,
      provider: simulatorClient(bed.sim),
    });
    const name = `shutdown-${uid()}`;
    const { job, providerJobId } = await finishedJob(name);
    const customer = `cus_shutdown_${uid()}`;
    const ev = signedEvent("customer.subscription.created", { id: "sub_1", customer, status: "active" });
    const cbInFlight = call(bed.jobs.url(job, s.url), {
      headers: json,
      body: JSON.stringify({ id: providerJobId, status: "COMPLETED" }),
    });
    const payInFlight = call(`${s.url}${PAY}`, { headers: ev.headers, body: ev.body });
    await eventually(() => slowReads >= 2, { timeoutMs: 20_000, intervalMs: 10 });
    const closed = s.close();
    // Both requests are held in flight until the server refuses new connections.
    await eventually(
      () =>
        call(`${s.url}/healthz`, { method: "GET" }).then(
          () => false,
          () => true,
        ),
      { message: "the server to stop accepting" },
    );
    openGate();
    const [cb, pay] = await Promise.all([cbInFlight, payInFlight]);
    await closed;
    expect(cb.status).toBe(200);
    expect(JSON.parse(cb.text)).toEqual({ received: true, applied: true });
    expect((await api.get<MediaJob>("mediajobs", bed.ns, name))?.status?.phase).toBe("Completed");
    expect(pay.status).toBe(200);
    const id = (JSON.parse(ev.body) as { id: string }).id;
    const rec = await api.get<PaymentEvent>("paymentevents", bed.ns, paymentEventName(id));
    expect(recordedOutcome(rec!)).toBe("Processed");
    const acct = await api.get<BillingAccount>("billingaccounts", bed.ns, billingAccountName(customer));
    expect(acct?.status?.subscriptionStatus).toBe("active");
    await expect(call(`${s.url}/healthz`, { method: "GET" })).rejects.toThrow();
  });
});

describe("runWebhooks (the process entry point)", () => {
  it("starts the server and the GC from the configuration, and stops them", async () => {
    const local = testEnv(bed.ns, { WEBHOOKS_HOST: "127.0.0.1", WEBHOOKS_PORT: "0" });
    const running = await runWebhooks(local, silent, { kubeconfig: testKubeconfigPath() });
    try {
      expect((await call(`${running.url}/readyz`, { method: "GET" })).status).toBe(200);
      const metrics = await call(`${running.url}/metrics`, { method: "GET" });
      expect(metrics.text).toContain("media_orchestrator_webhooks_payment_events_gc_deleted_total");
    } finally {
      await running.stop();
    }
    await expect(call(`${running.url}/healthz`, { method: "GET" })).rejects.toThrow();
  });

  it("refuses to start without a callback secret", async () => {
    const local = { ...testEnv(bed.ns), CALLBACK_SECRET: undefined };
    await expect(runWebhooks(local, silent, { kubeconfig: testKubeconfigPath() })).rejects.toBeInstanceOf(
      ConfigError,
    );
  });
});
