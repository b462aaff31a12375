// The PaymentEvent record of one event: written once, after the event's effect, carrying the
// outcome in a label (a create cannot set status: the status subresource drops it), so a finished
// event costs one Kubernetes write. Status is written only when the record changes afterwards (a
// failed event that a redelivery processes). The status outcome, when present, is the newer one.
//
// The record holds only what it cannot derive: an Ignored event's explanation follows from its type,
// so it is not written (an annotation makes the apiserver's create about a fifth dearer, measured in
// docs/benchmarks-notes.md, and most event types are Ignored).
import {
  API_VERSION,
  GROUP,
  paymentEventName,
  type PaymentEvent,
  type PaymentEventSpec,
  type PaymentOutcome,
} from "../crds/index.js";

/** The outcome recorded when the record was created. */
export const OUTCOME_LABEL = `${GROUP}/outcome`;
/** What the outcome meant (the account it changed, or why not), recorded at creation. */
const MESSAGE_ANNOTATION = `${GROUP}/message`;

/** The outcome the record holds: its status, else the label it was created with. */
export function recordedOutcome(rec: PaymentEvent): PaymentOutcome | undefined {
  const fromStatus = rec.status?.outcome;
  if (fromStatus) return fromStatus;
  const label = rec.metadata.labels?.[OUTCOME_LABEL];
  return label === "Processed" || label === "Ignored" || label === "Failed" ? label : undefined;
}

/** Why an event of this type was Ignored: it needs nothing done. */
export const ignoredMessage = (type: string): string => `event type ${type} needs no action`;

export function recordedMessage(rec: PaymentEvent): string | undefined {
  const written = rec.status?.message ?? rec.metadata.annotations?.[MESSAGE_ANNOTATION];
  if (written !== undefined) return written;
  return recordedOutcome(rec) === "Ignored" ? ignoredMessage(rec.spec.type) : undefined;
}

/** Finished: nothing left to do for a redelivery. Failed (and a legacy Processing) are not. */
export const isFinished = (outcome: PaymentOutcome | undefined): boolean =>
  outcome === "Processed" || outcome === "Ignored";

export interface EventFacts {
  id: string;
  type: string;
  created: number;
  livemode?: boolean;
  customerId?: string;
}

export function newPaymentRecord(
  event: EventFacts,
  namespace: string,
  outcome: PaymentOutcome,
  message: string,
): PaymentEvent {
  const spec: PaymentEventSpec = {
    eventId: event.id,
    type: event.type,
    created: event.created,
    ...(event.customerId !== undefined ? { customerId: event.customerId } : {}),
    ...(event.livemode !== undefined ? { livemode: event.livemode } : {}),
  };
  const derivable = outcome === "Ignored" && message === ignoredMessage(event.type);
  return {
    apiVersion: API_VERSION,
    kind: "PaymentEvent",
    metadata: {
      name: paymentEventName(event.id),
      namespace,
      labels: { [OUTCOME_LABEL]: outcome },
      ...(!derivable && { annotations: { [MESSAGE_ANNOTATION]: message.slice(0, 1024) } }),
    },
    spec,
  };
}
