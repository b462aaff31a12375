import { createHash } from "node:crypto";
import { z } from "zod";
import { AGE_COLUMN, Conditions, GROUP, ObjectMeta, Timestamp, type ResourceDefinition } from "./common.js";

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

/**
 * Status is written only when a record changes after its creation (a Failed event that a later
 * delivery processes): a record's first outcome and message are the label and annotation it was
 * created with, which is what the printer columns show.
 */
export const PaymentEventStatus = z.object({
  outcome: PaymentOutcome.optional().describe(
    "The outcome of the latest delivery that changed the record; absent while the outcome the record " +
      "was created with (label media-orchestrator.io/outcome) still holds.",
  ),
  message: z
    .string()
    .max(4096)
    .optional()
    .describe("What that outcome meant (the account it changed, or why it failed)."),
  attempts: z.int().min(0).optional().describe("Deliveries that ran the event's effect."),
  deliveries: z
    .int()
    .min(0)
    .optional()
    .describe("How many deliveries of this event arrived (replays included); absent: one, the first."),
  processedAt: Timestamp.optional().describe("When a delivery processed the event."),
  lastDeliveryAt: Timestamp.optional().describe("When the latest delivery that changed the record came."),
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

/** The group in a JSONPath key: its dots escaped, or they would read as steps of the path. */
const escapedGroup = GROUP.replaceAll(".", "\\.");

export const paymentEventDefinition: ResourceDefinition = {
  kind: "PaymentEvent",
  plural: "paymentevents",
  singular: "paymentevent",
  shortNames: ["payev"],
  description: "One verified payment-provider event; creating it is the dedupe claim on event.id.",
  spec: PaymentEventSpec,
  status: PaymentEventStatus,
  admissionRules: [
    {
      field: "spec",
      expression: "object.spec == oldObject.spec",
      message: "spec is immutable",
      onUpdate: true,
    },
  ],
  printerColumns: [
    { name: "Event", type: "string", jsonPath: ".spec.eventId" },
    { name: "Type", type: "string", jsonPath: ".spec.type" },
    // A record is created with its outcome in a label (one write); status follows only when a
    // later delivery changes it, so the first outcome is read from the label.
    {
      name: "Outcome",
      type: "string",
      jsonPath: `.metadata.labels.${escapedGroup}/outcome`,
      description: "The outcome the record was created with.",
    },
    {
      name: "Latest",
      type: "string",
      jsonPath: ".status.outcome",
      description: "The outcome of a later delivery that changed the record (a Failed event processed).",
    },
    AGE_COLUMN,
    {
      name: "Message",
      type: "string",
      jsonPath: `.metadata.annotations.${escapedGroup}/message`,
      priority: 1,
    },
    {
      name: "Deliveries",
      type: "integer",
      jsonPath: ".status.deliveries",
      description: "Deliveries of the event; blank: one.",
      priority: 1,
    },
  ],
};
