// The payment provider's meter is read and checked against what is sent, against the real control
// plane and the simulator's Stripe side: a meter that would bill something else (here `last`
// instead of `sum`, which bills a customer only its latest job) is a condition on the
// BillingAccount, a gauge, and nothing is sent to it: the usage waits Pending, unstamped. Once the
// meter is replaced by a right one, the waiting usage is sent, once.
import { describe, expect, it } from "vitest";
import { billingAccountName, type BillingAccount } from "../../src/crds/billingaccount.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { request } from "undici";
import { eventually, testKubeConfig } from "../support/kube.js";
import {
  GPU_SECONDS_METER,
  controllerStackForTests,
  mediaJob,
  meteredStackOptions,
  waitForPhase,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const CUSTOMER = "cus_meter_check";
const stack = controllerStackForTests(kc, {
  ...meteredStackOptions("meter-check", {
    sim: { meters: [{ ...GPU_SECONDS_METER, formula: "last" }] },
    accounts: [CUSTOMER],
  }),
  manager: (env, sim) => ({ env: { ...env, PAYMENT_PROVIDER_API_URL: sim.url }, meterRecheckMs: 300 }),
});

const getJob = (name: string) => api.get<MediaJob>("mediajobs", stack.ns, name);
const getAccount = () => api.get<BillingAccount>("billingaccounts", stack.ns, billingAccountName(CUSTOMER));
const condition = async () =>
  (await getAccount())?.status?.conditions?.find((c) => c.type === "MetersConfigured");
const gauge = async () =>
  (await stack.manager.metrics.registry.getSingleMetricAsString(
    "media_orchestrator_usage_meter_misconfigured",
  )) ?? "";

describe("meter configuration checked", () => {
  it("a meter that does not sum holds the usage, visibly, until it is replaced; then it is sent once", async () => {
    await eventually(async () => (await condition())?.status === "False", { timeoutMs: 30_000 });
    const held = await condition();
    expect(held).toMatchObject({ reason: "MeterMisconfigured" });
    expect(held?.message).toMatch(
      /gpu_seconds \(mtr_gpu\): default_aggregation\.formula is "last", not "sum"/,
    );
    expect(await gauge()).toMatch(
      /media_orchestrator_usage_meter_misconfigured\{event_name="gpu_seconds"\} 1/,
    );

    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("held-1", { workload: "asr", account: CUSTOMER }) as never,
    );
    await waitForPhase(api, stack.ns, "held-1", "Completed");
    await eventually(async () => ((await getJob("held-1"))?.status?.usage?.attempts ?? []).length === 1);
    // Several report passes later (one a second) nothing went out and nothing was stamped as sent.
    await new Promise((r) => setTimeout(r, 3_000));
    const waiting = (await getJob("held-1"))?.status?.usage?.attempts[0];
    expect(waiting).toMatchObject({ meter: "Pending" });
    expect(waiting?.firstSentAt).toBeUndefined();
    expect(stack.sim.meterEvents()).toEqual([]);

    // Fixed at the provider: the wrong meter deactivated, a summing one for the same event name.
    const res = await request(`${stack.sim.url}/v1/billing/meters/mtr_gpu/deactivate`, {
      method: "POST",
      headers: { authorization: "Bearer sim-payment-key" },
    });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    stack.sim.createMeter({ id: "mtr_gpu_sum", event_name: "gpu_seconds", formula: "sum" });

    await eventually(async () => (await getJob("held-1"))?.status?.usage?.attempts[0]?.meter === "Reported", {
      timeoutMs: 30_000,
    });
    const job = (await getJob("held-1"))!;
    expect(stack.sim.meterEvents()).toMatchObject([
      { identifier: `mj_${job.metadata.uid}_1`, meterId: "mtr_gpu_sum", customer: CUSTOMER },
    ]);
    await eventually(async () => (await condition())?.status === "True");
    expect(await gauge()).toMatch(
      /media_orchestrator_usage_meter_misconfigured\{event_name="gpu_seconds"\} 0/,
    );
  }, 120_000);
});
