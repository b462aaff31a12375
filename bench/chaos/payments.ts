// Payment traffic beside the GPU work: each customer's subscription goes through a few states, its
// events are delivered in a shuffled order, and every delivery is posted 20 times at once, split
// across both sidecar replicas, signed Stripe-style (https://docs.stripe.com/webhooks#verify-manually).
// A delivery that got no 2xx (a replica down, a 409 while another replica processes it, a 429) is
// retried, as the provider retries. At the end: one PaymentEvent per event id, and every
// BillingAccount in the state of its customer's newest event.
import type { BillingAccount } from "../../src/crds/billingaccount.js";
import type { PaymentEvent } from "../../src/crds/paymentevent.js";
import type { KubeApi } from "../../src/k8s/api.js";
import { stripeSignature } from "../../tools/simulator/payment.js";
import type { Rng } from "./rng.js";

const PAYMENT_PATH = "/webhooks/payment_provider";
const REPLAYS = 20;

interface SubscriptionEvent {
  id: string;
  object: "event";
  type: string;
  created: number;
  livemode: false;
  data: { object: { id: string; object: "subscription"; customer: string; status: string } };
}

export interface PaymentPlan {
  events: SubscriptionEvent[];
  /** customer id -> the status its newest event carries. */
  expected: Map<string, string>;
}

const MIDDLE_STATES = ["active", "past_due", "unpaid", "active", "paused"];

/** Each customer: created (trialing), 1-4 updates, and a cancellation for about a third. Distinct `created` seconds. */
export function planPayments(rng: Rng, seed: number, customers: number): PaymentPlan {
  const events: SubscriptionEvent[] = [];
  const expected = new Map<string, string>();
  const base = Math.floor(Date.now() / 1000) - 86_400;
  for (let c = 0; c < customers; c++) {
    const customer = `cus_chaos${seed}x${c}`;
    const sub = `sub_chaos${seed}x${c}`;
    const states = ["trialing"];
    const updates = 1 + rng.int(4);
    for (let u = 0; u < updates; u++) states.push(rng.pick(MIDDLE_STATES));
    if (rng.next() < 1 / 3) states.push("canceled");
    states.forEach((status, k) => {
      const type =
        k === 0
          ? "customer.subscription.created"
          : status === "canceled"
            ? "customer.subscription.deleted"
            : "customer.subscription.updated";
      events.push({
        id: `evt_chaos${seed}x${c}x${k}`,
        object: "event",
        type,
        created: base + c * 100 + k * 7,
        livemode: false,
        data: { object: { id: sub, object: "subscription", customer, status } },
      });
    });
    expected.set(customer, states[states.length - 1]!);
  }
  rng.shuffle(events);
  return { events, expected };
}

export interface PaymentTraffic {
  posts: number;
  answers: Record<string, number>;
  /** Deliveries whose 20 concurrent posts all failed and were sent again. */
  retriedDeliveries: number;
  /** Events never answered 2xx before the deadline. */
  undelivered: number;
}

/** One signed post of an event to a sidecar: its HTTP status, or "connection-error". */
export async function postEvent(url: string, body: string, secret: string): Promise<string> {
  try {
    const res = await fetch(`${url}${PAYMENT_PATH}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "stripe-signature": stripeSignature(body, secret, Math.floor(Date.now() / 1000)),
      },
      body,
      signal: AbortSignal.timeout(15_000),
    });
    await res.arrayBuffer();
    return String(res.status);
  } catch {
    return "connection-error";
  }
}

/**
 * Delivers every event; event i waits until `progress()` (0..1, the GPU work's) reaches its share,
 * so the deliveries overlap the kills and the control plane restart.
 */
export async function sendPayments(opts: {
  plan: PaymentPlan;
  sidecars: () => string[];
  secret: string;
  progress: () => number;
  deadline: () => number;
  concurrency?: number;
}): Promise<PaymentTraffic> {
  const traffic: PaymentTraffic = { posts: 0, answers: {}, retriedDeliveries: 0, undelivered: 0 };
  const queue = opts.plan.events.map((event, i) => ({ event, at: (i / opts.plan.events.length) * 0.95 }));
  const worker = async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) {
      while (opts.progress() < item.at && Date.now() < opts.deadline())
        await new Promise((r) => setTimeout(r, 200));
      const body = JSON.stringify(item.event);
      for (let round = 0; ; round++) {
        if (Date.now() > opts.deadline()) {
          traffic.undelivered++;
          break;
        }
        const urls = opts.sidecars();
        const answers = await Promise.all(
          Array.from({ length: REPLAYS }, (_, k) => postEvent(urls[k % urls.length]!, body, opts.secret)),
        );
        traffic.posts += answers.length;
        for (const a of answers) traffic.answers[a] = (traffic.answers[a] ?? 0) + 1;
        if (answers.some((a) => a.startsWith("2"))) break;
        if (round === 0) traffic.retriedDeliveries++;
        await new Promise((r) => setTimeout(r, 1_000));
      }
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency ?? 3 }, worker));
  return traffic;
}

export interface PaymentCheck {
  events: number;
  /** Event ids with more than one PaymentEvent record. */
  duplicated: number;
  /** Event ids with no record at all. */
  unrecorded: number;
  /** Records whose outcome is not Processed. */
  notProcessed: number;
  /** Customers whose BillingAccount is missing or not in the newest event's state. */
  stale: Array<{ customer: string; expected: string; actual?: string }>;
}

export async function checkPayments(
  api: KubeApi,
  namespace: string,
  plan: PaymentPlan,
): Promise<PaymentCheck> {
  const records = (await api.list<PaymentEvent>("paymentevents", namespace)).items;
  const perEvent = new Map<string, PaymentEvent[]>();
  for (const r of records) perEvent.set(r.spec.eventId, [...(perEvent.get(r.spec.eventId) ?? []), r]);
  const ours = plan.events.map((e) => perEvent.get(e.id) ?? []);
  const accounts = (await api.list<BillingAccount>("billingaccounts", namespace)).items;
  const state = new Map(accounts.map((a) => [a.spec.customerId, a.status?.subscriptionStatus]));
  const stale = [...plan.expected]
    .filter(([customer, expected]) => state.get(customer) !== expected)
    .map(([customer, expected]) => ({ customer, expected, actual: state.get(customer) }));
  return {
    events: plan.events.length,
    duplicated: ours.filter((rs) => rs.length > 1).length,
    unrecorded: ours.filter((rs) => rs.length === 0).length,
    notProcessed: ours.flat().filter((r) => r.status?.outcome !== "Processed").length,
    stale,
  };
}
