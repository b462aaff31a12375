// The payment provider's API, for the one question the sidecar asks it: a subscription's current
// state, when two events of the same second disagree (event order alone cannot tell which is
// newer). GET {PAYMENT_PROVIDER_API_URL}/v1/subscriptions/{id} with the secret key as a Bearer
// token, as Stripe's API answers it: https://docs.stripe.com/api/subscriptions/retrieve
import { request, type Dispatcher } from "undici";
import { z } from "zod";
import { SubscriptionStatus } from "../crds/index.js";

const SubscriptionObject = z.object({ id: z.string(), status: SubscriptionStatus });

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
  /** The subscription's status now, as the provider has it. Throws PaymentApiError. */
  currentStatus(subscriptionId: string): Promise<SubscriptionStatus>;
}

export class PaymentApi implements SubscriptionLookup {
  constructor(
    private readonly opts: {
      baseUrl: string;
      apiKey: string;
      timeoutMs?: number;
      dispatcher?: Dispatcher;
    },
  ) {}

  async currentStatus(subscriptionId: string): Promise<SubscriptionStatus> {
    const url = `${this.opts.baseUrl}/v1/subscriptions/${encodeURIComponent(subscriptionId)}`;
    let res: Dispatcher.ResponseData;
    try {
      res = await request(url, {
        method: "GET",
        headers: { authorization: `Bearer ${this.opts.apiKey}`, accept: "application/json" },
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 5_000),
        ...(this.opts.dispatcher && { dispatcher: this.opts.dispatcher }),
      });
    } catch (err) {
      // Never the URL's query or the key: the error text reaches logs and the record's message.
      const what = err instanceof Error ? err.name : "error";
      throw new PaymentApiError(`payment provider unreachable (${what}) retrieving a subscription`);
    }
    const text = await res.body.text();
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
    return sub.data.status;
  }
}
