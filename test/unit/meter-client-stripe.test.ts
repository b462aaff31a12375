// The meter event call against Stripe's real behaviour, on the simulator: a 5xx is saved under
// its Idempotency-Key and replayed for it (https://docs.stripe.com/api/idempotent_requests), so
// the try after a 5xx takes a new key and the identifier keeps the event single; a repeated
// identifier is refused with "An event already exists with identifier …" and no `param`, which
// means the event is recorded.
import { afterEach, describe, expect, it } from "vitest";
import { MeterClient, type MeterEvent } from "../../src/controller/usage/meter-client.js";
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

const client = (s: Simulator) => new MeterClient({ baseUrl: s.url, apiKey: () => "sim-payment-key" });
const event = (o: Partial<MeterEvent> = {}): MeterEvent => ({
  eventName: "gpu_seconds",
  customer: "cus_1",
  value: 3,
  identifier: "mj_uid-1_1",
  timestamp: Math.floor(Date.now() / 1000) - 60,
  ...o,
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
