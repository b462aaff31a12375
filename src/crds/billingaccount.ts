import { createHash } from "node:crypto";
import { z } from "zod";
import { AGE_COLUMN, Conditions, ObjectMeta, Timestamp, type ResourceDefinition } from "./common.js";

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

export const BillingAccountSpec = z.object({
  customerId: z.string().min(1).max(255).describe("The payment provider's customer id."),
});

export const BillingAccountStatus = z.object({
  subscriptionId: z.string().max(255).optional(),
  subscriptionStatus: SubscriptionStatus.optional(),
  lastEventId: z.string().max(255).optional(),
  lastEventCreated: z.int().min(0).optional().describe("event.created of the event that set this state."),
  updatedAt: Timestamp.optional(),
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

export const billingAccountDefinition: ResourceDefinition = {
  kind: "BillingAccount",
  plural: "billingaccounts",
  singular: "billingaccount",
  shortNames: ["bacct"],
  description: "One customer's subscription state, from payment-provider events (newest event.created wins).",
  spec: BillingAccountSpec,
  status: BillingAccountStatus,
  specValidations: [{ rule: "self == oldSelf", message: "spec is immutable", reason: "FieldValueInvalid" }],
  printerColumns: [
    { name: "Customer", type: "string", jsonPath: ".spec.customerId" },
    { name: "Subscription", type: "string", jsonPath: ".status.subscriptionStatus" },
    { name: "Updated", type: "date", jsonPath: ".status.updatedAt" },
    AGE_COLUMN,
  ],
};
