// The payment provider's meter event call against the simulator's Billing Meters (Stripe's
// dialect over loopback HTTP): what counts as recorded, what is tried again, what is refused for
// good, and that the key never appears in a reason.
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
