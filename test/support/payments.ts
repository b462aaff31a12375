// Payment provider deliveries as the provider sends them: an event (https://docs.stripe.com/api/events/object)
// posted as JSON with a Stripe-Signature header made with the endpoint's signing secret
// (https://docs.stripe.com/webhooks#verify-events).
import { randomBytes } from "node:crypto";
import { request } from "undici";
import { signStripePayload } from "../../src/webhooks/signature.js";

/** The sidecar's route for the payment provider's webhooks. */
const PAYMENT_WEBHOOK_PATH = "/webhooks/payment_provider";

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** An event of `type` about `object`, with an id of its own, created now. */
export function paymentEvent(type: string, object: Record<string, unknown> = {}) {
  return {
    id: `evt_${randomBytes(6).toString("hex")}`,
    object: "event",
    type,
    created: nowSeconds(),
    livemode: false,
    data: { object },
  };
}

/** The customer's subscription, created active: the event after which its jobs are admitted. */
export const subscriptionCreated = (customer: string, subscriptionId = `sub_${customer}`) =>
  paymentEvent("customer.subscription.created", {
    id: subscriptionId,
    object: "subscription",
    customer,
    status: "active",
  });

/** `event`'s body and headers, signed now with `secret`. */
export function signedDelivery(
  event: object,
  secret: string,
): { body: string; headers: Record<string, string> } {
  const body = JSON.stringify(event);
  return {
    body,
    headers: {
      "content-type": "application/json",
      "stripe-signature": signStripePayload(body, secret, nowSeconds()),
    },
  };
}

/** Delivers `event`, signed with `secret`, to the sidecar at `baseUrl`: the answer's status and text. */
export async function deliverPaymentEvent(
  baseUrl: string,
  event: object,
  secret: string,
): Promise<{ status: number; text: string }> {
  const res = await request(`${baseUrl}${PAYMENT_WEBHOOK_PATH}`, {
    method: "POST",
    ...signedDelivery(event, secret),
  });
  return { status: res.statusCode, text: await res.body.text() };
}
