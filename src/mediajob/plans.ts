// Plans that cap an account's spend, and the admission verdict they give a job, as pure rules.
// A plan is configuration keyed by the payment provider's price id: the subscription's price(s)
// select it. Seconds are whole GPU seconds as usage.ts bills them.
import { isCurrentUsage, type SubscriptionPeriod } from "../billing/period.js";
import { z } from "zod";

// RunPod's per-request policy.executionTimeout: 5 s to 7 days
// (https://docs.runpod.io/serverless/endpoints/send-requests#execution-policies).
const EXECUTION_TIMEOUT_MIN_MS = 5_000;
const EXECUTION_TIMEOUT_MAX_MS = 7 * 24 * 3_600_000;

const PlanSchema = z.strictObject({
  /** GPU seconds the account may use per billing period. */
  gpuSecondsPerPeriod: z.int().min(0).max(Number.MAX_SAFE_INTEGER),
  /** Jobs of the account that may run at once; absent: no cap. */
  maxConcurrentJobs: z.int().min(1).optional(),
  /** The longest policy.executionTimeout a job may run with, and the one a job without its own gets. */
  maxExecutionTimeoutMs: z.int().min(EXECUTION_TIMEOUT_MIN_MS).max(EXECUTION_TIMEOUT_MAX_MS),
  /** The account's weight in fair share at the provider (src/mediajob/fair-share.ts); absent: 1. */
  fairShareWeight: z.number().positive().max(1000).optional(),
});
export type Plan = z.infer<typeof PlanSchema>;

/** Plans by price id (`price_...`). */
export const PlansSchema = z.record(z.string().min(1).max(255), PlanSchema);
export type Plans = z.infer<typeof PlansSchema>;

/**
 * The limits of a subscription with these prices. Several priced items whose plans are known
 * (a base plan and a pack of extra seconds) add their seconds; concurrency, timeout and
 * fair-share weight take the most generous. Undefined when no price has a plan.
 */
export function planFor(plans: Plans, priceIds: readonly string[]): Plan | undefined {
  const found = [...new Set(priceIds)].flatMap((p) => (Object.hasOwn(plans, p) ? [plans[p] as Plan] : []));
  if (found.length === 0) return undefined;
  const caps = found.map((p) => p.maxConcurrentJobs);
  return {
    gpuSecondsPerPeriod: Math.min(
      Number.MAX_SAFE_INTEGER,
      found.reduce((sum, p) => sum + p.gpuSecondsPerPeriod, 0),
    ),
    ...(caps.every((c) => c !== undefined) && { maxConcurrentJobs: Math.max(...caps) }),
    maxExecutionTimeoutMs: Math.max(...found.map((p) => p.maxExecutionTimeoutMs)),
    ...(found.some((p) => p.fairShareWeight !== undefined) && {
      fairShareWeight: Math.max(...found.map((p) => p.fairShareWeight ?? 1)),
    }),
  };
}

/** BillingAccount.status.usage as the plans read it. */
export interface PeriodUsage {
  usedSeconds: number;
  periodStart: string;
  periodEnd?: string | undefined;
}

/**
 * The GPU seconds the account has used in the billing period current at `nowMs` (the
 * subscription's own when the provider sent one, src/billing/period.ts): none recorded yet is 0,
 * and so are figures of another period (last period's, until the next job's usage starts the new
 * one).
 */
export function usedSecondsNow(
  usage: PeriodUsage | undefined,
  nowMs: number,
  subscriptionPeriod?: SubscriptionPeriod,
): number {
  if (!usage) return 0;
  return isCurrentUsage(usage, new Date(nowMs), subscriptionPeriod) ? usage.usedSeconds : 0;
}

export interface AdmissionInput {
  /** Configured plans; an empty set turns plan limits off (every job is admitted as before). */
  plans: Plans;
  /** The subscription's price ids. */
  priceIds: readonly string[];
  /** GPU seconds the account has used in the current billing period (reported or not). */
  usedSeconds: number;
  /** The account's jobs that are submitted and not yet ended, this one excluded. */
  runningJobs: number;
  /** The job's own spec.executionTimeout, ms, if it sets one. */
  executionTimeoutMs?: number;
}

export type AdmissionVerdict =
  /** Submit with this policy.executionTimeout (undefined: no plans are configured, none is imposed). */
  | { admitted: true; executionTimeoutMs?: number }
  | { admitted: false; reason: AdmissionReason; message: string };

type AdmissionReason =
  "NoPlan" | "UsageLimitReached" | "ConcurrencyLimitReached" | "ExecutionTimeoutAbovePlan";

/**
 * Whether a job of an account whose subscription is admitting may start now. Every refusal is a
 * wait, not a failure: the period rolls over, a job ends, or the plan changes. A job whose own
 * timeout exceeds the plan's waits for a plan that allows it, because running it shorter than it
 * asked would bill seconds for a result it cannot reach.
 */
export function admission(input: AdmissionInput): AdmissionVerdict {
  const { plans, priceIds, usedSeconds, runningJobs, executionTimeoutMs } = input;
  if (Object.keys(plans).length === 0)
    return { admitted: true, ...(executionTimeoutMs !== undefined && { executionTimeoutMs }) };
  const plan = planFor(plans, priceIds);
  if (plan === undefined)
    return {
      admitted: false,
      reason: "NoPlan",
      message:
        priceIds.length === 0
          ? "the account's subscription has no price recorded yet"
          : `no plan is configured for price ${priceIds.join(", ")}`,
    };
  // The messages name the plan's figures, not the account's moving ones: a waiting job's condition
  // (and its Event) changes when the verdict does, not with every job that ends meanwhile.
  if (usedSeconds >= plan.gpuSecondsPerPeriod)
    return {
      admitted: false,
      reason: "UsageLimitReached",
      message: `the account has used the ${plan.gpuSecondsPerPeriod} GPU seconds its plan allows this billing period; the job waits for the next period or a larger plan`,
    };
  if (plan.maxConcurrentJobs !== undefined && runningJobs >= plan.maxConcurrentJobs)
    return {
      admitted: false,
      reason: "ConcurrencyLimitReached",
      message: `the account runs the ${plan.maxConcurrentJobs} jobs at once its plan allows; the job waits for one to end`,
    };
  if (executionTimeoutMs !== undefined && executionTimeoutMs > plan.maxExecutionTimeoutMs)
    return {
      admitted: false,
      reason: "ExecutionTimeoutAbovePlan",
      message: `executionTimeout ${executionTimeoutMs} ms is above the plan's ${plan.maxExecutionTimeoutMs} ms`,
    };
  return { admitted: true, executionTimeoutMs: executionTimeoutMs ?? plan.maxExecutionTimeoutMs };
}
