// The rule a payment-provider meter must meet for the usage sent to it to be billed as sent: the
// customer and value read from the keys the meter client sends, summed, not pre-aggregated, active.
import { describe, expect, it } from "vitest";
import { describeVerdict, judgeMeters, meterProblems } from "../../src/config/meter-rule.js";

// A meter as Stripe's API returns it (https://docs.stripe.com/api/billing/meter/object).
const meter = (over: Record<string, unknown> = {}) => ({
  id: "mtr_1",
  object: "billing.meter",
  event_name: "gpu_seconds",
  status: "active",
  customer_mapping: { event_payload_key: "stripe_customer_id", type: "by_id" },
  value_settings: { event_payload_key: "value" },
  default_aggregation: { formula: "sum" },
  event_time_window: null,
  ...over,
});

describe("meter rule", () => {
  it("a summing meter on the default keys, not pre-aggregated, is right", () => {
    expect(meterProblems(meter())).toEqual([]);
    expect(judgeMeters([meter()], ["gpu_seconds"]).get("gpu_seconds")).toEqual({
      ok: true,
      meterId: "mtr_1",
    });
  });

  it.each([
    [
      "another customer key",
      { customer_mapping: { event_payload_key: "customer", type: "by_id" } },
      /customer_mapping\.event_payload_key is "customer"/,
    ],
    [
      "another value key",
      { value_settings: { event_payload_key: "seconds" } },
      /value_settings\.event_payload_key is "seconds"/,
    ],
    ["count", { default_aggregation: { formula: "count" } }, /formula is "count", not "sum"/],
    ["last", { default_aggregation: { formula: "last" } }, /formula is "last", not "sum"/],
    [
      "an hourly pre-aggregation",
      { event_time_window: "hour" },
      /event_time_window is "hour": the meter pre-aggregates/,
    ],
    ["an inactive meter", { status: "inactive" }, /status is inactive/],
    [
      "no value settings at all",
      { value_settings: undefined },
      /value_settings\.event_payload_key is undefined/,
    ],
  ])("%s is a problem", (_name, over, problem) => {
    const problems = meterProblems(meter(over));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(problem);
  });

  it("judges each configured event name: missing meters, several at once, the active one of several", () => {
    const verdicts = judgeMeters(
      [
        meter({ id: "mtr_old", status: "inactive", default_aggregation: { formula: "last" } }),
        meter({ id: "mtr_new" }),
        meter({
          id: "mtr_r",
          event_name: "render_seconds",
          default_aggregation: { formula: "count" },
          event_time_window: "day",
        }),
      ],
      ["gpu_seconds", "render_seconds", "asr_seconds", "gpu_seconds"],
    );
    expect([...verdicts.keys()]).toEqual(["gpu_seconds", "render_seconds", "asr_seconds"]);
    expect(verdicts.get("gpu_seconds")).toEqual({ ok: true, meterId: "mtr_new" });
    const render = verdicts.get("render_seconds");
    expect(render?.ok).toBe(false);
    expect(describeVerdict("render_seconds", render!)).toMatch(
      /^render_seconds \(mtr_r\): default_aggregation.*; event_time_window/,
    );
    expect(verdicts.get("asr_seconds")).toEqual({
      ok: false,
      problems: ['no meter has event_name "asr_seconds"'],
    });
  });
});
