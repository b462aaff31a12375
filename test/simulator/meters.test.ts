// The simulator's payment side bills like Stripe: the official `stripe` library, unchanged except
// its host, records meter events, reads meters and summaries, and sees Stripe's refusals (bad
// events, a repeated identifier inside 24 hours, a second concurrent call for one customer and
// meter) and the injected faults (5xx, lost answers, 429).
import Stripe from "stripe";
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { optionsFromArgs } from "../../tools/simulator/main.js";
import { startSimulator, type Simulator, type SimulatorOptions } from "../../tools/simulator/server.js";

const sims: Simulator[] = [];
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

const METER = "mtr_gpu_seconds";
const EVENT = "gpu_seconds";

async function sim(opts: SimulatorOptions = {}): Promise<Simulator> {
  const s = await startSimulator({
    meters: [{ id: METER, event_name: EVENT, display_name: "GPU seconds" }],
    ...opts,
  });
  sims.push(s);
  return s;
}

function stripeFor(s: Simulator, config: Stripe.StripeConfig = {}, key = "sim-payment-key"): Stripe {
  return new Stripe(key, {
    host: "127.0.0.1",
    port: s.port,
    protocol: "http",
    maxNetworkRetries: 0,
    ...config,
  });
}

const minute = (t: number) => Math.floor(t / 60) * 60;
const nowS = () => Math.floor(Date.now() / 1000);

async function summed(stripe: Stripe, customer: string, meter = METER): Promise<number> {
  const start = minute(nowS()) - 3600;
  const list = await stripe.billing.meters.listEventSummaries(meter, {
    customer,
    start_time: start,
    end_time: start + 7200,
  });
  expect(list.data).toHaveLength(1);
  return list.data[0]?.aggregated_value ?? Number.NaN;
}

const event = (customer: string, value: number | string, identifier?: string) => ({
  event_name: EVENT,
  payload: { stripe_customer_id: customer, value: String(value) },
  ...(identifier !== undefined && { identifier }),
});

async function rejection(p: Promise<unknown>): Promise<Stripe.errors.StripeError> {
  try {
    await p;
  } catch (err) {
    return err as Stripe.errors.StripeError;
  }
  throw new Error("expected the call to be refused");
}

describe("Billing Meters over the official stripe library", () => {
  it("records meter events and sums them per customer in the meter's event summaries", async () => {
    const s = await sim();
    const stripe = stripeFor(s);
    const meters = await stripe.billing.meters.list();
    expect(meters.data).toEqual([
      expect.objectContaining({
        id: METER,
        object: "billing.meter",
        event_name: EVENT,
        default_aggregation: { formula: "sum" },
      }),
    ]);
    const ts = nowS() - 120;
    const created = await stripe.billing.meterEvents.create({
      ...event("cus_a", 42, "mj_1_1"),
      timestamp: ts,
    });
    expect(created).toMatchObject({
      object: "billing.meter_event",
      event_name: EVENT,
      identifier: "mj_1_1",
      timestamp: ts,
      payload: { stripe_customer_id: "cus_a", value: "42" },
    });
    await stripe.billing.meterEvents.create(event("cus_a", 8, "mj_2_1"));
    await stripe.billing.meterEvents.create(event("cus_b", 5, "mj_3_1"));
    expect(await summed(stripe, "cus_a")).toBe(50);
    expect(await summed(stripe, "cus_b")).toBe(5);
    expect(await summed(stripe, "cus_nobody")).toBe(0);
    // A window that ends before the first event's timestamp does not count it: [start, end).
    const before = await stripe.billing.meters.listEventSummaries(METER, {
      customer: "cus_a",
      start_time: minute(ts) - 600,
      end_time: minute(ts),
    });
    expect(before.data[0]?.aggregated_value).toBe(0);
  });

  it("a meter created through the API aggregates its own events", async () => {
    const s = await sim({ meters: [] });
    const stripe = stripeFor(s);
    const meter = await stripe.billing.meters.create({
      display_name: "Render seconds",
      event_name: "render_seconds",
      default_aggregation: { formula: "sum" },
    });
    expect(meter.id).toMatch(/^mtr_/);
    await stripe.billing.meterEvents.create({
      event_name: "render_seconds",
      payload: { stripe_customer_id: "cus_a", value: "7" },
    });
    expect(await summed(stripe, "cus_a", meter.id)).toBe(7);
    expect((await stripe.billing.meters.retrieve(meter.id)).event_name).toBe("render_seconds");
    const dup = await rejection(
      stripe.billing.meters.create({
        display_name: "x",
        event_name: "render_seconds",
        default_aggregation: { formula: "sum" },
      }),
    );
    expect(dup.statusCode).toBe(400);
  });

  it("meters take Stripe's configuration: other payload keys, a pre-aggregation window, deactivation", async () => {
    const s = await sim({ meters: [] });
    const stripe = stripeFor(s);
    const custom = await stripe.billing.meters.create({
      display_name: "Seconds by account",
      event_name: "acct_seconds",
      default_aggregation: { formula: "sum" },
      customer_mapping: { event_payload_key: "account", type: "by_id" },
      value_settings: { event_payload_key: "seconds" },
    });
    expect(custom).toMatchObject({
      customer_mapping: { event_payload_key: "account", type: "by_id" },
      value_settings: { event_payload_key: "seconds" },
      event_time_window: null,
    });
    // Events must carry the meter's keys: the default ones are missing.
    const wrongKeys = await rejection(
      stripe.billing.meterEvents.create({
        event_name: "acct_seconds",
        payload: { stripe_customer_id: "cus_a", value: "3" },
      }),
    );
    expect(wrongKeys.raw).toMatchObject({ param: "payload[account]" });
    await stripe.billing.meterEvents.create({
      event_name: "acct_seconds",
      payload: { account: "cus_a", seconds: "3" },
    });
    expect(await summed(stripe, "cus_a", custom.id)).toBe(3);

    // An hourly pre-aggregating meter counts only the latest event of each hour.
    const hourly = await stripe.billing.meters.create({
      display_name: "Hourly",
      event_name: "hourly_seconds",
      default_aggregation: { formula: "sum" },
      event_time_window: "hour",
    });
    const hourStart = Math.floor(nowS() / 3600) * 3600 - 3600;
    for (const [offset, value] of [
      [60, 5],
      [120, 7],
    ] as const)
      await stripe.billing.meterEvents.create({
        event_name: "hourly_seconds",
        timestamp: hourStart + offset,
        payload: { stripe_customer_id: "cus_h", value: String(value) },
      });
    const list = await stripe.billing.meters.listEventSummaries(hourly.id, {
      customer: "cus_h",
      start_time: hourStart,
      end_time: hourStart + 3600,
    });
    expect(list.data[0]?.aggregated_value).toBe(7);

    // Stripe's validation of a meter's configuration.
    const badType = await rejection(
      stripe.billing.meters.create({
        display_name: "x",
        event_name: "x_seconds",
        default_aggregation: { formula: "sum" },
        customer_mapping: {
          event_payload_key: "account",
        } as Stripe.Billing.MeterCreateParams.CustomerMapping,
      }),
    );
    expect(badType.raw).toMatchObject({ param: "customer_mapping[type]" });
    const badWindow = await rejection(
      stripe.billing.meters.create({
        display_name: "x",
        event_name: "x_seconds",
        default_aggregation: { formula: "sum" },
        event_time_window: "week" as "hour",
      }),
    );
    expect(badWindow.raw).toMatchObject({ param: "event_time_window" });

    // A deactivated meter frees its event name for a new one.
    expect((await stripe.billing.meters.deactivate(custom.id)).status).toBe("inactive");
    const replacement = await stripe.billing.meters.create({
      display_name: "Seconds",
      event_name: "acct_seconds",
      default_aggregation: { formula: "sum" },
    });
    expect(replacement.status).toBe("active");
    expect((await rejection(stripe.billing.meters.reactivate(custom.id))).statusCode).toBe(400);
  });

  it("refuses a repeated identifier inside the 24-hour window, with stripe-should-retry false, and accepts it after", async () => {
    const s = await sim();
    const stripe = stripeFor(s, { maxNetworkRetries: 2 });
    await stripe.billing.meterEvents.create(event("cus_a", 10, "mj_x_1"));
    const again = await rejection(stripe.billing.meterEvents.create(event("cus_a", 10, "mj_x_1")));
    expect(again).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    expect(again.message).toBe("An event already exists with identifier mj_x_1.");
    expect(again.headers?.["stripe-should-retry"]).toBe("false");
    // Another value under the same identifier is refused the same way: nothing is doubled.
    await rejection(stripe.billing.meterEvents.create(event("cus_a", 99, "mj_x_1")));
    expect(await summed(stripe, "cus_a")).toBe(10);
    expect(s.billingStats().meterEventCalls).toBe(3); // the library did not retry the 400s

    s.advancePaymentClock(23 * 3600 * 1000);
    await rejection(stripe.billing.meterEvents.create(event("cus_a", 10, "mj_x_1")));
    s.advancePaymentClock(3600 * 1000 + 1000);
    await stripe.billing.meterEvents.create(event("cus_a", 10, "mj_x_1"));
    // Past the window the provider cannot tell a repeat: both count.
    expect(s.meterEvents().filter((e) => e.identifier === "mj_x_1")).toHaveLength(2);
  });

  it.each([
    ["a fractional value", { ...event("cus_a", "1.5") }, "payload[value]"],
    ["a value that is not a number", { ...event("cus_a", "ten") }, "payload[value]"],
    ["a negative value", { ...event("cus_a", "-3") }, "payload[value]"],
    ["no value", { event_name: EVENT, payload: { stripe_customer_id: "cus_a" } }, "payload[value]"],
    ["no customer", { event_name: EVENT, payload: { value: "3" } }, "payload[stripe_customer_id]"],
    ["no event name", { event_name: "", payload: { stripe_customer_id: "cus_a", value: "3" } }, "event_name"],
    ["a timestamp 36 days old", { ...event("cus_a", 3), timestamp: nowS() - 36 * 86_400 }, "timestamp"],
    ["a timestamp 6 minutes ahead", { ...event("cus_a", 3), timestamp: nowS() + 360 }, "timestamp"],
    ["an identifier over 100 characters", { ...event("cus_a", 3, "x".repeat(101)) }, "identifier"],
  ])("refuses %s with Stripe's invalid_request_error naming the param", async (_name, params, param) => {
    const s = await sim();
    const err = await rejection(
      stripeFor(s).billing.meterEvents.create(params as Stripe.Billing.MeterEventCreateParams),
    );
    expect(err).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    expect(err.statusCode).toBe(400);
    expect(err.type).toBe("StripeInvalidRequestError");
    expect(err.raw).toMatchObject({ type: "invalid_request_error", param });
    expect(s.meterEvents()).toEqual([]);
  });

  it("accepts timestamps at the edges: 34 days old, 4 minutes ahead", async () => {
    const s = await sim();
    const stripe = stripeFor(s);
    await stripe.billing.meterEvents.create({ ...event("cus_a", 1), timestamp: nowS() - 34 * 86_400 });
    await stripe.billing.meterEvents.create({ ...event("cus_a", 1), timestamp: nowS() + 240 });
    expect(s.meterEvents()).toHaveLength(2);
  });

  it("an event for an event name no meter has is accepted and reported, not aggregated", async () => {
    const s = await sim();
    await stripeFor(s).billing.meterEvents.create({
      event_name: "typo_seconds",
      payload: { stripe_customer_id: "cus_a", value: "3" },
    });
    expect(s.meterErrors()).toEqual([
      expect.objectContaining({ code: "no_meter", eventName: "typo_seconds" }),
    ]);
  });

  it("refuses a wrong API key with an authentication error", async () => {
    const s = await sim();
    const err = await rejection(stripeFor(s, {}, "sk_wrong").billing.meters.list());
    expect(err).toBeInstanceOf(Stripe.errors.StripeAuthenticationError);
  });

  it("allows one concurrent call per customer and meter: a second one is refused 429, another customer is not", async () => {
    const s = await sim({ faults: { meterEventLatencyMs: 300 } });
    const stripe = stripeFor(s);
    const results = await Promise.allSettled([
      stripe.billing.meterEvents.create(event("cus_a", 1, "c1")),
      stripe.billing.meterEvents.create(event("cus_a", 2, "c2")),
      stripe.billing.meterEvents.create(event("cus_b", 4, "c3")),
    ]);
    const refused = results.flatMap((r) =>
      r.status === "rejected" ? [r.reason as Stripe.errors.StripeError] : [],
    );
    expect(refused).toHaveLength(1);
    expect(refused[0]).toBeInstanceOf(Stripe.errors.StripeRateLimitError);
    expect(refused[0]?.statusCode).toBe(429);
    expect(
      s
        .meterEvents()
        .map((e) => e.identifier)
        .sort(),
    ).toEqual(["c1", "c3"]);
    // Once the first call is answered the customer may call again.
    await stripe.billing.meterEvents.create(event("cus_a", 2, "c2"));
    expect(await summed(stripe, "cus_a")).toBe(3);
  });

  it("a 500 is saved under its Idempotency-Key and replayed for it; a new key with the same identifier records once", async () => {
    const s = await sim({ faults: { paymentServerErrorsFirst: 1 } });
    // The library retries with the key it made for the request: Stripe answers the saved 500.
    const lib = await rejection(
      stripeFor(s, { maxNetworkRetries: 2 }).billing.meterEvents.create(event("cus_a", 6, "r0")),
    );
    expect(lib.statusCode).toBe(500);
    expect(s.billingStats()).toMatchObject({ serverErrors: 1, idempotentReplays: 2 });
    s.setFaults({ paymentServerErrorsFirst: 1 });
    const stripe = stripeFor(s);
    const first = await rejection(
      stripe.billing.meterEvents.create(event("cus_a", 6, "r1"), { idempotencyKey: "k-r1" }),
    );
    expect(first.statusCode).toBe(500);
    // The outage is over, but the key keeps its 500, a day less an hour later too.
    s.advancePaymentClock(23 * 3600 * 1000);
    const again = await rejection(
      stripe.billing.meterEvents.create(event("cus_a", 6, "r1"), { idempotencyKey: "k-r1" }),
    );
    expect(again.statusCode).toBe(500);
    expect(again.headers?.["idempotent-replayed"]).toBe("true");
    expect(s.meterEvents()).toEqual([]);
    // A new key for the retry: the event is recorded; its identifier still refuses a third copy.
    await stripe.billing.meterEvents.create(event("cus_a", 6, "r1"), { idempotencyKey: "k-r1-retry-1" });
    const dup = await rejection(
      stripe.billing.meterEvents.create(event("cus_a", 6, "r1"), { idempotencyKey: "k-r1-retry-2" }),
    );
    expect(dup.message).toBe("An event already exists with identifier r1.");
    expect(dup.param).toBeUndefined();
    expect(s.meterEvents().map((e) => [e.identifier, e.value])).toEqual([["r1", 6]]);
  });

  it("a lost answer hides a recorded event: the identifier refuses the resend, the Idempotency-Key replays the answer", async () => {
    const s = await sim({ faults: { lostMeterEventAnswers: 1 } });
    const stripe = stripeFor(s);
    const lost = await rejection(
      stripe.billing.meterEvents.create(event("cus_a", 9, "lost_1"), { idempotencyKey: "k-lost-1" }),
    );
    expect(lost).toBeInstanceOf(Stripe.errors.StripeConnectionError);
    expect(s.meterEvents().map((e) => e.identifier)).toEqual(["lost_1"]);
    s.setFaults({});
    const replay = await stripe.billing.meterEvents.create(event("cus_a", 9, "lost_1"), {
      idempotencyKey: "k-lost-1",
    });
    expect(replay.identifier).toBe("lost_1");
    expect(replay.lastResponse.headers["idempotent-replayed"]).toBe("true");
    const resend = await rejection(stripe.billing.meterEvents.create(event("cus_a", 9, "lost_1")));
    expect(resend.message).toMatch(/already exists/);
    const otherParams = await rejection(
      stripe.billing.meterEvents.create(event("cus_a", 10, "lost_1"), { idempotencyKey: "k-lost-1" }),
    );
    expect(otherParams).toBeInstanceOf(Stripe.errors.StripeIdempotencyError);
    expect(await summed(stripe, "cus_a")).toBe(9);
  });

  it("a 500 after the work is done leaves the event recorded", async () => {
    const s = await sim({ faults: { paymentServerErrors: 1 } });
    const stripe = stripeFor(s);
    const results: string[] = [];
    for (let i = 0; i < 20; i++) {
      const err = await rejection(stripe.billing.meterEvents.create(event("cus_a", 1, `f${i}`)));
      results.push(String(err.statusCode));
    }
    expect(new Set(results)).toEqual(new Set(["500"]));
    // About half were refused before any work, the rest recorded: neither all nor none.
    expect(s.meterEvents().length).toBeGreaterThan(0);
    expect(s.meterEvents().length).toBeLessThan(20);
  });

  it("a payment rate limit answers 429 as a RateLimitError", async () => {
    const s = await sim({ faults: { paymentRateLimit: { requestsPerSecond: 1 } } });
    const stripe = stripeFor(s);
    await stripe.billing.meters.list();
    const err = await rejection(stripe.billing.meters.list());
    expect(err).toBeInstanceOf(Stripe.errors.StripeRateLimitError);
  });

  it("summaries check their parameters as Stripe does", async () => {
    const s = await sim();
    const stripe = stripeFor(s);
    const t = minute(nowS());
    const unaligned = await rejection(
      stripe.billing.meters.listEventSummaries(METER, {
        customer: "cus_a",
        start_time: t + 1,
        end_time: t + 60,
      }),
    );
    expect(unaligned.raw).toMatchObject({ param: "start_time" });
    const reversed = await rejection(
      stripe.billing.meters.listEventSummaries(METER, { customer: "cus_a", start_time: t, end_time: t }),
    );
    expect(reversed.statusCode).toBe(400);
    const missing = await rejection(
      stripe.billing.meters.listEventSummaries("mtr_nope", {
        customer: "cus_a",
        start_time: t,
        end_time: t + 60,
      }),
    );
    expect(missing.statusCode).toBe(404);
    expect(missing.code).toBe("resource_missing");
  });
});

describe("meters from the command line", () => {
  it("--meter EVENT[,id=][,formula=] configures meters, and a bad one is refused", () => {
    expect(
      optionsFromArgs(["--meter", "gpu_seconds,id=mtr_gpu", "--meter", "jobs,formula=count"]).meters,
    ).toEqual([
      { event_name: "gpu_seconds", id: "mtr_gpu" },
      { event_name: "jobs", formula: "count" },
    ]);
    expect(() => optionsFromArgs(["--meter", "x,formula=avg"])).toThrow(/--meter/);
    expect(() => optionsFromArgs(["--meter", "x,colour=red"])).toThrow(/unknown key colour/);
    expect(() => optionsFromArgs(["--meter", ""])).toThrow(/--meter/);
  });
});

describe("the v2 meter event stream", () => {
  it("takes batches of up to 100 with a session token; bad events are reported, repeats dropped", async () => {
    const s = await sim();
    const stripe = stripeFor(s);
    const session = await stripe.v2.billing.meterEventSession.create();
    expect(session.object).toBe("v2.billing.meter_event_session");
    expect(Date.parse(session.expires_at) - Date.parse(session.created)).toBe(15 * 60_000);
    const streamer = stripeFor(s, {}, session.authentication_token);
    const events = Array.from({ length: 100 }, (_, i) => ({
      event_name: EVENT,
      identifier: `batch_${i}`,
      payload: { stripe_customer_id: "cus_v2", value: "2" },
    }));
    await streamer.v2.billing.meterEventStream.create({ events });
    await streamer.v2.billing.meterEventStream.create({
      events: [
        { event_name: EVENT, identifier: "batch_0", payload: { stripe_customer_id: "cus_v2", value: "2" } },
        { event_name: EVENT, identifier: "bad_1", payload: { stripe_customer_id: "cus_v2", value: "2.5" } },
        {
          event_name: EVENT,
          identifier: "ok_1",
          payload: { stripe_customer_id: "cus_v2", value: "1" },
          timestamp: new Date().toISOString(),
        },
      ],
    });
    expect(await summed(stripe, "cus_v2")).toBe(201);
    expect(s.meterErrors().map((e) => [e.code, e.identifier])).toEqual([
      ["duplicate_meter_event", "batch_0"],
      ["meter_event_invalid_value", "bad_1"],
    ]);
    const tooMany = await rejection(
      streamer.v2.billing.meterEventStream.create({ events: [...events, events[0] as (typeof events)[0]] }),
    );
    expect(tooMany).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);

    s.advancePaymentClock(15 * 60_000 + 1000);
    const expired = await rejection(
      streamer.v2.billing.meterEventStream.create({ events: [events[0] as (typeof events)[0]] }),
    );
    expect(expired).toBeInstanceOf(Stripe.errors.TemporarySessionExpiredError);
  });

  it("a stream call without a session is refused", async () => {
    const s = await sim();
    const res = await request(`${s.url}/v2/billing/meter_event_stream`, {
      method: "POST",
      headers: { authorization: "Bearer sim-payment-key", "content-type": "application/json" },
      body: JSON.stringify({ events: [] }),
    });
    expect(res.statusCode).toBe(401);
    expect(((await res.body.json()) as { error: { type: string } }).error.type).toBe(
      "temporary_session_expired",
    );
  });
});
