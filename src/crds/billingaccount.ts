import { createHash } from "node:crypto";
import { z } from "zod";
import {
  AGE_COLUMN,
  Conditions,
  ObjectMeta,
  Timestamp,
  Workload,
  type ResourceDefinition,
} from "./common.js";
import { UsageAttempt } from "./mediajob.js";

export const SubscriptionStatus = z.enum([
  "active",
  "trialing",
  "past_due",
  "canceled",
  "unpaid",
  "incomplete",
  "incomplete_expired",
  "paused",
]);
export type SubscriptionStatus = z.infer<typeof SubscriptionStatus>;

/** Subscription states in which the account's jobs are admitted. */
export const ADMITTING_STATES: ReadonlySet<string> = new Set(["active", "trialing"]);

const BillingAccountSpec = z.object({
  customerId: z.string().min(1).max(255).describe("The payment provider's customer id."),
});

/** GPU seconds of the current billing period, whole seconds as src/mediajob/usage.ts bills them. */
const BillingAccountUsage = z.object({
  periodStart: Timestamp.describe("Start of the billing period the figures are for."),
  periodEnd: Timestamp.optional().describe("End of the billing period the figures are for."),
  usedSeconds: z.int().min(0).describe("Billable GPU seconds of the period's ended jobs, reported or not."),
  reportedSeconds: z.int().min(0).describe("Of those, the seconds the payment provider has accepted."),
  limitSeconds: z
    .int()
    .min(0)
    .optional()
    .describe("The plan's GPU seconds for the period; absent: no plan limit."),
  counting: z
    .array(z.string().max(100))
    .max(1000)
    .optional()
    .describe(
      "Job attempts whose seconds were added to usedSeconds and are not yet marked counted on their " +
        "MediaJob: a controller that restarts between the two writes adds them once.",
    ),
});
export type BillingAccountUsage = z.infer<typeof BillingAccountUsage>;

/**
 * A run the provider may still do after its MediaJob was deleted without a cancel: followed at the
 * provider until it ends, then billed and metered to this account (src/mediajob/orphan.ts).
 */
const OrphanedRun = z.object({
  uid: z.string().max(64).describe("The deleted MediaJob's uid (its meter identifier's key)."),
  namespace: z.string().max(63).describe("The deleted MediaJob's namespace."),
  name: z.string().max(253).describe("The deleted MediaJob's name."),
  workload: Workload.describe("Its workload (the meter event name is chosen by it)."),
  account: z.string().max(255).describe("The customer billed: this account's customer id."),
  endpointId: z.string().max(256).describe("The provider's endpoint the run is on."),
  providerJobId: z.string().max(256).describe("The provider's id of the run."),
  attempt: z.int().min(1).describe("The job's attempt the run is."),
  deletedAt: Timestamp.describe("When the MediaJob was deleted."),
  usage: UsageAttempt.optional().describe(
    "The run's usage once the provider reported it ended, billed and metered as a job's attempt; " +
      "the record goes once it is reported (or not to be) and counted.",
  ),
});
export type OrphanedRun = z.infer<typeof OrphanedRun>;

export const BillingAccountStatus = z.object({
  subscriptionId: z.string().max(255).optional().describe("The payment provider's subscription id."),
  subscriptionStatus: SubscriptionStatus.optional().describe(
    "The subscription's state; the account's jobs are admitted while it is active or trialing.",
  ),
  priceIds: z
    .array(z.string().min(1).max(255))
    .max(20)
    .optional()
    .describe("The subscription's price ids, which select its plan."),
  subscriptionPeriod: z
    .object({
      start: Timestamp.describe(
        "current_period_start of the subscription (its items' in newer API versions).",
      ),
      end: Timestamp.describe("current_period_end: the plan's seconds count from start to end."),
    })
    .optional()
    .describe(
      "The subscription's current billing period, as the payment provider's newest event sent it; the " +
        "plan's GPU seconds count per this period (absent: per UTC calendar month).",
    ),
  usage: BillingAccountUsage.optional().describe("GPU seconds of the current billing period."),
  cost: z
    .object({
      periodStart: Timestamp.describe("The billing period the figures are for."),
      settledUntil: Timestamp.describe(
        "The provider's hourly buckets ending by this instant are settled: counted once.",
      ),
      settledMicros: z.int().min(0).describe("Micro-USD of the settled buckets allocated to this account."),
      settledExecutionMs: z.int().min(0).describe("Its jobs' execution ms inside the settled buckets."),
      allocatedMicros: z
        .int()
        .min(0)
        .describe(
          "Micro-USD of the provider's bill allocated to this account this period, open buckets included.",
        ),
      executionMs: z
        .int()
        .min(0)
        .describe("Its jobs' execution ms this period, as the allocation counted it."),
      workerCostMeteredMicros: z
        .int()
        .min(0)
        .optional()
        .describe(
          "Micro-USD of the settled buckets metered to the worker-cost meter this period " +
            "(USAGE_WORKER_COST_METER_EVENT_NAME).",
        ),
    })
    .optional()
    .describe(
      "The account's share of the GPU provider's bill this period, from the provider's billing history " +
        "(docs/design.md, Cost allocation).",
    ),
  lastEventId: z.string().max(255).optional().describe("event.id of the event that set this state."),
  lastEventCreated: z.int().min(0).optional().describe("event.created of the event that set this state."),
  updatedAt: Timestamp.optional().describe("When this state was written."),
  orphans: z
    .array(OrphanedRun)
    .max(100)
    .optional()
    .describe(
      "Runs of deleted MediaJobs that the provider may still bill: followed until they end, then billed.",
    ),
  conditions: Conditions.optional(),
});
export type BillingAccountStatus = z.infer<typeof BillingAccountStatus>;

export const BillingAccount = z.object({
  apiVersion: z.string(),
  kind: z.literal("BillingAccount"),
  metadata: ObjectMeta,
  spec: BillingAccountSpec,
  status: BillingAccountStatus.optional(),
});
export type BillingAccount = z.infer<typeof BillingAccount>;

/** A readable, collision-free object name for a customer id such as `cus_NffrFeUfNV2Hib`. */
export function billingAccountName(customerId: string): string {
  const readable = customerId
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40);
  const hash = createHash("sha256").update(customerId).digest("hex").slice(0, 10);
  return `${readable || "account"}-${hash}`;
}

/**
 * The customer's BillingAccount from a lookup by billingAccountName(): an object of that name whose
 * spec.customerId is another customer's is not this customer's account (the name keeps 40 bits of
 * a hash, and an object can be written by hand), so it is treated as not found. Every lookup of an
 * account goes through here.
 */
export function customerAccount<T extends { spec?: { customerId?: string } }>(
  found: T | undefined,
  customerId: string,
): T | undefined {
  return found?.spec?.customerId === customerId ? found : undefined;
}

/** The customer's BillingAccount in a cache, by its name and its customer id (customerAccount). */
export function findAccount(
  accounts: { get(namespace: string, name: string): BillingAccount | undefined },
  namespace: string,
  customerId: string,
): BillingAccount | undefined {
  return customerAccount(accounts.get(namespace, billingAccountName(customerId)), customerId);
}

export const billingAccountDefinition: ResourceDefinition = {
  kind: "BillingAccount",
  plural: "billingaccounts",
  singular: "billingaccount",
  shortNames: ["bacct"],
  description: "One customer's subscription state, from payment-provider events (newest event.created wins).",
  spec: BillingAccountSpec,
  status: BillingAccountStatus,
  admissionRules: [
    {
      field: "spec",
      expression: "object.spec == oldObject.spec",
      message: "spec is immutable",
      onUpdate: true,
    },
  ],
  printerColumns: [
    { name: "Customer", type: "string", jsonPath: ".spec.customerId" },
    { name: "Subscription", type: "string", jsonPath: ".status.subscriptionStatus" },
    { name: "Used", type: "integer", jsonPath: ".status.usage.usedSeconds", priority: 1 },
    { name: "Limit", type: "integer", jsonPath: ".status.usage.limitSeconds", priority: 1 },
    { name: "Updated", type: "date", jsonPath: ".status.updatedAt" },
    AGE_COLUMN,
    { name: "Prices", type: "string", jsonPath: ".status.priceIds", priority: 1 },
  ],
};
