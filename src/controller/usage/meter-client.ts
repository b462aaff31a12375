// The payment provider's Billing Meters, for the one call the usage reporter makes: create a meter
// event, POST {PAYMENT_PROVIDER_API_URL}/v1/billing/meter_events, form-encoded, as Stripe's API
// takes it (https://docs.stripe.com/api/billing/meter-event/create). The first Idempotency-Key of
// an event is its identifier, so a retry after a lost answer gets the first answer back
// (https://docs.stripe.com/api/idempotent_requests). Stripe saves that first answer whatever it
// was, a 500 included, and replays it for the key for 24 hours: after a 5xx the next try takes a
// new key, and the identifier, which Stripe keeps unique for at least 24 hours, still records the
// event once ("An event already exists with identifier …" answers a repeat: recorded).
// One piece past 350 lines: the v1 call, the v2 stream and its session share the answers' reading
// and the keys' life, and what counts as recorded must be decided in one place.
// One piece: v1 events and v2 stream batches share the key after a 5xx and the answer mapping.
import { randomBytes } from "node:crypto";
import {
  failureKind,
  keepAlivePools,
  poolFor,
  send,
  text as readText,
  type HttpAnswer,
} from "../../http/client.js";
import { STREAM_BATCH_MAX } from "./stream-batch.js";

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

export type MeterBatchResult =
  /** The provider took the whole batch (each identifier recorded once, now or by an earlier call). */
  | { outcome: "recorded" }
  /** Not taken now, may be later: 429, 5xx, a timeout, no connection, no session. Same batch again. */
  | { outcome: "retry"; reason: string }
  /**
   * Not for the stream: the batch was refused as a whole (400), or an event in it could be refused
   * after the stream's 200 (see streamable()). Each is sent alone through v1, whose answer says.
   */
  | { outcome: "unstreamable"; reason: string };

export interface MeterSender {
  send(event: MeterEvent): Promise<MeterSendResult>;
  /** Up to STREAM_BATCH_MAX events of one customer and event name in one call; absent: v1 only. */
  sendBatch?(events: readonly MeterEvent[]): Promise<MeterBatchResult>;
}

/** A session token is renewed this long before it expires (Stripe's last 15 minutes). */
const SESSION_RENEW_MARGIN_MS = 60_000;
/** How long the list of active meters is trusted before it is read again. */
const METERS_TTL_MS = 5 * 60_000;
/**
 * The API version v2 calls name: the one that introduced the meter event stream
 * (https://docs.stripe.com/changelog/acacia/2024-09-30/usage-based-billing-v2-meter-events-api).
 */
const STRIPE_V2_VERSION = "2024-09-30.acacia";
const EVENT_NAME_MAX = 100;
const IDENTIFIER_MAX = 100;
const TIMESTAMP_PAST_S = 35 * 24 * 3600;
const TIMESTAMP_FUTURE_S = 5 * 60;

/**
 * Whether an event passes every check Stripe makes on a stream event after answering 200 (the
 * stream validates asynchronously): a whole value, a customer, names and identifiers within their
 * lengths, a timestamp within the past 35 days or 5 minutes ahead (with a minute's margin), and an
 * active meter for its event name. An event that fails one is sent through v1, which answers at once.
 */
export function streamable(
  e: MeterEvent,
  activeEventNames: ReadonlySet<string>,
  nowS: number,
): { ok: true } | { ok: false; reason: string } {
  if (!Number.isSafeInteger(e.value) || e.value < 0)
    return { ok: false, reason: "value is not a whole number" };
  if (e.customer === "") return { ok: false, reason: "no customer" };
  if (e.eventName === "" || e.eventName.length > EVENT_NAME_MAX)
    return { ok: false, reason: "bad event name" };
  if (e.identifier === "" || e.identifier.length > IDENTIFIER_MAX)
    return { ok: false, reason: "bad identifier" };
  if (e.timestamp < nowS - TIMESTAMP_PAST_S + 60 || e.timestamp > nowS + TIMESTAMP_FUTURE_S - 60)
    return { ok: false, reason: "timestamp near the edge of the accepted range" };
  if (!activeEventNames.has(e.eventName))
    return { ok: false, reason: `no active meter has event_name ${e.eventName}` };
  return { ok: true };
}

export class MeterClient implements MeterSender {
  constructor(
    private readonly opts: {
      baseUrl: string;
      /**
       * The v2 meter event stream's host: Stripe serves it at meter-events.stripe.com
       * (https://docs.stripe.com/api/v2/billing-meter-stream/create); default: that host for
       * api.stripe.com, else baseUrl (a simulator or a proxy serving both).
       */
      streamBaseUrl?: string;
      /** Read per call: a rotated key file takes effect without a restart. */
      apiKey: () => string;
      timeoutMs?: number;
      now?: () => number;
    },
  ) {}

  readonly #pools = keepAlivePools();
  /**
   * The Idempotency-Key of each event whose last answer was a 5xx: a new one, since Stripe would
   * replay the saved 5xx for the old one. Absent: the identifier. Lost on a restart, when the
   * identifier is tried first again and a replayed 5xx moves it to a new key once more.
   */
  readonly #retryKeys = new Map<string, string>();
  #session?: { token: string; expiresAtMs: number };
  #meters?: { names: Set<string>; readAtMs: number };

  #nowMs(): number {
    return this.opts.now?.() ?? Date.now();
  }

  #streamBase(): string {
    if (this.opts.streamBaseUrl !== undefined) return this.opts.streamBaseUrl;
    return this.opts.baseUrl.replace(/^https:\/\/api\.stripe\.com\/?$/, "https://meter-events.stripe.com");
  }

  /** One call; the answer's status, headers and text, or why there was none (never the key). */
  async #call(
    url: string,
    init: { method: "GET" | "POST"; bearer: string; body?: string; contentType?: string; v2?: boolean },
  ): Promise<{ status: number; text: string; headers: HttpAnswer["headers"] } | { failed: string }> {
    try {
      const res = await send(url, {
        agent: poolFor(this.#pools, url),
        method: init.method,
        headers: {
          authorization: `Bearer ${init.bearer}`,
          accept: "application/json",
          ...(init.contentType !== undefined && { "content-type": init.contentType }),
          ...(init.v2 === true && { "stripe-version": STRIPE_V2_VERSION }),
        },
        ...(init.body !== undefined && { body: init.body }),
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 10_000),
      });
      const text = await readText(res.body).catch(() => "");
      return { status: res.statusCode, text, headers: res.headers };
    } catch (err) {
      return { failed: `payment provider unreachable (${failureKind(err)})` };
    }
  }

  /** The event names of the provider's active meters, read at most every 5 minutes. */
  async #activeEventNames(): Promise<Set<string> | { failed: string }> {
    const cached = this.#meters;
    if (cached && this.#nowMs() - cached.readAtMs < METERS_TTL_MS) return cached.names;
    const names = new Set<string>();
    let after: string | undefined;
    for (let page = 0; page < 100; page++) {
      const q = new URLSearchParams({ limit: "100", ...(after !== undefined && { starting_after: after }) });
      const res = await this.#call(`${this.opts.baseUrl}/v1/billing/meters?${q}`, {
        method: "GET",
        bearer: this.opts.apiKey(),
      });
      if ("failed" in res) return res;
      if (res.status !== 200)
        return { failed: `listing meters: payment provider answered HTTP ${res.status}` };
      let body: {
        data?: Array<{ id?: unknown; event_name?: unknown; status?: unknown }>;
        has_more?: unknown;
      };
      try {
        body = JSON.parse(res.text) as typeof body;
      } catch {
        return { failed: "listing meters: the payment provider's answer is not JSON" };
      }
      const data = Array.isArray(body.data) ? body.data : [];
      for (const m of data)
        if (typeof m.event_name === "string" && (m.status === undefined || m.status === "active"))
          names.add(m.event_name);
      const last = data.at(-1)?.id;
      if (body.has_more !== true || typeof last !== "string") break;
      after = last;
    }
    this.#meters = { names, readAtMs: this.#nowMs() };
    return names;
  }

  /** A v2 meter event session token with more than a minute left, created when needed. */
  async #sessionToken(): Promise<string | { failed: string }> {
    const s = this.#session;
    if (s && s.expiresAtMs - this.#nowMs() > SESSION_RENEW_MARGIN_MS) return s.token;
    this.#session = undefined;
    const res = await this.#call(`${this.opts.baseUrl}/v2/billing/meter_event_session`, {
      method: "POST",
      bearer: this.opts.apiKey(),
      body: "{}",
      contentType: "application/json",
      v2: true,
    });
    if ("failed" in res) return res;
    if (res.status !== 200)
      return {
        failed:
          res.status === 401 || res.status === 403
            ? `payment provider refused the API key (HTTP ${res.status}): check PAYMENT_PROVIDER_API_KEY`
            : `creating a meter event session: payment provider answered HTTP ${res.status}`,
      };
    try {
      const body = JSON.parse(res.text) as { authentication_token?: unknown; expires_at?: unknown };
      const expiresAtMs = typeof body.expires_at === "string" ? Date.parse(body.expires_at) : Number.NaN;
      if (typeof body.authentication_token !== "string" || Number.isNaN(expiresAtMs))
        return { failed: "creating a meter event session: no token in the answer" };
      this.#session = { token: body.authentication_token, expiresAtMs };
      return body.authentication_token;
    } catch {
      return { failed: "creating a meter event session: the answer is not JSON" };
    }
  }

  /**
   * Sends a batch through the v2 meter event stream. The stream answers 200 before it validates
   * the events, so only events no later check can refuse are streamed (streamable()); the same
   * identifiers as v1, so a batch sent again after a lost answer records nothing twice.
   */
  async sendBatch(events: readonly MeterEvent[]): Promise<MeterBatchResult> {
    if (events.length === 0 || events.length > STREAM_BATCH_MAX)
      return { outcome: "unstreamable", reason: `a batch holds 1 to ${STREAM_BATCH_MAX} events` };
    const names = await this.#activeEventNames();
    if (!(names instanceof Set)) return { outcome: "retry", reason: names.failed };
    const nowS = Math.floor(this.#nowMs() / 1000);
    for (const e of events) {
      const v = streamable(e, names, nowS);
      if (!v.ok) return { outcome: "unstreamable", reason: v.reason };
    }
    const body = JSON.stringify({
      events: events.map((e) => ({
        event_name: e.eventName,
        identifier: e.identifier,
        timestamp: new Date(e.timestamp * 1000).toISOString(),
        payload: { stripe_customer_id: e.customer, value: String(e.value) },
      })),
    });
    // A session that expired early (the provider's clock, a restart there) is renewed once.
    for (let round = 0; round < 2; round++) {
      const token = await this.#sessionToken();
      if (typeof token !== "string") return { outcome: "retry", reason: token.failed };
      const res = await this.#call(`${this.#streamBase()}/v2/billing/meter_event_stream`, {
        method: "POST",
        bearer: token,
        body,
        contentType: "application/json",
        v2: true,
      });
      if ("failed" in res) return { outcome: "retry", reason: res.failed };
      if (res.status >= 200 && res.status < 300) return { outcome: "recorded" };
      const error = stripeError(res.text);
      if (res.status === 401 && round === 0) {
        this.#session = undefined;
        continue;
      }
      if (res.status === 400)
        return {
          outcome: "unstreamable",
          reason: `payment provider refused the batch: HTTP 400${error.code ? ` ${error.code}` : ""}`,
        };
      return {
        outcome: "retry",
        reason: `meter event stream: payment provider answered HTTP ${res.status}${error.code ? ` (${error.code})` : ""}`,
      };
    }
    return { outcome: "retry", reason: "meter event stream: the session was refused twice" };
  }

  /** A fresh Idempotency-Key for the event's next try (`<identifier>~<random>`, at most 113 characters). */
  #newRetryKey(identifier: string): void {
    this.#retryKeys.delete(identifier);
    if (this.#retryKeys.size >= RETRY_KEYS_MAX) {
      const oldest = this.#retryKeys.keys().next().value;
      if (oldest !== undefined) this.#retryKeys.delete(oldest);
    }
    this.#retryKeys.set(identifier, `${identifier}~${randomBytes(6).toString("hex")}`);
  }

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
        agent: poolFor(this.#pools, url),
        method: "POST",
        headers: {
          authorization: `Bearer ${this.opts.apiKey()}`,
          "content-type": "application/x-www-form-urlencoded",
          "idempotency-key": this.#retryKeys.get(e.identifier) ?? e.identifier,
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
    if (status >= 500) this.#newRetryKey(e.identifier);
    else this.#retryKeys.delete(e.identifier);
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

/** At most this many events wait with a retry key (the backlog after a long outage); the oldest go first. */
const RETRY_KEYS_MAX = 100_000;

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

/**
 * Stripe's refusal of an identifier it already recorded: a 400 invalid_request_error "An event
 * already exists with identifier …", which names no `param` (as reported in
 * https://github.com/langfuse/langfuse/pull/16292); `param: identifier` is taken too.
 */
const isDuplicate = (e: StripeErrorBody): boolean =>
  /^An event already exists with identifier /i.test(e.message ?? "") ||
  (e.param === "identifier" && /already exists/i.test(e.message ?? ""));

function retryAfter(header: string | string[] | undefined): { retryAfterMs?: number } {
  const v = Array.isArray(header) ? header[0] : header;
  const s = v === undefined ? Number.NaN : Number(v);
  return Number.isFinite(s) && s >= 0 ? { retryAfterMs: Math.min(s * 1000, 300_000) } : {};
}
