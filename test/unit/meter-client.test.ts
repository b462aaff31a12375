// The payment provider's meter event call against the simulator's Billing Meters (Stripe's
// dialect over loopback HTTP): what counts as recorded, what is tried again, what is refused for
// good, and that the key never appears in a reason. Against Stripe's real behaviour: a 5xx is saved
// under its Idempotency-Key and replayed for it (https://docs.stripe.com/api/idempotent_requests),
// so the try after a 5xx takes a new key and the identifier keeps the event single; a repeated
// identifier is refused with "An event already exists with identifier …" and no `param`, which
// means the event is recorded.
import { afterEach, describe, expect, it } from "vitest";
import { MeterClient, streamable, type MeterEvent } from "../../src/controller/usage/meter-client.js";
import { startSimulator, type Simulator } from "../../tools/simulator/server.js";

const sims: Simulator[] = [];
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

async function sim(): Promise<Simulator> {
  const s = await startSimulator({
    meters: [{ id: "mtr_gpu", event_name: "gpu_seconds", display_name: "GPU seconds" }],
  });
  sims.push(s);
  return s;
}

const KEY = "sim-payment-key";
const client = (s: Simulator, key = KEY) => new MeterClient({ baseUrl: s.url, apiKey: () => key });
const event = (o: Partial<MeterEvent> = {}): MeterEvent => ({
  eventName: "gpu_seconds",
  customer: "cus_1",
  value: 3,
  identifier: "mj_uid-1_1",
  timestamp: Math.floor(Date.now() / 1000) - 60,
  ...o,
});

describe("MeterClient", () => {
  it("records an event once; a resend after a lost answer is answered again, not recorded again", async () => {
    const s = await sim();
    s.setFaults({ lostMeterEventAnswers: 1 });
    expect((await client(s).send(event())).outcome).toBe("retry");
    s.setFaults({});
    expect(await client(s).send(event())).toEqual({ outcome: "recorded", duplicate: false });
    expect(s.meterEvents().map((e) => [e.identifier, e.customer, e.value])).toEqual([
      ["mj_uid-1_1", "cus_1", 3],
    ]);
  });

  it("tries again after a 5xx, a 429 and a refused key, and never says the key", async () => {
    const s = await sim();
    s.setFaults({ paymentServerErrorsFirst: 1 });
    expect(await client(s).send(event())).toMatchObject({ outcome: "retry", reason: /HTTP 500/ });
    s.setFaults({ meterEventLatencyMs: 300 });
    const [a, b] = await Promise.all([
      client(s).send(event({ identifier: "mj_x_1" })),
      client(s).send(event({ identifier: "mj_x_2" })),
    ]);
    expect([a.outcome, b.outcome].sort()).toEqual(["recorded", "retry"]);
    s.setFaults({});
    const wrong = await client(s, "sk_wrong_key_123456").send(event({ identifier: "mj_y_1" }));
    expect(wrong).toMatchObject({ outcome: "retry", reason: /refused the API key \(HTTP 401\)/ });
    expect(JSON.stringify(wrong)).not.toContain("sk_wrong_key_123456");
  });

  it("refuses for good an event the provider refuses, and an identifier sent again with another value", async () => {
    const s = await sim();
    const old = await client(s).send(event({ timestamp: Math.floor(Date.now() / 1000) - 40 * 86_400 }));
    expect(old).toMatchObject({ outcome: "refused", reason: /HTTP 400/ });
    expect((await client(s).send(event())).outcome).toBe("recorded");
    expect((await client(s).send(event({ value: 4 }))).outcome).toBe("refused");
    expect(s.meterEvents().map((e) => e.value)).toEqual([3]);
  });
});

describe("MeterClient.sendBatch (the v2 meter event stream)", () => {
  const batch = (n: number, prefix = "mj_b") =>
    Array.from({ length: n }, (_, i) => event({ identifier: `${prefix}_${i + 1}`, value: i + 1 }));
  const recorded = (s: Simulator) =>
    s
      .meterEvents()
      .map((e) => [e.identifier, e.value, e.via] as const)
      .sort(([a], [b]) => a.localeCompare(b));

  it("sends up to 100 events of a customer in one stream call, each recorded once", async () => {
    const s = await sim();
    expect(await client(s).sendBatch(batch(100))).toEqual({ outcome: "recorded" });
    expect(s.billingStats().streamCalls).toBe(1);
    expect(s.billingStats().meterEventCalls).toBe(0);
    expect(recorded(s)).toEqual(
      batch(100)
        .map((e) => [e.identifier, e.value, "v2"] as const)
        .sort(([a], [b]) => a.localeCompare(b)),
    );
    expect(s.meterErrors()).toEqual([]);
  });

  it("after a lost answer, a 5xx or a 429 the same batch is sent again and recorded once", async () => {
    const s = await sim();
    const c = client(s);
    const events = batch(5);
    s.setFaults({ lostMeterEventAnswers: 1 });
    expect((await c.sendBatch(events)).outcome).toBe("retry");
    s.setFaults({ paymentServerErrorsFirst: 1 });
    // The session already made, the next request is the stream's own: its 500.
    expect(await c.sendBatch(events)).toMatchObject({ outcome: "retry", reason: /HTTP 500/ });
    s.setFaults({ paymentRateLimit: { requestsPerSecond: 1 } });
    const answers = [await c.sendBatch(events), await c.sendBatch(events)];
    expect(answers.map((a) => a.outcome)).toContain("retry");
    s.setFaults({});
    expect(await c.sendBatch(events)).toEqual({ outcome: "recorded" });
    expect(recorded(s)).toEqual(events.map((e) => [e.identifier, e.value, "v2"] as const));
    // The resends were dropped as duplicates of the identifiers, nothing else was refused.
    expect(new Set(s.meterErrors().map((e) => e.code))).toEqual(new Set(["duplicate_meter_event"]));
  });

  it("renews a session before it expires, and once more when the provider says it has", async () => {
    const s = await sim();
    let now = Date.now();
    const c = new MeterClient({ baseUrl: s.url, apiKey: () => KEY, now: () => now });
    expect((await c.sendBatch(batch(2, "mj_s1"))).outcome).toBe("recorded");
    // 14.5 minutes later by this clock: under a minute left, a new session first.
    now += 14.5 * 60_000;
    expect((await c.sendBatch(batch(2, "mj_s2"))).outcome).toBe("recorded");
    // Each time the meters read, a session made and the batch: 3 requests, then 3 more.
    expect(s.billingStats().requests).toBe(6);
    // The provider's clock runs ahead: its session expired though this client thinks not.
    now = Date.now();
    s.advancePaymentClock(16 * 60_000);
    expect((await c.sendBatch(batch(2, "mj_s3"))).outcome).toBe("recorded");
    expect(s.meterEvents()).toHaveLength(6);
    // The refused batch, a new session, the batch again.
    expect(s.billingStats().requests).toBe(9);
  });

  it("leaves to v1 what the stream could refuse after its 200: no active meter, a timestamp at the edge", async () => {
    const s = await sim();
    expect(
      await client(s).sendBatch([event({ identifier: "mj_n_1" }), event({ eventName: "other" })]),
    ).toMatchObject({
      outcome: "unstreamable",
      reason: /no active meter has event_name other/,
    });
    const tooOld = event({ timestamp: Math.floor(Date.now() / 1000) - 35 * 86_400 });
    expect((await client(s).sendBatch([tooOld])).outcome).toBe("unstreamable");
    expect(s.meterEvents()).toEqual([]);
    expect(s.billingStats().streamCalls).toBe(0);
  });

  it("never says the key when the provider refuses it", async () => {
    const s = await sim();
    const r = await client(s, "sk_wrong_key_123456").sendBatch(batch(2));
    expect(r).toMatchObject({ outcome: "retry", reason: /HTTP 401/ });
    expect(JSON.stringify(r)).not.toContain("sk_wrong_key_123456");
  });
});

describe("streamable", () => {
  const now = 2_000_000_000;
  const names = new Set(["gpu_seconds"]);
  const at = (o: Partial<MeterEvent>) => streamable(event({ timestamp: now - 60, ...o }), names, now).ok;

  it("streams only what no check after the stream's 200 can refuse", () => {
    expect(at({})).toBe(true);
    expect(at({ eventName: "render_seconds" })).toBe(false); // no active meter
    expect(at({ value: 1.5 })).toBe(false);
    expect(at({ value: -1 })).toBe(false);
    expect(at({ customer: "" })).toBe(false);
    expect(at({ identifier: "x".repeat(101) })).toBe(false);
    expect(at({ timestamp: now - 35 * 86_400 + 30 })).toBe(false); // inside the limit by less than a minute
    expect(at({ timestamp: now - 35 * 86_400 + 120 })).toBe(true);
    expect(at({ timestamp: now + 290 })).toBe(false);
  });
});

describe("MeterClient against Stripe's idempotency and duplicate answers", () => {
  it("after a 500 the next try records the event: a new Idempotency-Key, not the saved 500", async () => {
    const s = await sim();
    const c = client(s);
    s.setFaults({ paymentServerErrorsFirst: 1 });
    expect(await c.send(event())).toMatchObject({ outcome: "retry", reason: /HTTP 500/ });
    s.setFaults({});
    expect(await c.send(event())).toEqual({ outcome: "recorded", duplicate: false });
    expect(s.billingStats().idempotentReplays).toBe(0);
    expect(s.meterEvents().map((e) => [e.identifier, e.value])).toEqual([["mj_uid-1_1", 3]]);
  });

  it("a 500 after the event was recorded: the retry's duplicate answer counts as recorded, once", async () => {
    const s = await sim();
    const c = client(s);
    // Every call fails: half before the work, half after it (recorded, answered 500).
    s.setFaults({ paymentServerErrors: 1 });
    const ids = Array.from({ length: 12 }, (_, i) => `mj_f_${i}`);
    for (const identifier of ids) expect((await c.send(event({ identifier }))).outcome).toBe("retry");
    const recordedBehind = s.meterEvents().length;
    expect(recordedBehind).toBeGreaterThan(0);
    s.setFaults({});
    const answers = await Promise.all(ids.map((identifier) => c.send(event({ identifier }))));
    expect(answers.every((a) => a.outcome === "recorded")).toBe(true);
    expect(answers.filter((a) => a.outcome === "recorded" && a.duplicate)).toHaveLength(recordedBehind);
    expect(
      s
        .meterEvents()
        .map((e) => e.identifier)
        .sort(),
    ).toEqual([...ids].sort());
  });

  it("recognises Stripe's duplicate answer, which names no param", async () => {
    const s = await sim();
    // The identifier reached Stripe another way (the v2 stream): the v1 call is its repeat.
    expect(await client(s).sendBatch([event()])).toEqual({ outcome: "recorded" });
    expect(await client(s).send(event())).toEqual({ outcome: "recorded", duplicate: true });
    expect(s.meterEvents()).toHaveLength(1);
  });
});
