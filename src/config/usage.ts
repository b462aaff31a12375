// The usage configuration (billing rule, meter event names, metering on or off) from the
// environment, as the controller's pure domain reads it (src/mediajob/usage.ts, UsageSettings).
import { BillingRuleSchema, type UsageSettings } from "../mediajob/usage.js";
import { ConfigError, type Env } from "./env.js";
import { parseEventNames } from "./meter-event-names.js";

/** Metering is on when asked for, or by default when there is a payment API key to meter with. */
function meteringEnabled(env: Env): boolean {
  return env.USAGE_METERING ?? env.PAYMENT_PROVIDER_API_KEY !== undefined;
}

/**
 * Every job must bill an account when plans or metering are configured, unless
 * TENANCY_REQUIRE_ACCOUNT says otherwise (docs/design.md, "Tenancy"): a job whose namespace is
 * bound to no account (or to several, and it names none) then waits, AccountNotBound.
 */
export function accountRequired(env: Env): boolean {
  return env.TENANCY_REQUIRE_ACCOUNT ?? (Object.keys(env.MEDIA_PLANS).length > 0 || meteringEnabled(env));
}

/**
 * Why the billed time is refused, or undefined. `executionAndDelay` adds RunPod's `delayTime`, the
 * time a request waits in the queue (cold start included), to each job's bill: that wait is not
 * worker time the provider bills, and it grows with every other customer's jobs queued on the same
 * endpoint, so one customer pays for another's traffic (docs/design.md, "Provider billing facts").
 * It starts only when USAGE_QUEUE_WAIT_BILLING_ACKNOWLEDGED says so.
 */
function billedTimeRefusal(
  env: Pick<Env, "USAGE_BILLED_TIME" | "USAGE_QUEUE_WAIT_BILLING_ACKNOWLEDGED">,
): string | undefined {
  if (env.USAGE_BILLED_TIME !== "executionAndDelay" || env.USAGE_QUEUE_WAIT_BILLING_ACKNOWLEDGED)
    return undefined;
  return "USAGE_BILLED_TIME: executionAndDelay bills queue wait, which is not the provider's cost and depends on other customers' traffic; set USAGE_QUEUE_WAIT_BILLING_ACKNOWLEDGED=true to bill it anyway";
}

/**
 * The usage settings. The controller's refuse metering without a payment API key; the sidecar's
 * only bill (the controller decides what is metered).
 */
export function usageSettings(env: Env, opts: { sidecar?: boolean } = {}): UsageSettings {
  const metering = meteringEnabled(env);
  if (metering && !opts.sidecar && env.PAYMENT_PROVIDER_API_KEY === undefined)
    throw new ConfigError([
      "PAYMENT_PROVIDER_API_KEY: required by the controller when USAGE_METERING is true",
    ]);
  const refused = opts.sidecar ? undefined : billedTimeRefusal(env);
  if (refused !== undefined) throw new ConfigError([refused]);
  return {
    rule: BillingRuleSchema.parse({
      billedTime: env.USAGE_BILLED_TIME,
      minimumSeconds: env.USAGE_MINIMUM_SECONDS,
      billFailed: env.USAGE_BILL_FAILED,
    }),
    metering,
    eventNames: env.USAGE_METER_EVENT_NAMES ? (parseEventNames(env.USAGE_METER_EVENT_NAMES) ?? {}) : {},
    defaultEventName: env.USAGE_METER_EVENT_NAME,
    ...(env.USAGE_WORKER_COST_METER_EVENT_NAME !== undefined && {
      workerCostEventName: env.USAGE_WORKER_COST_METER_EVENT_NAME,
    }),
  };
}
