import { createHmac } from "node:crypto";
import { request, type Dispatcher } from "undici";
import { errorText } from "./callbacks.js";
import type { PaymentWebhook } from "./options.js";
import type { Rng } from "./random.js";

// A small stand-in for the payment provider: it signs events Stripe-style, posts them to the
// configured webhook URL, records each delivery, and re-sends one on
// POST /v1/webhooks/deliveries/{id}/redeliver. Each attempt is signed afresh with the current
// time, as Stripe does, so a redelivery days later still verifies.
//
// It also keeps each subscription's current state, as the provider's API reports it on
// GET /v1/subscriptions/{id} (https://docs.stripe.com/api/subscriptions/retrieve): the object of
// the last subscription event sent (a deleted subscription stays retrievable, status canceled),
// or one set directly (setSubscription), for tests that deliver events themselves.

interface PaymentAttempt {
  at: number;
  redelivery: boolean;
  ok: boolean;
  httpStatus?: number;
  error?: string;
}

export interface PaymentDelivery {
  id: string;
  eventId: string;
  eventType?: string;
  url: string;
  body: string;
  attempts: PaymentAttempt[];
}

/** `t=<unix>,v1=<hex HMAC-SHA256 of "t.body", keyed with the secret as text>`. */
export function stripeSignature(body: string, secret: string, unixSeconds: number): string {
  const mac = createHmac("sha256", secret).update(`${unixSeconds}.${body}`).digest("hex");
  return `t=${unixSeconds},v1=${mac}`;
}

/** A subscription as the provider's API returns it (the fields the sidecar reads, and a few more). */
export interface SimSubscription {
  id: string;
  object: "subscription";
  customer: string;
  status: string;
  [k: string]: unknown;
}

export class PaymentSender {
  readonly #deliveries = new Map<string, PaymentDelivery>();
  readonly #subscriptions = new Map<string, SimSubscription>();
  readonly #dispatcher: Dispatcher;
  readonly #rng: Rng;
  #webhook: PaymentWebhook | undefined;

  constructor(dispatcher: Dispatcher, rng: Rng, webhook?: PaymentWebhook) {
    this.#dispatcher = dispatcher;
    this.#rng = rng;
    this.#webhook = webhook;
  }

  setWebhook(webhook: PaymentWebhook | undefined): void {
    this.#webhook = webhook;
  }

  deliveries(): PaymentDelivery[] {
    return [...this.#deliveries.values()].map((d) => ({ ...d, attempts: [...d.attempts] }));
  }

  /** The subscription's current state, as GET /v1/subscriptions/{id} answers it. */
  subscription(id: string): SimSubscription | undefined {
    const sub = this.#subscriptions.get(id);
    return sub && { ...sub };
  }

  /** Sets a subscription's current state (what happened at the provider, delivered or not). */
  setSubscription(sub: { id: string; customer: string; status: string } & Record<string, unknown>): void {
    this.#subscriptions.set(sub.id, { ...sub, object: "subscription" });
  }

  /** A subscription event changes the subscription first: the event reports that change. */
  #track(event: Record<string, unknown>): void {
    const type = typeof event.type === "string" ? event.type : "";
    if (!type.startsWith("customer.subscription.")) return;
    const object = (event.data as { object?: Record<string, unknown> } | undefined)?.object;
    if (!object || typeof object.id !== "string" || typeof object.customer !== "string") return;
    const status = type === "customer.subscription.deleted" ? "canceled" : object.status;
    if (typeof status !== "string") return;
    this.setSubscription({ ...object, id: object.id, customer: object.customer, status });
  }

  /** Records and sends an event; `id`, `object` and `created` are filled in when missing. */
  async send(event: Record<string, unknown>): Promise<PaymentDelivery> {
    const webhook = this.#webhook;
    if (webhook === undefined) throw new Error("no payment webhook configured");
    this.#track(event);
    const full: Record<string, unknown> & { id: string } = {
      object: "event",
      created: Math.floor(Date.now() / 1000),
      ...event,
      id: typeof event.id === "string" ? event.id : `evt_${this.#rng.token(24)}`,
    };
    const delivery: PaymentDelivery = {
      id: `whdel_${this.#rng.token(24)}`,
      eventId: full.id,
      ...(typeof full.type === "string" && { eventType: full.type }),
      url: webhook.url,
      body: JSON.stringify(full),
      attempts: [],
    };
    this.#deliveries.set(delivery.id, delivery);
    await this.#post(delivery, webhook.secret, false);
    return delivery;
  }

  /** Re-sends a recorded delivery (same body, same event id); undefined if the id is unknown. */
  async redeliver(id: string): Promise<PaymentDelivery | undefined> {
    const delivery = this.#deliveries.get(id);
    if (delivery === undefined) return undefined;
    const webhook = this.#webhook;
    if (webhook === undefined) throw new Error("no payment webhook configured");
    // To the endpoint as configured now: the receiver may have moved since the first delivery.
    delivery.url = webhook.url;
    await this.#post(delivery, webhook.secret, true);
    return delivery;
  }

  async #post(delivery: PaymentDelivery, secret: string, redelivery: boolean): Promise<void> {
    const attempt: PaymentAttempt = { at: Date.now(), redelivery, ok: false };
    try {
      const res = await request(delivery.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "stripe-signature": stripeSignature(delivery.body, secret, Math.floor(Date.now() / 1000)),
        },
        body: delivery.body,
        signal: AbortSignal.timeout(10_000),
        dispatcher: this.#dispatcher,
      });
      await res.body.dump();
      attempt.httpStatus = res.statusCode;
      attempt.ok = res.statusCode >= 200 && res.statusCode < 300;
    } catch (err) {
      attempt.error = errorText(err);
    }
    delivery.attempts.push(attempt);
  }
}
