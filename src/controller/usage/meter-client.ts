// The payment provider's Billing Meters, for the one call the usage reporter makes: create a meter
// event, POST {PAYMENT_PROVIDER_API_URL}/v1/billing/meter_events, form-encoded, as Stripe's API
// takes it (https://docs.stripe.com/api/billing/meter-event/create). The identifier doubles as the
// Idempotency-Key, so a retry after a lost answer gets the first answer back
// (https://docs.stripe.com/api/idempotent_requests), and a repeat of an identifier the provider
// still remembers is refused as a duplicate: both mean the event is recorded once.
import { failureKind, keepAlivePools, send, text as readText, type HttpAnswer } from "../../http/client.js";

export interface MeterEvent {
  eventName: string;
  customer: string;
  /** Whole seconds. */
  value: number;
  identifier: string;
  /** Unix seconds: when the usage happened. */
  timestamp: number;
}

export type MeterSendResult =
  /** Recorded (now, or by an earlier call whose answer was lost). */
  | { outcome: "recorded"; duplicate: boolean }
  /** Not recorded now, may be later: 429, 5xx, a timeout, no connection. Try again after a backoff. */
  | { outcome: "retry"; reason: string; retryAfterMs?: number }
  /** The provider refuses the event itself (400, 422): sending it again changes nothing. */
  | { outcome: "refused"; reason: string };

export interface MeterSender {
  send(event: MeterEvent): Promise<MeterSendResult>;
}

export class MeterClient implements MeterSender {
  constructor(
    private readonly opts: {
      baseUrl: string;
      /** Read per call: a rotated key file takes effect without a restart. */
      apiKey: () => string;
      timeoutMs?: number;
    },
  ) {}

  readonly #pools = keepAlivePools();

  async send(e: MeterEvent): Promise<MeterSendResult> {
    const body = new URLSearchParams({
      event_name: e.eventName,
      identifier: e.identifier,
      timestamp: String(e.timestamp),
      "payload[stripe_customer_id]": e.customer,
      "payload[value]": String(e.value),
    }).toString();
    let res: HttpAnswer;
    try {
      const url = `${this.opts.baseUrl}/v1/billing/meter_events`;
      res = await send(url, {
        agent: url.startsWith("https:") ? this.#pools.https : this.#pools.http,
        method: "POST",
        headers: {
          authorization: `Bearer ${this.opts.apiKey()}`,
          "content-type": "application/x-www-form-urlencoded",
          "idempotency-key": e.identifier,
          accept: "application/json",
        },
        body,
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 10_000),
      });
    } catch (err) {
      // Never the key or the body: the reason reaches logs, Events and status.
      return {
        outcome: "retry",
        reason: `payment provider unreachable (${failureKind(err)})`,
      };
    }
    const text = await readText(res.body).catch(() => "");
    const status = res.statusCode;
    if (status >= 200 && status < 300) return { outcome: "recorded", duplicate: false };
    const error = stripeError(text);
    if (status === 400 && isDuplicate(error)) return { outcome: "recorded", duplicate: true };
    // Only the event itself can be refused for good (400: invalid, or its identifier's key reused
    // with another value). A refused key (401, 403), a wrong URL (404), a conflict, throttling and
    // outages are the installation's or the provider's: the backlog waits for them to be fixed.
    if (status !== 400 && status !== 422)
      return {
        outcome: "retry",
        reason:
          status === 401 || status === 403
            ? `payment provider refused the API key (HTTP ${status}): check PAYMENT_PROVIDER_API_KEY`
            : `payment provider answered HTTP ${status}${error.code ? ` (${error.code})` : ""}`,
        ...retryAfter(res.headers["retry-after"]),
      };
    return {
      outcome: "refused",
      reason: `payment provider refused the meter event: HTTP ${status}${error.code ? ` ${error.code}` : ""}${
        error.message ? `: ${error.message.slice(0, 300)}` : ""
      }`,
    };
  }
}

interface StripeErrorBody {
  code?: string;
  message?: string;
  param?: string;
}

function stripeError(text: string): StripeErrorBody {
  try {
    const body = JSON.parse(text) as { error?: StripeErrorBody };
    const e = body.error;
    if (!e || typeof e !== "object") return {};
    return {
      ...(typeof e.code === "string" && { code: e.code }),
      ...(typeof e.message === "string" && { message: e.message }),
      ...(typeof e.param === "string" && { param: e.param }),
    };
  } catch {
    return {};
  }
}

/** Stripe's refusal of an identifier it already recorded: "An event already exists with identifier …". */
const isDuplicate = (e: StripeErrorBody): boolean =>
  e.param === "identifier" && /already exists/i.test(e.message ?? "");

function retryAfter(header: string | string[] | undefined): { retryAfterMs?: number } {
  const v = Array.isArray(header) ? header[0] : header;
  const s = v === undefined ? Number.NaN : Number(v);
  return Number.isFinite(s) && s >= 0 ? { retryAfterMs: Math.min(s * 1000, 300_000) } : {};
}
