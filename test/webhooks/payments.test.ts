// POST /webhooks/payment_provider over real HTTP against the real control plane: signatures,
// dedupe (replays answered from memory, concurrent duplicates across replicas), the Kubernetes
// calls a new event costs, ordering of subscription events (same-second ties settled by the
// payment provider's simulator), failed processing and redelivery, and retention.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { pino } from "pino";
import { Registry } from "prom-client";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Env } from "../../src/config/env.js";
import {
  API_VERSION,
  billingAccountName,
  paymentEventName,
  type BillingAccount,
  type PaymentEvent,
} from "../../src/crds/index.js";
import { KubeApi, type CallOptions, type KubeObject, type Plural } from "../../src/k8s/api.js";
import { impersonating } from "../../src/k8s/config.js";
import { startSimulator, type Simulator } from "../../tools/simulator/server.js";
import { FinishedEvents } from "../../src/webhooks/finished.js";
import { startPaymentEventGc, whileControllerLeads } from "../../src/webhooks/gc.js";
import { OUTCOME_LABEL, recordedMessage, recordedOutcome } from "../../src/webhooks/paymentrecord.js";
import { runWebhooks } from "../../src/webhooks/run.js";
import { startWebhookServer, type RunningWebhookServer } from "../../src/webhooks/server.js";
import { signStripePayload } from "../../src/webhooks/signature.js";
import { TcpProxy } from "../k8s/tcp-proxy.js";
import { createTestNamespace, eventually, testKubeConfig } from "../support/kube.js";
import { testEnv } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const silent = pino({ level: "silent" });
const OLD_SECRET = `whsec_old_${randomBytes(12).toString("hex")}`;
const NEW_SECRET = `whsec_new_${randomBytes(12).toString("hex")}`;
const PATH = "/webhooks/payment_provider";

let ns = "";
let env: Env;
let server: RunningWebhookServer;
const servers: RunningWebhookServer[] = [];

const nowS = () => Math.floor(Date.now() / 1000);
const uid = () => randomBytes(6).toString("hex");

function subscriptionEvent(
  customer: string,
  status: string,
  opts: { id?: string; type?: string; created?: number; sub?: string; prices?: string[] } = {},
) {
  return {
    id: opts.id ?? `evt_${uid()}`,
    object: "event",
    type: opts.type ?? "customer.subscription.updated",
    created: opts.created ?? nowS(),
    livemode: false,
    data: {
      object: {
        id: opts.sub ?? `sub_${customer}`,
        object: "subscription",
        customer,
        status,
        ...(opts.prices && { items: subscriptionItems(opts.prices) }),
      },
    },
  };
}

/** A subscription's `items` list as Stripe sends it: each item with its (expanded) price. */
function subscriptionItems(prices: string[]) {
  return {
    object: "list",
    data: prices.map((p, i) => ({
      id: `si_${i}_${uid()}`,
      object: "subscription_item",
      price: { id: p, object: "price", recurring: { interval: "month", usage_type: "licensed" } },
      quantity: 1,
    })),
    has_more: false,
  };
}

async function post(url: string, body: string, headers: Record<string, string>) {
  const res = await request(`${url}${PATH}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  const text = await res.body.text();
  return { status: res.statusCode, text, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** Signs with the current secret and posts, as the provider does. */
function deliver(event: object, url = server.url, secret = NEW_SECRET) {
  const body = JSON.stringify(event);
  return post(url, body, { "stripe-signature": signStripePayload(body, secret, nowS()) });
}

const record = (eventId: string) => api.get<PaymentEvent>("paymentevents", ns, paymentEventName(eventId));
const outcome = async (eventId: string) => {
  const rec = await record(eventId);
  return rec && recordedOutcome(rec);
};

/** The sidecar's Kubernetes client, counting the calls it makes (method and path). */
class CountingKube extends KubeApi {
  readonly calls: string[] = [];
  override rawJson<T>(
    method: string,
    path: string,
    body?: unknown,
    contentType?: string,
    opts?: CallOptions,
  ): Promise<T> {
    this.calls.push(`${method} ${path.split("?")[0]}`);
    return super.rawJson<T>(method, path, body, contentType, opts);
  }
}
/** The test kubeconfig, pointed at a proxy in front of the apiserver (same credentials and TLS). */
function through(proxy: TcpProxy): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromOptions({
    clusters: kc.getClusters().map((c) => ({ ...c, server: proxy.url })),
    users: kc.getUsers(),
    contexts: kc.getContexts(),
    currentContext: kc.getCurrentContext(),
  });
  return copy;
}
const account = (customer: string) =>
  api.get<BillingAccount>("billingaccounts", ns, billingAccountName(customer));

async function metricValue(registry: Registry, name: string, labels: Record<string, string> = {}) {
  const m = await registry.getSingleMetric(name)?.get();
  return (m?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, val]) => String(v.labels[k]) === val))
    .reduce((sum, v) => sum + v.value, 0);
}

async function start(opts: Partial<Parameters<typeof startWebhookServer>[0]> = {}) {
  const s = await startWebhookServer({
    api,
    env,
    log: silent,
    namespace: ns,
    host: "127.0.0.1",
    port: 0,
    registry: new Registry(),
    // The machine may be loaded: let concurrent duplicates wait as long as processing takes.
    duplicateWaitMs: 30_000,
    ...opts,
  });
  servers.push(s);
  return s;
}

/**
 * A sidecar that asks the payment provider's API (the simulator's) to settle same-second ties,
 * given to `test` with that simulator; the simulator is closed after it.
 */
async function withPaymentProvider(test: (sim: Simulator, sidecar: RunningWebhookServer) => Promise<void>) {
  const sim = await startSimulator({ paymentApiKeys: ["sim-payment-key"] });
  try {
    const sidecar = await start({
      env: { ...env, PAYMENT_PROVIDER_API_URL: sim.url, PAYMENT_PROVIDER_API_KEY: "sim-payment-key" },
    });
    await test(sim, sidecar);
  } finally {
    await sim.close();
  }
}

beforeAll(async () => {
  ns = await createTestNamespace(kc, "webhooks-payments");
  // A rotation in progress: both secrets are accepted.
  env = testEnv(ns, { PAYMENT_PROVIDER_WEBHOOK_SECRET: `${NEW_SECRET},${OLD_SECRET}` });
  server = await start();
});

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

describe("signature check over HTTP", () => {
  const customer = () => `cus_sig_${uid()}`;

  it("accepts a valid signature and one made with the second secret of a rotation", async () => {
    for (const secret of [NEW_SECRET, OLD_SECRET]) {
      const c = customer();
      const ev = subscriptionEvent(c, "active");
      const res = await deliver(ev, server.url, secret);
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ received: true });
      expect(await outcome(ev.id)).toBe("Processed");
      expect((await account(c))?.status?.subscriptionStatus).toBe("active");
    }
  });

  it("refuses bad signatures with a short 400, writes nothing, and counts the reason", async () => {
    const registry = new Registry();
    const s = await start({ registry });
    const t = nowS();
    const cases: Array<[string, (body: string) => Record<string, string>, string]> = [
      [
        "tampered body",
        (b) => ({ "stripe-signature": signStripePayload(b.replace("active", "trialing"), NEW_SECRET, t) }),
        "no_matching_signature",
      ],
      [
        "wrong secret",
        (b) => ({ "stripe-signature": signStripePayload(b, "whsec_wrong", t) }),
        "no_matching_signature",
      ],
      [
        "expired timestamp",
        (b) => ({ "stripe-signature": signStripePayload(b, NEW_SECRET, nowS() - 360) }),
        "timestamp_outside_tolerance",
      ],
      [
        "future timestamp",
        (b) => ({ "stripe-signature": signStripePayload(b, NEW_SECRET, nowS() + 360) }),
        "timestamp_outside_tolerance",
      ],
      ["missing header", () => ({}), "missing_header"],
      ["malformed header", () => ({ "stripe-signature": "garbage" }), "malformed_header"],
      ["no v1", () => ({ "stripe-signature": `t=${t},v0=abc` }), "missing_v1_signature"],
      ["empty v1", () => ({ "stripe-signature": `t=${t},v1=` }), "missing_v1_signature"],
      [
        "no timestamp",
        (b) => ({ "stripe-signature": signStripePayload(b, NEW_SECRET, t).replace(/^t=\d+,/, "") }),
        "missing_timestamp",
      ],
    ];
    for (const [label, headers, reason] of cases) {
      const c = customer();
      const ev = subscriptionEvent(c, "active");
      const body = JSON.stringify(ev);
      const res = await post(s.url, body, headers(body));
      expect(res.status, label).toBe(400);
      expect(res.json, label).toEqual({ error: "bad request" });
      expect(res.text).not.toContain(reason);
      expect(await record(ev.id), label).toBeUndefined();
      expect(await account(c), label).toBeUndefined();
    }
    expect(await metricValue(registry, "media_orchestrator_webhooks_signature_failures_total")).toBe(
      cases.length,
    );
    expect(
      await metricValue(registry, "media_orchestrator_webhooks_signature_failures_total", {
        reason: "timestamp_outside_tolerance",
      }),
    ).toBe(2);
    // A signature made on a body whose bytes differ only in whitespace fails too: raw bytes count.
    const ev = subscriptionEvent(customer(), "active");
    const signed = JSON.stringify(ev);
    const res = await post(s.url, JSON.stringify(ev, null, 2), {
      "stripe-signature": signStripePayload(signed, NEW_SECRET, t),
    });
    expect(res.status).toBe(400);
  });

  it("answers 400 to a signed body that is not an event, and records nothing", async () => {
    for (const body of ["not json", "[]", '{"id":"evt_x"}', '{"id":"","type":"a","created":1}', "null"]) {
      const res = await post(server.url, body, {
        "stripe-signature": signStripePayload(body, NEW_SECRET, nowS()),
      });
      expect(res.status, body).toBe(400);
    }
    expect(await record("evt_x")).toBeUndefined();
  });
});

describe("dedupe on event.id", () => {
  it("answers a replay of a processed event 200 from memory: no Kubernetes call at all", async () => {
    const kube = new CountingKube(kc);
    const s = await start({ api: kube });
    const c = `cus_replay_${uid()}`;
    const ev = subscriptionEvent(c, "active", { type: "customer.subscription.created" });
    expect((await deliver(ev, s.url)).status).toBe(200);
    const rec = await record(ev.id);
    const acct = await account(c);
    expect(rec?.spec).toMatchObject({ eventId: ev.id, type: ev.type, created: ev.created, customerId: c });
    expect(recordedOutcome(rec!)).toBe("Processed");
    expect(recordedMessage(rec!)).toContain("subscription active");
    const before = kube.calls.length;
    for (let i = 0; i < 3; i++) {
      const res = await deliver(ev, s.url);
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ received: true, duplicate: true });
    }
    expect(kube.calls.slice(before)).toEqual([]);
    expect((await record(ev.id))?.metadata.resourceVersion).toBe(rec?.metadata.resourceVersion);
    expect((await account(c))?.metadata.resourceVersion).toBe(acct?.metadata.resourceVersion);
  });

  it("answers a replay from memory on a replica that did not process the event (watch)", async () => {
    const kubeB = new CountingKube(kc);
    const finishedB = new FinishedEvents(100);
    const a = await start();
    const b = await start({ api: kubeB, finished: finishedB });
    const ev = subscriptionEvent(`cus_watch_${uid()}`, "active");
    expect((await deliver(ev, a.url)).status).toBe(200);
    // B learns of the record from its watch; a loaded machine may take a while to deliver it.
    await eventually(async () => finishedB.has(ev.id) || undefined, { timeoutMs: 30_000 });
    const before = kubeB.calls.length;
    const res = await deliver(ev, b.url);
    expect(res.json).toEqual({ received: true, duplicate: true });
    expect(kubeB.calls.slice(before)).toEqual([]);
  });

  it("records a new event with one Kubernetes write when its type needs no action", async () => {
    const kube = new CountingKube(kc);
    const s = await start({ api: kube, watchFinished: false });
    const ev = {
      id: `evt_${uid()}`,
      object: "event",
      type: "invoice.paid",
      created: nowS(),
      data: { object: { id: "in_1", object: "invoice" } },
    };
    const before = kube.calls.length;
    expect((await deliver(ev, s.url)).status).toBe(200);
    expect(kube.calls.slice(before)).toEqual([
      `POST /apis/media-orchestrator.io/v1alpha1/namespaces/${ns}/paymentevents`,
    ]);
    // The outcome label alone: the explanation follows from the type, so no annotation is written.
    const rec = await record(ev.id);
    expect(rec?.metadata.labels).toEqual({ [OUTCOME_LABEL]: "Ignored" });
    expect(rec?.metadata.annotations).toBeUndefined();
    expect(recordedOutcome(rec!)).toBe("Ignored");
    expect(recordedMessage(rec!)).toBe("event type invoice.paid needs no action");
  });

  it("without memory of it (another replica, a restart), a replay reads the record and changes nothing", async () => {
    const ev = subscriptionEvent(`cus_miss_${uid()}`, "active");
    expect((await deliver(ev)).status).toBe(200);
    const rec = await record(ev.id);
    const forgetful = await start({ watchFinished: false, finished: new FinishedEvents(0) });
    const res = await deliver(ev, forgetful.url);
    expect(res.json).toEqual({ received: true, duplicate: true });
    expect((await record(ev.id))?.metadata.resourceVersion).toBe(rec?.metadata.resourceVersion);
  });

  it("makes one record and one effect from twenty concurrent deliveries spread over four replicas", async () => {
    const replicas = [server, ...(await Promise.all([start(), start(), start()]))];
    const c = `cus_burst_${uid()}`;
    const ev = subscriptionEvent(c, "trialing");
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => deliver(ev, replicas[i % 4]!.url)),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
    expect(answers.filter((a) => a.json.duplicate !== true)).toHaveLength(1);
    const rec = await record(ev.id);
    expect(recordedOutcome(rec!)).toBe("Processed");
    const acct = await account(c);
    expect(acct?.status).toMatchObject({ subscriptionStatus: "trialing", lastEventId: ev.id });
    const all = await api.list<PaymentEvent>("paymentevents", ns);
    expect(all.items.filter((p) => p.spec.eventId === ev.id)).toHaveLength(1);
  });

  it("counts one processing across replicas in the metrics", async () => {
    const regs = [new Registry(), new Registry(), new Registry()];
    const replicas = await Promise.all(regs.map((registry) => start({ registry })));
    const ev = subscriptionEvent(`cus_metrics_${uid()}`, "active");
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => deliver(ev, replicas[i % 3]!.url)),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
    let processed = 0;
    let duplicates = 0;
    for (const r of regs) {
      processed += await metricValue(r, "media_orchestrator_webhooks_payment_events_total", {
        outcome: "Processed",
      });
      duplicates += await metricValue(r, "media_orchestrator_webhooks_duplicates_total");
    }
    expect(processed).toBe(1);
    expect(duplicates).toBe(11);
  });

  it("processes an event whose record an older version left Processing", async () => {
    const c = `cus_legacy_${uid()}`;
    const ev = subscriptionEvent(c, "active");
    const created = await api.create<PaymentEvent>("paymentevents", ns, {
      apiVersion: API_VERSION,
      kind: "PaymentEvent",
      metadata: { name: paymentEventName(ev.id) },
      spec: { eventId: ev.id, type: ev.type, created: ev.created },
    });
    await api.replaceStatus("paymentevents", {
      ...created,
      status: { outcome: "Processing", attempts: 1, deliveries: 1, lastDeliveryAt: new Date().toISOString() },
    });
    const res = await deliver(ev);
    expect(res.status).toBe(200);
    expect((await record(ev.id))?.status).toMatchObject({ outcome: "Processed", attempts: 2, deliveries: 2 });
    expect((await account(c))?.status?.subscriptionStatus).toBe("active");
  });
});

describe("deadlines", () => {
  it("answers 503 when a Kubernetes call does not answer within its deadline", async () => {
    // An apiserver that accepts connections and never says a word.
    const silentServer = createServer(() => undefined);
    await new Promise<void>((resolve) => silentServer.listen(0, "127.0.0.1", resolve));
    const port = (silentServer.address() as AddressInfo).port;
    const mute = new KubeConfig();
    mute.loadFromOptions({
      clusters: [{ name: "mute", server: `https://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "mute", cluster: "mute", user: "u" }],
      currentContext: "mute",
    });
    try {
      const s = await start({ api: new KubeApi(mute, { timeoutMs: 300 }), watchFinished: false });
      const ev = {
        id: `evt_${uid()}`,
        object: "event",
        type: "invoice.paid",
        created: nowS(),
        data: { object: {} },
      };
      const res = await deliver(ev, s.url);
      expect(res.status).toBe(503);
      expect(res.json).toEqual({ error: "unavailable, retry later" });
    } finally {
      silentServer.close();
    }
  });

  it("answers 503 at the deadline KUBE_API_TIMEOUT_SECONDS sets when the apiserver stalls, then recovers", async () => {
    // The sidecar process as the image runs it, its apiserver behind a proxy that can go silent.
    const proxy = await TcpProxy.start(kc.getCurrentCluster()!.server);
    const dir = await mkdtemp(join(tmpdir(), "sidecar-deadline-"));
    const kubeconfig = join(dir, "kubeconfig");
    await writeFile(kubeconfig, through(proxy).exportConfig());
    const sidecar = await runWebhooks(
      { ...env, KUBE_API_TIMEOUT_SECONDS: 2, WEBHOOKS_HOST: "127.0.0.1", WEBHOOKS_PORT: 0 },
      silent,
      { kubeconfig },
    );
    const invoice = () => ({
      id: `evt_${uid()}`,
      object: "event",
      type: "invoice.paid",
      created: nowS(),
      data: { object: {} },
    });
    try {
      expect((await deliver(invoice(), sidecar.url)).status).toBe(200);
      proxy.stall();
      const started = Date.now();
      const res = await deliver(invoice(), sidecar.url);
      const tookMs = Date.now() - started;
      expect(res.status).toBe(503);
      expect(res.json).toEqual({ error: "unavailable, retry later" });
      // The configured 2 s, not a deadline of the payment path's own.
      expect(tookMs).toBeGreaterThanOrEqual(1_900);
      expect(tookMs).toBeLessThan(6_000);
      proxy.resume();
      const ev = invoice();
      await eventually(async () => (await deliver(ev, sidecar.url)).status === 200 || undefined, {
        timeoutMs: 20_000,
        intervalMs: 100,
      });
      expect(await outcome(ev.id)).toBe("Ignored");
    } finally {
      await sidecar.stop();
      await proxy.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a concurrent duplicate waits for the attempt in flight only so long, then answers 409", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let creates = 0;
    class GatedKube extends KubeApi {
      override async create<T extends KubeObject>(
        plural: Plural,
        namespace: string,
        obj: KubeObject,
        opts?: CallOptions,
      ): Promise<T> {
        creates++;
        await gate;
        return super.create<T>(plural, namespace, obj, opts);
      }
    }
    const s = await start({ api: new GatedKube(kc), duplicateWaitMs: 200, watchFinished: false });
    const ev = {
      id: `evt_${uid()}`,
      object: "event",
      type: "invoice.paid",
      created: nowS(),
      data: { object: {} },
    };
    const first = deliver(ev, s.url);
    await eventually(async () => creates > 0 || undefined, { timeoutMs: 10_000, intervalMs: 10 });
    const second = await deliver(ev, s.url);
    expect(second.status).toBe(409);
    release();
    expect((await first).status).toBe(200);
    expect(creates).toBe(1);
    expect((await deliver(ev, s.url)).json).toEqual({ received: true, duplicate: true });
  });
});

describe("subscription events", () => {
  it("never lets an older event overwrite a newer state, whatever the delivery order", async () => {
    const c = `cus_order_${uid()}`;
    const t = nowS() - 100;
    const created = subscriptionEvent(c, "incomplete", { type: "customer.subscription.created", created: t });
    const activated = subscriptionEvent(c, "active", { created: t + 5 });
    const pastDue = subscriptionEvent(c, "past_due", { created: t + 20 });
    for (const ev of [pastDue, created, activated]) expect((await deliver(ev)).status).toBe(200);
    const acct = await account(c);
    expect(acct?.spec.customerId).toBe(c);
    expect(acct?.status).toMatchObject({
      subscriptionStatus: "past_due",
      lastEventId: pastDue.id,
      lastEventCreated: t + 20,
      subscriptionId: `sub_${c}`,
    });
    expect(acct?.status?.conditions?.find((x) => x.type === "Active")).toMatchObject({
      status: "False",
      reason: "SubscriptionPastDue",
    });
    // The older ones are recorded as processed (handled), not failed: no redelivery needed.
    for (const ev of [created, activated]) {
      const rec = await record(ev.id);
      expect(recordedOutcome(rec!)).toBe("Processed");
      expect(recordedMessage(rec!)).toContain("unchanged");
    }
  });

  it("settles two events of the same second with the provider's current state, in both delivery orders", async () => {
    await withPaymentProvider(async (sim, s) => {
      const t = nowS() - 50;
      const finals: string[] = [];
      for (const order of [0, 1]) {
        const c = `cus_tie_${order}_${uid()}`;
        // The provider reactivated the subscription after marking it unpaid, in the same second.
        // Their ids order them the other way ("b" > "a"): id order would keep "unpaid".
        const unpaid = subscriptionEvent(c, "unpaid", { id: `evt_tie_a_${uid()}`, created: t });
        const active = subscriptionEvent(c, "active", { id: `evt_tie_0_${uid()}`, created: t });
        sim.setSubscription({ id: `sub_${c}`, customer: c, status: "active" });
        for (const ev of order === 0 ? [unpaid, active] : [active, unpaid])
          expect((await deliver(ev, s.url)).status).toBe(200);
        finals.push((await account(c))?.status?.subscriptionStatus ?? "none");
      }
      expect(finals).toEqual(["active", "active"]);
    });
  });

  it("answers 503 and records Failed when the provider cannot settle a tie, then settles it on redelivery", async () => {
    await withPaymentProvider(async (sim, s) => {
      const t = nowS() - 40;
      const c = `cus_tie_unknown_${uid()}`;
      const first = subscriptionEvent(c, "past_due", { id: `evt_tie_1_${uid()}`, created: t });
      const second = subscriptionEvent(c, "active", { id: `evt_tie_0_${uid()}`, created: t });
      expect((await deliver(first, s.url)).status).toBe(200);
      // The provider does not know the subscription (yet): the tie cannot be settled.
      const refused = await deliver(second, s.url);
      expect(refused.status).toBe(503);
      expect(await outcome(second.id)).toBe("Failed");
      expect((await account(c))?.status?.subscriptionStatus).toBe("past_due");
      sim.setSubscription({ id: `sub_${c}`, customer: c, status: "active" });
      expect((await deliver(second, s.url)).status).toBe(200);
      expect(await outcome(second.id)).toBe("Processed");
      expect((await account(c))?.status?.subscriptionStatus).toBe("active");
    });
  });

  it("without a provider key, orders events of the same second by id, so both delivery orders converge", async () => {
    const t = nowS() - 50;
    const finals: string[] = [];
    for (const order of [0, 1]) {
      const c = `cus_tie_${order}_${uid()}`;
      const a = subscriptionEvent(c, "active", { id: `evt_tie_a_${uid()}`, created: t });
      const b = subscriptionEvent(c, "unpaid", { id: a.id.replace("evt_tie_a_", "evt_tie_b_"), created: t });
      for (const ev of order === 0 ? [a, b] : [b, a]) expect((await deliver(ev)).status).toBe(200);
      finals.push((await account(c))?.status?.subscriptionStatus ?? "none");
    }
    expect(finals).toEqual(["unpaid", "unpaid"]);
  });

  it("records the subscription's price ids with its state, under the same ordering", async () => {
    const c = `cus_prices_${uid()}`;
    const t = nowS() - 100;
    const first = subscriptionEvent(c, "active", { created: t, prices: ["price_small", "price_small"] });
    const upgraded = subscriptionEvent(c, "active", {
      created: t + 10,
      prices: ["price_pack", "price_large"],
    });
    const stale = subscriptionEvent(c, "active", { created: t + 5, prices: ["price_old"] });
    expect((await deliver(first)).status).toBe(200);
    expect((await account(c))?.status?.priceIds).toEqual(["price_small"]);
    expect((await deliver(upgraded)).status).toBe(200);
    // An older event delivered late changes neither the state nor the prices.
    expect((await deliver(stale)).status).toBe(200);
    expect((await account(c))?.status).toMatchObject({
      priceIds: ["price_large", "price_pack"],
      lastEventId: upgraded.id,
    });
    // A replay of the newest writes nothing; an event that lists no items keeps the prices.
    expect((await deliver(upgraded)).status).toBe(200);
    const bare = subscriptionEvent(c, "past_due", { created: t + 20 });
    expect((await deliver(bare)).status).toBe(200);
    expect((await account(c))?.status).toMatchObject({
      subscriptionStatus: "past_due",
      priceIds: ["price_large", "price_pack"],
    });
    // A price given by id (not expanded) is read too.
    const byId = subscriptionEvent(c, "active", { created: t + 30 });
    byId.data.object = {
      ...byId.data.object,
      items: { object: "list", data: [{ price: "price_by_id" }] },
    } as never;
    expect((await deliver(byId)).status).toBe(200);
    expect((await account(c))?.status?.priceIds).toEqual(["price_by_id"]);
  });

  it("records the subscription's current period, from its items or (older API versions) itself", async () => {
    const c = `cus_period_${uid()}`;
    const t = nowS() - 100;
    const start = Date.UTC(2026, 10, 15, 8) / 1000;
    const end = Date.UTC(2026, 11, 15, 8) / 1000;
    // API versions from 2025-03-31.basil: the period lives on each subscription item.
    const itemLevel = subscriptionEvent(c, "active", { created: t });
    itemLevel.data.object = {
      ...itemLevel.data.object,
      items: {
        object: "list",
        data: [{ price: { id: "price_a" }, current_period_start: start, current_period_end: end }],
      },
    } as never;
    expect((await deliver(itemLevel)).status).toBe(200);
    expect((await account(c))?.status?.subscriptionPeriod).toEqual({
      start: "2026-11-15T08:00:00.000Z",
      end: "2026-12-15T08:00:00.000Z",
    });
    // Older versions: on the subscription; the next period replaces it.
    const renewed = subscriptionEvent(c, "active", { created: t + 10 });
    renewed.data.object = {
      ...renewed.data.object,
      current_period_start: end,
      current_period_end: Date.UTC(2027, 0, 15, 8) / 1000,
    } as never;
    expect((await deliver(renewed)).status).toBe(200);
    expect((await account(c))?.status?.subscriptionPeriod).toEqual({
      start: "2026-12-15T08:00:00.000Z",
      end: "2027-01-15T08:00:00.000Z",
    });
    // An event that gives no period keeps the account's.
    expect((await deliver(subscriptionEvent(c, "past_due", { created: t + 20 }))).status).toBe(200);
    expect((await account(c))?.status?.subscriptionPeriod?.start).toBe("2026-12-15T08:00:00.000Z");
  });

  it("answers 400 to a subscription whose items are not usable, and keeps the prices", async () => {
    const c = `cus_badprices_${uid()}`;
    const t = nowS() - 100;
    expect((await deliver(subscriptionEvent(c, "active", { created: t, prices: ["price_a"] }))).status).toBe(
      200,
    );
    const bad = subscriptionEvent(c, "active", { created: t + 1 });
    bad.data.object = { ...bad.data.object, items: { data: [{ price: { id: "" } }] } } as never;
    expect((await deliver(bad)).status).toBe(400);
    expect((await account(c))?.status?.priceIds).toEqual(["price_a"]);
  });

  it("settles a same-second tie with the provider's current prices too", async () => {
    await withPaymentProvider(async (sim, s) => {
      const t = nowS() - 50;
      const c = `cus_tie_prices_${uid()}`;
      const a = subscriptionEvent(c, "active", {
        id: `evt_tp_b_${uid()}`,
        created: t,
        prices: ["price_small"],
      });
      const b = subscriptionEvent(c, "active", {
        id: `evt_tp_a_${uid()}`,
        created: t,
        prices: ["price_large"],
      });
      sim.setSubscription({
        id: `sub_${c}`,
        customer: c,
        status: "active",
        items: subscriptionItems(["price_large"]),
      });
      for (const ev of [a, b]) expect((await deliver(ev, s.url)).status).toBe(200);
      expect((await account(c))?.status?.priceIds).toEqual(["price_large"]);
    });
  });

  it("marks a deleted subscription canceled", async () => {
    const c = `cus_del_${uid()}`;
    const t = nowS() - 10;
    expect((await deliver(subscriptionEvent(c, "active", { created: t }))).status).toBe(200);
    const del = subscriptionEvent(c, "active", { type: "customer.subscription.deleted", created: t + 1 });
    expect((await deliver(del)).status).toBe(200);
    expect((await account(c))?.status).toMatchObject({ subscriptionStatus: "canceled", lastEventId: del.id });
  });

  it("records other event types as Ignored and answers 200", async () => {
    const ev = {
      id: `evt_${uid()}`,
      object: "event",
      type: "invoice.paid",
      created: nowS(),
      data: { object: { id: "in_1", object: "invoice", customer: `cus_inv_${uid()}` } },
    };
    const res = await deliver(ev);
    expect(res.status).toBe(200);
    expect(await outcome(ev.id)).toBe("Ignored");
    expect(await account(ev.data.object.customer)).toBeUndefined();
    expect((await deliver(ev)).json).toEqual({ received: true, duplicate: true });
  });

  it("records a subscription event it cannot apply as Failed and answers 400", async () => {
    const ev = subscriptionEvent(`cus_bad_${uid()}`, "exploded");
    const res = await deliver(ev);
    expect(res.status).toBe(400);
    const rec = await record(ev.id);
    expect(recordedOutcome(rec!)).toBe("Failed");
    expect(recordedMessage(rec!)).toContain("status");
  });
});

describe("meter error reports", () => {
  it("a thin meter error report is recorded with what to do, counted by its type, and answered 200", async () => {
    const registry = new Registry();
    const replica = await start({ registry });
    // A v2 thin event, as an event destination delivers it: no data, an ISO time, the meter named.
    const ev = {
      id: `evt_test_${uid()}`,
      object: "v2.core.event",
      type: "v1.billing.meter.error_report_triggered",
      created: new Date().toISOString(),
      livemode: false,
      context: null,
      reason: null,
      related_object: { id: "mtr_gpu", type: "billing.meter", url: "/v1/billing/meters/mtr_gpu" },
    };
    const res = await deliver(ev, replica.url);
    expect(res.status).toBe(200);
    const rec = await record(ev.id);
    expect(recordedOutcome(rec!)).toBe("Processed");
    expect(rec!.spec.created).toBe(Math.floor(Date.parse(ev.created) / 1000));
    expect(recordedMessage(rec!)).toMatch(/refused meter events of meter mtr_gpu after accepting them/);
    expect(recordedMessage(rec!)).toContain(`GET /v2/core/events/${ev.id}`);
    expect(
      await metricValue(registry, "media_orchestrator_webhooks_payment_events_total", {
        type: "v1.billing.meter.error_report_triggered",
        outcome: "Processed",
      }),
    ).toBe(1);
    expect((await deliver(ev, replica.url)).json).toEqual({ received: true, duplicate: true });
  });
});

describe("failed processing", () => {
  it("records Failed, answers 503, and processes the event again when it is redelivered", async () => {
    // A sidecar whose credentials may write PaymentEvents but not (yet) BillingAccounts: the
    // apiserver itself refuses the effect.
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const user = `webhooks-limited-${uid()}`;
    const rules = (withAccounts: boolean) => [
      {
        apiGroups: ["media-orchestrator.io"],
        resources: ["paymentevents", "paymentevents/status"],
        verbs: ["get", "list", "create", "update"],
      },
      ...(withAccounts
        ? [
            {
              apiGroups: ["media-orchestrator.io"],
              resources: ["billingaccounts", "billingaccounts/status"],
              verbs: ["get", "create", "update"],
            },
          ]
        : []),
    ];
    await rbac.createNamespacedRole({
      namespace: ns,
      body: { metadata: { name: user }, rules: rules(false) },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: user },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: user },
        subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: user }],
      },
    });
    const limited = new KubeApi(impersonating(kc, user));
    await eventually(async () => (await limited.list("paymentevents", ns)) && true, { timeoutMs: 10_000 });
    const s = await start({ api: limited });

    const c = `cus_fail_${uid()}`;
    const ev = subscriptionEvent(c, "active");
    const first = await deliver(ev, s.url);
    expect(first.status).toBe(503);
    expect(first.json).toEqual({ error: "unavailable, retry later" });
    const failed = await record(ev.id);
    expect(failed?.status).toMatchObject({ outcome: "Failed", attempts: 1 });
    expect(failed?.status?.message).toMatch(/403|forbidden/i);
    expect(await account(c)).toBeUndefined();

    await rbac.replaceNamespacedRole({
      name: user,
      namespace: ns,
      body: { metadata: { name: user }, rules: rules(true) },
    });
    const second = await eventually(
      async () => {
        const r = await deliver(ev, s.url);
        return r.status === 200 ? r : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 250 },
    );
    expect(second.json).toEqual({ received: true });
    const done = await record(ev.id);
    expect(recordedOutcome(done!)).toBe("Processed");
    expect(done?.status?.attempts).toBeGreaterThanOrEqual(2);
    expect((await account(c))?.status?.subscriptionStatus).toBe("active");
    expect((await deliver(ev, s.url)).json).toEqual({ received: true, duplicate: true });
  });
});

describe("retention", () => {
  it("garbage-collects PaymentEvents older than the retention, and only those", async () => {
    const gcNs = await createTestNamespace(kc, "webhooks-gc");
    const s = await start({ namespace: gcNs });
    const evs = [0, 1, 2].map(() => subscriptionEvent(`cus_gc_${uid()}`, "active"));
    for (const ev of evs) expect((await deliver(ev, s.url)).status).toBe(200);
    const retentionMs = 7 * 24 * 3_600_000;
    const at = (offsetMs: number) =>
      startPaymentEventGc({
        api,
        namespace: gcNs,
        retentionMs,
        log: silent,
        now: () => new Date(Date.now() + offsetMs),
      });
    const early = at(retentionMs - 3_600_000);
    expect(await early.runOnce()).toBe(0);
    early.stop();
    expect((await api.list("paymentevents", gcNs)).items).toHaveLength(3);
    const late = at(retentionMs + 60_000);
    expect(await late.runOnce()).toBe(3);
    late.stop();
    expect((await api.list("paymentevents", gcNs)).items).toHaveLength(0);
    // The BillingAccounts are state, not dedupe records: they stay.
    expect((await api.list("billingaccounts", gcNs)).items).toHaveLength(3);
  });

  it("reads the records a page at a time, and collects nothing on a replica told not to", async () => {
    const gcNs = await createTestNamespace(kc, "webhooks-gc-pages");
    const s = await start({ namespace: gcNs });
    const evs = [0, 1, 2, 3, 4].map(() => subscriptionEvent(`cus_gcp_${uid()}`, "active"));
    for (const ev of evs) expect((await deliver(ev, s.url)).status).toBe(200);
    const retentionMs = 3_600_000;
    const later = () => new Date(Date.now() + 2 * retentionMs);
    const idle = startPaymentEventGc({
      api,
      namespace: gcNs,
      retentionMs,
      log: silent,
      now: later,
      shouldRun: async () => false,
    });
    expect(await idle.runOnce()).toBe(0);
    idle.stop();
    expect((await api.list("paymentevents", gcNs)).items).toHaveLength(5);
    const gc = startPaymentEventGc({
      api,
      namespace: gcNs,
      retentionMs,
      log: silent,
      now: later,
      pageSize: 2,
    });
    expect(await gc.runOnce()).toBe(5);
    gc.stop();
    expect((await api.list("paymentevents", gcNs)).items).toHaveLength(0);
  });

  it("runs on the replica whose controller holds the leader Lease, or on any when nobody does", async () => {
    const leaseName = `gc-lease-${uid()}`;
    const path = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
    const decide = (pod: string) => whileControllerLeads(api, { namespace: ns, name: leaseName }, pod)();
    expect(await decide("pod-a")).toBe(true); // no Lease yet
    const micro = (d: Date) => d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
    await api.rawJson("POST", path, {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: leaseName },
      spec: { holderIdentity: "pod-a_1f2e3d4c", leaseDurationSeconds: 15, renewTime: micro(new Date()) },
    });
    expect(await decide("pod-a")).toBe(true);
    expect(await decide("pod-b")).toBe(false);
    const lease = await api.rawJson<{ metadata: object; spec: object }>("GET", `${path}/${leaseName}`);
    await api.rawJson("PUT", `${path}/${leaseName}`, {
      ...lease,
      spec: { ...lease.spec, renewTime: micro(new Date(Date.now() - 60_000)) },
    });
    expect(await decide("pod-b")).toBe(true); // expired: nobody leads
  });
});
