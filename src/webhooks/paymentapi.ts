// The payment provider's API, for the one question the sidecar asks it: a subscription's current
// state (and prices), when two events of the same second disagree (event order alone cannot tell which is
// newer). GET {PAYMENT_PROVIDER_API_URL}/v1/subscriptions/{id} with the secret key as a Bearer
// token, as Stripe's API answers it: https://docs.stripe.com/api/subscriptions/retrieve
import {
  failureKind,
  keepAlivePools,
  poolFor,
  send,
  text as readText,
  type HttpAnswer,
} from "../http/client.js";
import { z } from "zod";
import { SubscriptionStatus } from "../crds/index.js";

// A subscription's items, each with its price (an object, or its id when not expanded):
// https://docs.stripe.com/api/subscriptions/object#subscription_object-items. Stripe allows 20
// items per subscription, the most BillingAccount.status.priceIds holds.
const PriceRef = z.union([z.string().min(1).max(255), z.object({ id: z.string().min(1).max(255) })]);
const UnixSeconds = z
  .int()
  .min(0)
  .max(2 ** 40);
/**
 * The current billing period's bounds, unix seconds: on each subscription item from API version
 * 2025-03-31.basil on, on the subscription itself before it
 * (https://docs.stripe.com/changelog/basil/2025-03-31/deprecate-subscription-current-period-start-and-end).
 */
const PeriodBounds = {
  current_period_start: UnixSeconds.optional(),
  current_period_end: UnixSeconds.optional(),
};
export const SubscriptionItems = z.object({
  data: z.array(z.object({ price: PriceRef, ...PeriodBounds })).max(20),
});

/** The distinct price ids of the items, sorted: the same subscription always reads the same. */
export function subscriptionPriceIds(items: z.infer<typeof SubscriptionItems>): string[] {
  return [...new Set(items.data.map((i) => (typeof i.price === "string" ? i.price : i.price.id)))].sort();
}

/** A subscription's current period, ISO instants. */
export interface SubscriptionPeriod {
  start: string;
  end: string;
}

type Bounds = { current_period_start?: number | undefined; current_period_end?: number | undefined };

/**
 * The subscription's current billing period: its items' (the one ending first, when items renew
 * apart), else the subscription's own fields of older API versions; undefined when neither says.
 */
export function subscriptionPeriod(sub: Bounds & { items?: z.infer<typeof SubscriptionItems> | undefined }) {
  const whole = (b: Bounds) =>
    b.current_period_start !== undefined &&
    b.current_period_end !== undefined &&
    b.current_period_end > b.current_period_start;
  const items = (sub.items?.data ?? []).filter(whole);
  const first = items.sort(
    (a, b) =>
      a.current_period_end! - b.current_period_end! || a.current_period_start! - b.current_period_start!,
  )[0];
  const bounds = first ?? (whole(sub) ? sub : undefined);
  if (!bounds) return undefined;
  const iso = (s: number) => new Date(s * 1000).toISOString();
  return {
    start: iso(bounds.current_period_start!),
    end: iso(bounds.current_period_end!),
  } satisfies SubscriptionPeriod;
}

/** A subscription object's fields the sidecar reads (events and the retrieve answer alike). */
export const SubscriptionFields = {
  status: SubscriptionStatus,
  items: SubscriptionItems.optional(),
  ...PeriodBounds,
};

const SubscriptionObject = z.object({ id: z.string(), ...SubscriptionFields });

/** A subscription as the provider has it now: its state and, when it lists them, its prices and period. */
export interface CurrentSubscription {
  status: SubscriptionStatus;
  priceIds?: string[];
  period?: SubscriptionPeriod;
}

class PaymentApiError extends Error {
  constructor(
    message: string,
    readonly statusCode?: number,
  ) {
    super(message);
    this.name = "PaymentApiError";
  }
}

export interface SubscriptionLookup {
  /** The subscription now, as the provider has it. Throws PaymentApiError. */
  current(subscriptionId: string): Promise<CurrentSubscription>;
}

export class PaymentApi implements SubscriptionLookup {
  constructor(
    private readonly opts: {
      baseUrl: string;
      apiKey: string;
      timeoutMs?: number;
    },
  ) {}

  readonly #pools = keepAlivePools();

  async current(subscriptionId: string): Promise<CurrentSubscription> {
    const url = `${this.opts.baseUrl}/v1/subscriptions/${encodeURIComponent(subscriptionId)}`;
    let res: HttpAnswer;
    let text: string;
    try {
      res = await send(url, {
        agent: poolFor(this.#pools, url),
        method: "GET",
        headers: { authorization: `Bearer ${this.opts.apiKey}`, accept: "application/json" },
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 5_000),
      });
      text = await readText(res.body);
    } catch (err) {
      // Never the URL's query or the key: the error text reaches logs and the record's message.
      const what = failureKind(err);
      throw new PaymentApiError(`payment provider unreachable (${what}) retrieving a subscription`);
    }
    if (res.statusCode !== 200)
      throw new PaymentApiError(
        `payment provider answered HTTP ${res.statusCode} retrieving a subscription`,
        res.statusCode,
      );
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new PaymentApiError("payment provider answered a subscription that is not JSON", 200);
    }
    const sub = SubscriptionObject.safeParse(body);
    if (!sub.success || sub.data.id !== subscriptionId)
      throw new PaymentApiError("payment provider answered an unusable subscription object", 200);
    const period = subscriptionPeriod(sub.data);
    return {
      status: sub.data.status,
      ...(sub.data.items && { priceIds: subscriptionPriceIds(sub.data.items) }),
      ...(period && { period }),
    };
  }
}
