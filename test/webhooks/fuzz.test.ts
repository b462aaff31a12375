// fast-check fuzz of both routes over real HTTP: random bodies, headers, sizes and content types.
// Without a valid signature or token nothing may change in Kubernetes and the provider is never
// asked, and no input at all may earn a 5xx.
import fc from "fast-check";
import { pino } from "pino";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callbackToken, callbackUrl, type CallbackTarget } from "../../src/callback/token.js";
import type { Env } from "../../src/config/env.js";
import type { MediaJob } from "../../src/crds/index.js";
import { KubeApi } from "../../src/k8s/api.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { startWebhookServer, type RunningWebhookServer } from "../../src/webhooks/server.js";
import { signStripePayload } from "../../src/webhooks/signature.js";
import { CallbackJobs, simulatorClient, targetOf } from "../support/callbacks.js";
import { createTestNamespace, testKubeConfig } from "../support/kube.js";
import { startTestSimulator, testEnv } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const BODY_LIMIT = 8 * 1024;
const PAY = "/webhooks/payment_provider";
const ROOMY = {
  payment: { capacity: 1e6, refillPerSecond: 1e6 },
  callbackGlobal: { capacity: 1e6, refillPerSecond: 1e6 },
  callbackPerJob: { capacity: 1e6, refillPerSecond: 1e6 },
  failuresPerSource: { capacity: 1e6, refillPerSecond: 1e6 },
};
const nowS = () => Math.floor(Date.now() / 1000);

let unsignedNs = "";
let signedNs = "";
let env: Env;
let secret = "";
let callbackSecret = "";
let sim: Simulator;
let unsigned: RunningWebhookServer;
let signed: RunningWebhookServer;
/** The unsigned side's target: finished at the provider, so any accepted callback would complete it. */
let job: MediaJob;
let jobProviderId = "";
/** The signed side's target: running at the provider, its /run answer lost (unconfirmed). */
let signedJob: MediaJob;
let signedProviderId = "";
const JOB = "fuzz-target";

// ---- arbitraries --------------------------------------------------------------------------------

const printable = (maxLength: number) => fc.string({ unit: "grapheme-ascii", maxLength });
const hex64 = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString("hex"));

const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom("application/json", "application/json; charset=utf-8") },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      "text/plain",
      "application/xml",
      "",
      "application/jsonx",
      "multipart/form-data",
      "*/*",
    ),
  },
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: printable(40) },
);

const subscriptionish = fc.record(
  {
    id: fc.oneof(fc.constant("evt_fuzz"), printable(30)),
    object: fc.constant("event"),
    type: fc.oneof(
      fc.constantFrom("customer.subscription.updated", "customer.subscription.deleted", "invoice.paid"),
      printable(30),
    ),
    created: fc.oneof(fc.integer({ min: 0, max: 4_000_000_000 }), fc.double(), fc.string()),
    data: fc.record(
      {
        object: fc.record(
          {
            customer: fc.oneof(fc.constant("cus_fuzz"), printable(20), fc.integer()),
            status: fc.oneof(fc.constantFrom("active", "canceled", "bogus"), fc.integer()),
          },
          { requiredKeys: [] },
        ),
      },
      { requiredKeys: [] },
    ),
  },
  { requiredKeys: [] },
);

const jobStatusish = (providerJobId: string) =>
  fc.record(
    {
      id: fc.oneof(fc.constant(providerJobId), printable(20), fc.integer()),
      status: fc.oneof(
        fc.constantFrom("COMPLETED", "FAILED", "TIMED_OUT", "IN_PROGRESS", "CANCELLED", "NOPE"),
        fc.integer(),
      ),
      output: fc.jsonValue({ maxDepth: 2 }),
      error: fc.oneof(fc.string(), fc.constant(null)),
    },
    { requiredKeys: [] },
  );

/** Events the sidecar accepts: any id, a known or unknown type, a valid subscription state. */
const wellFormedEvent = fc.record({
  id: fc.oneof(fc.constant("evt_fuzz"), fc.stringMatching(/^evt_[A-Za-z0-9]{1,24}$/)),
  object: fc.constant("event"),
  type: fc.constantFrom("customer.subscription.updated", "customer.subscription.deleted", "invoice.paid"),
  created: fc.integer({ min: 1_700_000_000, max: 2_000_000_000 }),
  data: fc.record({
    object: fc.record({
      customer: fc.constantFrom("cus_fuzz", "cus_other"),
      status: fc.constantFrom("active", "canceled", "past_due", "trialing"),
    }),
  }),
});

/**
 * Callbacks naming the fuzzed job's provider job, or any other: any terminal (or not) status, any
 * output. The sidecar asks the provider about whichever job a callback names.
 */
const wellFormedCallback = (providerJobId: string) =>
  fc.record({
    id: fc.oneof(
      fc.constant(providerJobId),
      printable(40).filter((id) => id.length > 0),
    ),
    status: fc.constantFrom("COMPLETED", "FAILED", "TIMED_OUT", "IN_PROGRESS", "CANCELLED"),
    output: fc.jsonValue({ maxDepth: 2 }),
  });

const body = (providerJobId: string): fc.Arbitrary<Buffer> =>
  fc.oneof(
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: 600 }).map((b) => Buffer.from(b)) },
    { weight: 2, arbitrary: fc.json({ maxDepth: 3 }).map((s) => Buffer.from(s)) },
    { weight: 3, arbitrary: subscriptionish.map((o) => Buffer.from(JSON.stringify(o))) },
    { weight: 3, arbitrary: jobStatusish(providerJobId).map((o) => Buffer.from(JSON.stringify(o))) },
    { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
    // Around and above the body limit.
    {
      weight: 1,
      arbitrary: fc
        .integer({ min: BODY_LIMIT - 64, max: BODY_LIMIT + 4096 })
        .map((n) =>
          Buffer.from(JSON.stringify({ id: providerJobId, status: "COMPLETED", pad: "x".repeat(n) })),
        ),
    },
  );

/** Stripe-Signature values that can never be valid for the body they come with. */
const badSignature = (b: Buffer) =>
  fc.oneof(
    fc.constant(undefined),
    printable(120),
    hex64.map((h) => `t=${nowS()},v1=${h}`),
    fc.integer({ min: 0, max: 4_000_000_000 }).chain((t) => hex64.map((h) => `t=${t},v1=${h},v0=${h}`)),
    fc.constant(signStripePayload(b, "whsec_not_the_secret", nowS())),
    fc.constant(signStripePayload(b, secret, nowS() - 3600)),
    fc.constant(signStripePayload(b, secret, nowS() + 3600)),
    fc.constant(signStripePayload(Buffer.concat([b, Buffer.from(" ")]), secret, nowS())),
    fc.constant(signStripePayload(b, secret, nowS()).replace("v1=", "v0=")),
  );

const QUERY = ["ns", "name", "uid", "job", "attempt", "sub"] as const;

/**
 * Callback query strings whose token never matches the target they name: fields of the real
 * target or made up, some missing, tokens made up or computed for another target (another job,
 * the next attempt) or with another secret.
 */
const badCallbackUrl = (base: string, t: CallbackTarget) =>
  fc
    .record({
      ns: fc.oneof(fc.constant(t.namespace), printable(20)),
      name: fc.oneof(fc.constant(t.name), printable(20)),
      uid: fc.oneof(fc.constant(t.uid), printable(40)),
      job: fc.oneof(fc.constant(t.jobId), printable(20)),
      attempt: fc.oneof(fc.constant(String(t.attempt)), fc.constant(String(t.attempt + 1)), printable(6)),
      sub: fc.oneof(fc.constant(t.submission), printable(30)),
      token: fc.oneof(
        printable(60),
        fc.constant(callbackToken(callbackSecret, { ...t, name: "another-job" })),
        fc.constant(callbackToken(callbackSecret, { ...t, attempt: t.attempt + 1 })),
        fc.constant(callbackToken("not-the-secret", t)),
        fc.constant(undefined),
      ),
      drop: fc.subarray([...QUERY]),
    })
    .filter(
      (q) =>
        q.token === undefined ||
        q.drop.length > 0 ||
        q.token !==
          callbackToken(callbackSecret, {
            namespace: q.ns,
            name: q.name,
            uid: q.uid,
            jobId: q.job,
            attempt: Number(q.attempt),
            submission: q.sub,
          }),
    )
    .map((q) => {
      const u = new URL(`${base}/reports/gpu_provider`);
      for (const k of QUERY) if (!q.drop.includes(k)) u.searchParams.set(k, q[k]);
      if (q.token !== undefined) u.searchParams.set("token", q.token);
      return u.toString();
    });

async function send(
  url: string,
  ct: string | undefined,
  payload: Buffer,
  headers: Record<string, string> = {},
) {
  const res = await request(url, {
    method: "POST",
    headers: { ...(ct === undefined ? {} : { "content-type": ct }), ...headers },
    body: payload,
  });
  await res.body.dump();
  return res.statusCode;
}

beforeAll(async () => {
  unsignedNs = await createTestNamespace(kc, "webhooks-fuzz");
  signedNs = await createTestNamespace(kc, "webhooks-fuzz-signed");
  env = testEnv(unsignedNs);
  secret = env.PAYMENT_PROVIDER_WEBHOOK_SECRET!;
  callbackSecret = env.CALLBACK_SECRET!;
  sim = await startTestSimulator();
  const common = {
    api,
    env,
    log: pino({ level: "silent" }),
    host: "127.0.0.1",
    port: 0,
    bodyLimit: BODY_LIMIT,
    rateLimits: ROOMY,
    provider: simulatorClient(sim),
  };
  unsigned = await startWebhookServer({ ...common, namespace: unsignedNs });
  signed = await startWebhookServer({ ...common, namespace: signedNs });
  const spec = { workload: "asr", maxAttempts: 3 };
  const jobsIn = (namespace: string) => new CallbackJobs({ api, namespace, secret: callbackSecret, sim });
  const unsignedJobs = jobsIn(unsignedNs);
  ({ job, providerJobId: jobProviderId } = await unsignedJobs.submitted(JOB, { spec, webhook: false }));
  await unsignedJobs.finished(job);
  ({ job: signedJob, providerJobId: signedProviderId } = await jobsIn(signedNs).submitted(JOB, {
    spec,
    webhook: false,
    hold: true,
    record: false,
  }));
});

afterAll(async () => {
  await Promise.all([unsigned?.close(), signed?.close()]);
  await sim?.close();
});

describe("fuzz", () => {
  it("without a valid signature or token: never a 5xx, never a change in Kubernetes", async () => {
    const seen = new Set<number>();
    const providerRequests = sim.stats().requests;
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        contentType,
        body(jobProviderId).chain((b) =>
          fc.tuple(fc.constant(b), badSignature(b), badCallbackUrl(unsigned.url, targetOf(job))),
        ),
        printable(50),
        async (payment, ct, [payload, signature, cbUrl], noise) => {
          const status = payment
            ? await send(`${unsigned.url}${PAY}`, ct, payload, {
                ...(signature === undefined ? {} : { "stripe-signature": signature }),
                "x-fuzz": noise,
              })
            : await send(cbUrl, ct, payload, { "x-fuzz": noise });
          seen.add(status);
          if (payment) expect([400, 413, 415]).toContain(status);
          else expect(status).toBe(401);
        },
      ),
      { numRuns: 250 },
    );
    expect([...seen].every((s) => s < 500)).toBe(true);
    expect((await api.list("paymentevents", unsignedNs)).items).toEqual([]);
    expect((await api.list("billingaccounts", unsignedNs)).items).toEqual([]);
    const after = await api.get<MediaJob>("mediajobs", unsignedNs, JOB);
    expect(after?.metadata.resourceVersion).toBe(job.metadata.resourceVersion);
    expect(sim.stats().requests).toBe(providerRequests);
  });

  it("with a valid signature or token but any body: never a 5xx", async () => {
    const seen = new Map<number, number>();
    const cb = callbackUrl(signed.url, callbackSecret, targetOf(signedJob));
    const providerRequests = sim.stats().requests;
    // Half the deliveries are well-formed JSON, so the fuzz reliably reaches past validation into
    // the Kubernetes writes (fuzzed bodies alone were accepted about 1 time in 50, and some runs never).
    const delivery = fc.oneof(
      fc.tuple(fc.boolean(), contentType, body(signedProviderId)),
      fc.boolean().chain((payment) =>
        fc.tuple(
          fc.constant(payment),
          fc.constant("application/json"),
          (payment ? wellFormedEvent : wellFormedCallback(signedProviderId)).map((o) =>
            Buffer.from(JSON.stringify(o)),
          ),
        ),
      ),
    );
    await fc.assert(
      fc.asyncProperty(delivery, async ([payment, ct, payload]) => {
        const status = payment
          ? await send(`${signed.url}${PAY}`, ct, payload, {
              "stripe-signature": signStripePayload(payload, secret, nowS()),
            })
          : await send(cb, ct, payload);
        seen.set(status, (seen.get(status) ?? 0) + 1);
        expect(status).toBeLessThan(500);
      }),
      { numRuns: 150 },
    );
    // The fuzz reached past the checks: some deliveries were accepted, some refused.
    expect(seen.get(200) ?? 0).toBeGreaterThan(0);
    expect(seen.get(400) ?? 0).toBeGreaterThan(0);
    // ... and past them to the provider, asked about the jobs the callbacks named.
    expect(sim.stats().requests).toBeGreaterThan(providerRequests);
  });
});
