// The payment provider's API, for the one question the sidecar asks it: a subscription's current
// state, when two events of the same second disagree (event order alone cannot tell which is
// newer). GET {PAYMENT_PROVIDER_API_URL}/v1/subscriptions/{id} with the secret key as a Bearer
// token, as Stripe's API answers it: https://docs.stripe.com/api/subscriptions/retrieve
import { HttpRequestError, keepAlivePools, send, text as readText, type HttpAnswer } from "../http/client.js";
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
    },
  ) {}

  readonly #pools = keepAlivePools();

  async currentStatus(subscriptionId: string): Promise<SubscriptionStatus> {
    const url = `${this.opts.baseUrl}/v1/subscriptions/${encodeURIComponent(subscriptionId)}`;
    let res: HttpAnswer;
    let text: string;
    try {
      res = await send(url, {
        agent: url.startsWith("https:") ? this.#pools.https : this.#pools.http,
        method: "GET",
        headers: { authorization: `Bearer ${this.opts.apiKey}`, accept: "application/json" },
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 5_000),
      });
      text = await readText(res.body);
    } catch (err) {
      // Never the URL's query or the key: the error text reaches logs and the record's message.
      const what = reasonOf(err);
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
    return sub.data.status;
  }
}

/** A failed request's kind (a timeout, a refused connection), never its URL. */
function reasonOf(err: unknown): string {
  const cause =
    err instanceof Error ? (err.cause as { name?: unknown; code?: unknown } | undefined) : undefined;
  if (cause?.name === "TimeoutError") return "TimeoutError";
  if (err instanceof HttpRequestError && err.code !== undefined) return err.code;
  return err instanceof Error ? err.name : "error";
}
