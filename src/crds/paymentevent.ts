import { createHash } from "node:crypto";
import { z } from "zod";
import { AGE_COLUMN, Conditions, ObjectMeta, Timestamp, type ResourceDefinition } from "./common.js";

export const PaymentOutcome = z.enum(["Processing", "Processed", "Failed", "Ignored"]);
export type PaymentOutcome = z.infer<typeof PaymentOutcome>;

/** The facts of one verified payment-provider event; written once, at the dedupe claim. */
export const PaymentEventSpec = z.object({
  eventId: z.string().min(1).max(255).describe("The provider's event.id (the dedupe key)."),
  type: z.string().min(1).max(255),
  created: z.int().min(0).describe("event.created, seconds since the epoch."),
  customerId: z.string().max(255).optional(),
  livemode: z.boolean().optional(),
});
export type PaymentEventSpec = z.infer<typeof PaymentEventSpec>;

export const PaymentEventStatus = z.object({
  outcome: PaymentOutcome.optional(),
  message: z.string().max(4096).optional(),
  attempts: z.int().min(0).optional(),
  deliveries: z
    .int()
    .min(0)
    .optional()
    .describe("How many deliveries of this event arrived (replays included)."),
  processedAt: Timestamp.optional(),
  lastDeliveryAt: Timestamp.optional(),
  conditions: Conditions.optional(),
});
export type PaymentEventStatus = z.infer<typeof PaymentEventStatus>;

export const PaymentEvent = z.object({
  apiVersion: z.string(),
  kind: z.literal("PaymentEvent"),
  metadata: ObjectMeta,
  spec: PaymentEventSpec,
  status: PaymentEventStatus.optional(),
});
export type PaymentEvent = z.infer<typeof PaymentEvent>;

/** Kubernetes names cannot hold provider ids (`evt_1Nx…`), so the name is a hash of the id. */
export function paymentEventName(eventId: string): string {
  return `pe-${createHash("sha256").update(eventId).digest("hex").slice(0, 40)}`;
}

export const paymentEventDefinition: ResourceDefinition = {
  kind: "PaymentEvent",
  plural: "paymentevents",
  singular: "paymentevent",
  shortNames: ["payev"],
  description: "One verified payment-provider event; creating it is the dedupe claim on event.id.",
  spec: PaymentEventSpec,
  status: PaymentEventStatus,
  specValidations: [{ rule: "self == oldSelf", message: "spec is immutable", reason: "FieldValueInvalid" }],
  printerColumns: [
    { name: "Event", type: "string", jsonPath: ".spec.eventId" },
    { name: "Type", type: "string", jsonPath: ".spec.type" },
    { name: "Outcome", type: "string", jsonPath: ".status.outcome" },
    { name: "Deliveries", type: "integer", jsonPath: ".status.deliveries" },
    AGE_COLUMN,
  ],
};
