import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { SimContext } from "./context.js";
import { isRecord, json, readText, requestKey, type Reply } from "./http.js";
import type { EventInput, Formula, MeterStore } from "./meters.js";
import type { Faults } from "./options.js";

// The payment provider's Billing Meters API over HTTP, in Stripe's dialect, so the official
// `stripe` library works against it with only its host changed:
//   POST /v1/billing/meter_events              form-encoded, one event, validated at once
//   GET  /v1/billing/meters                    POST creates one; GET /v1/billing/meters/{id}
//   POST /v1/billing/meters/{id}/deactivate    and /reactivate
//   GET  /v1/billing/meters/{id}/event_summaries?customer=&start_time=&end_time=
//   POST /v2/billing/meter_event_session       a token valid 15 minutes
//   POST /v2/billing/meter_event_stream        JSON, up to 100 events, validated afterwards
// Sources: https://docs.stripe.com/api/billing/meter-event/create,
// https://docs.stripe.com/api/billing/meter-event-summary/list,
// https://docs.stripe.com/api/v2/billing-meter-stream/object,
// https://docs.stripe.com/billing/subscriptions/usage-based/recording-usage-api.
// Stripe allows one concurrent meter event call per customer and meter; a second one gets 429.
// Stripe reports some event problems only afterwards (error reports); the v1 route here answers
// them at once so a client's mistake shows in its own test. Summaries are exact at once (Stripe's
// are eventually consistent).

const BODY_LIMIT = 1024 * 1024;
const SESSION_TTL_S = 15 * 60;
const STREAM_BATCH_MAX = 100;
const IDEMPOTENCY_TTL_S = 24 * 3600;

interface StripeError {
  type: string;
  message: string;
  code?: string;
  param?: string;
}

const stripeError = (status: number, error: StripeError, headers?: Record<string, string>): Reply =>
  json(status, { error }, headers);

/** Parses `a=1&payload[value]=2` into { a: "1", payload: { value: "2" } } (one level, as Stripe's params here need). */
function parseForm(text: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of new URLSearchParams(text)) {
    const m = /^([^[\]]+)\[([^[\]]*)\]$/.exec(key);
    if (m === null) {
      out[key] = value;
      continue;
    }
    const [, outer = "", inner = ""] = m;
    const nested = isRecord(out[outer]) ? (out[outer] as Record<string, unknown>) : {};
    nested[inner] = value;
    out[outer] = nested;
  }
  return out;
}

/** Real-time token bucket, as the GPU side's rate limit. */
class Bucket {
  #tokens = Number.NaN;
  #last = 0;
  take(rps: number): boolean {
    const now = Date.now();
    const cap = Math.max(1, rps);
    this.#tokens = Number.isNaN(this.#tokens)
      ? cap
      : Math.min(cap, this.#tokens + ((now - this.#last) / 1000) * rps);
    this.#last = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}

export interface BillingStats {
  requests: number;
  meterEventCalls: number;
  streamCalls: number;
  rateLimited: number;
  concurrencyRefused: number;
  serverErrors: number;
  lostAnswers: number;
  idempotentReplays: number;
}

export class BillingApi {
  readonly #ctx: SimContext;
  readonly #store: MeterStore;
  /** customer + event name of the v1 calls in flight. */
  readonly #inFlight = new Set<string>();
  readonly #sessions = new Map<string, number>();
  readonly #idempotent = new Map<string, { params: string; reply: Reply; at: number }>();
  #bucket = new Bucket();
  #serverErrorsHit = 0;
  /** The fault set the counters belong to: a new set (setFaults) starts them again. */
  #faults: Faults | undefined;
  readonly stats: BillingStats = {
    requests: 0,
    meterEventCalls: 0,
    streamCalls: 0,
    rateLimited: 0,
    concurrencyRefused: 0,
    serverErrors: 0,
    lostAnswers: 0,
    idempotentReplays: 0,
  };

  constructor(ctx: SimContext, store: MeterStore) {
    this.#ctx = ctx;
    this.#store = store;
  }

  #currentFaults(): Faults {
    const f = this.#ctx.faults();
    if (f !== this.#faults) {
      this.#faults = f;
      this.#bucket = new Bucket();
      this.#serverErrorsHit = 0;
    }
    return f;
  }

  /** Routes under /v1/billing and /v2/billing; undefined when the path is not one of them. */
  async handle(req: IncomingMessage, url: URL, parts: string[]): Promise<Reply | undefined> {
    const [version, area, resource, id, sub] = parts;
    if (area !== "billing") return undefined;
    const method = req.method ?? "GET";
    if (version === "v1" && resource === "meter_events" && parts.length === 3)
      return method === "POST" ? this.#eventCall(req) : notAllowed();
    if (version === "v1" && resource === "meters" && parts.length === 3) {
      if (method === "GET") return this.#guarded(req, false, () => Promise.resolve(this.#listMeters()));
      if (method === "POST")
        return this.#guarded(req, false, async () =>
          this.#createMeter(parseForm(await readText(req, BODY_LIMIT))),
        );
      return notAllowed();
    }
    if (version === "v1" && resource === "meters" && id !== undefined && parts.length === 4)
      return method === "GET"
        ? this.#guarded(req, false, () => Promise.resolve(this.#retrieveMeter(id)))
        : notAllowed();
    if (
      version === "v1" &&
      resource === "meters" &&
      id !== undefined &&
      (sub === "deactivate" || sub === "reactivate") &&
      parts.length === 5
    )
      return method === "POST"
        ? this.#guarded(req, false, () => Promise.resolve(this.#setActive(id, sub === "reactivate")))
        : notAllowed();
    if (
      version === "v1" &&
      resource === "meters" &&
      id !== undefined &&
      sub === "event_summaries" &&
      parts.length === 5
    )
      return method === "GET"
        ? this.#guarded(req, false, () => Promise.resolve(this.#summaries(id, url)))
        : notAllowed();
    if (version === "v2" && resource === "meter_event_session" && parts.length === 3)
      return method === "POST"
        ? this.#guarded(req, false, () => Promise.resolve(this.#createSession()))
        : notAllowed();
    if (version === "v2" && resource === "meter_event_stream" && parts.length === 3)
      return method === "POST" ? this.#stream(req) : notAllowed();
    return undefined;
  }

  /** Faults and authentication for the API-key routes, in the order a real edge applies them. */
  async #guarded(req: IncomingMessage, createsEvent: boolean, handler: () => Promise<Reply>): Promise<Reply> {
    this.stats.requests++;
    const key = requestKey(req, new URL("http://x"), false);
    if (key === undefined || !this.#ctx.opts.paymentApiKeys.has(key))
      return stripeError(401, { type: "invalid_request_error", message: "Invalid API Key provided." });
    const early = this.#faultBefore();
    if (early !== undefined && early !== "failAfter") return early;
    return this.#faultAfter(createsEvent, early === "failAfter", await handler());
  }

  /** Faults answered before any work: rate limit, counted outage, refused 5xx; "failAfter": a 5xx after the work. */
  #faultBefore(): Reply | "failAfter" | undefined {
    const f = this.#currentFaults();
    if (f.paymentRateLimit !== undefined && !this.#bucket.take(f.paymentRateLimit.requestsPerSecond)) {
      this.stats.rateLimited++;
      return rateLimited("Request rate limit exceeded. Retry after a short wait.");
    }
    if (f.paymentServerErrorsFirst !== undefined && this.#serverErrorsHit < f.paymentServerErrorsFirst) {
      this.#serverErrorsHit++;
      this.stats.serverErrors++;
      return apiError();
    }
    // Half the injected 5xx are refused before any work; the other half are answered after it.
    if (this.#ctx.requestRng.chance(f.paymentServerErrors)) {
      this.stats.serverErrors++;
      return this.#ctx.requestRng.chance(0.5) ? apiError() : "failAfter";
    }
    return undefined;
  }

  /** Faults that hide work already done: a 5xx or a lost answer after the event was recorded. */
  #faultAfter(createsEvent: boolean, failAfter: boolean, reply: Reply): Reply {
    if (reply.status !== 200) return reply;
    if (failAfter) return apiError();
    if (createsEvent && this.#ctx.requestRng.chance(this.#currentFaults().lostMeterEventAnswers)) {
      this.stats.lostAnswers++;
      return { ...reply, lost: true };
    }
    return reply;
  }

  /**
   * POST /v1/billing/meter_events with Stripe's idempotent requests
   * (https://docs.stripe.com/api/idempotent_requests): the status and body of the first request
   * made with an Idempotency-Key are saved "regardless of whether it succeeds or fails", 500s
   * included, and every later request with that key gets them back (header Idempotent-Replayed)
   * for 24 hours; the same key with other parameters is refused. Nothing is saved when the request
   * never began executing: a parameter that fails validation, a request conflicting with a
   * concurrent one, a rate limit.
   */
  async #eventCall(req: IncomingMessage): Promise<Reply> {
    this.stats.requests++;
    const apiKey = requestKey(req, new URL("http://x"), false);
    if (apiKey === undefined || !this.#ctx.opts.paymentApiKeys.has(apiKey))
      return stripeError(401, { type: "invalid_request_error", message: "Invalid API Key provided." });
    const text = await readText(req, BODY_LIMIT);
    const idemHeader = req.headers["idempotency-key"];
    const idemKey =
      typeof idemHeader === "string" && idemHeader !== "" ? `${apiKey}\u0000${idemHeader}` : undefined;
    const canonical = JSON.stringify([...new URLSearchParams(text)].sort());
    const now = this.#store.now();
    for (const [k, v] of this.#idempotent) if (now - v.at >= IDEMPOTENCY_TTL_S) this.#idempotent.delete(k);
    const prior = idemKey === undefined ? undefined : this.#idempotent.get(idemKey);
    /** Saves a first answer (a 200 or a 5xx) under the key. */
    const save = (reply: Reply): Reply => {
      if (idemKey !== undefined && prior === undefined && (reply.status === 200 || reply.status >= 500)) {
        const { lost: _lost, ...saved } = reply;
        this.#idempotent.set(idemKey, { params: canonical, reply: saved, at: this.#store.now() });
      }
      return reply;
    };
    // The injected faults come first, for a replay too: an outage or a rate limit answers every
    // request; an injected 500 is the key's first answer only when it has none yet.
    const early = this.#faultBefore();
    if (early !== undefined && early !== "failAfter") return save(early);
    if (idemKey !== undefined && prior !== undefined) {
      if (prior.params !== canonical)
        return stripeError(400, {
          type: "idempotency_error",
          message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${idemHeader as string}' if you meant to execute a different request.`,
        });
      this.stats.idempotentReplays++;
      const replay = { ...prior.reply, headers: { ...prior.reply.headers, "idempotent-replayed": "true" } };
      // A replayed answer crosses the same network: a 500 after it, or its loss, as for any answer.
      return this.#faultAfter(true, early === "failAfter", replay);
    }
    return save(this.#faultAfter(true, early === "failAfter", await this.#createEvent(text)));
  }

  async #createEvent(text: string): Promise<Reply> {
    this.stats.meterEventCalls++;
    const params = parseForm(text);
    const input: EventInput = {
      eventName: params.event_name,
      identifier: params.identifier,
      timestamp: params.timestamp,
      payload: params.payload,
    };
    const checked = this.#store.validate(input, "v1");
    if (!checked.ok) return invalid(checked.problem);
    if (!("draft" in checked)) return invalid({ message: "invalid event" });
    const lock = `${checked.draft.customer}\u0000${checked.draft.eventName}`;
    if (this.#inFlight.has(lock)) {
      this.stats.concurrencyRefused++;
      return rateLimited(
        `Another meter event for customer ${checked.draft.customer} and event_name ${checked.draft.eventName} is being processed. Only one concurrent call per customer and meter is allowed.`,
      );
    }
    this.#inFlight.add(lock);
    try {
      const latency = this.#ctx.faults().meterEventLatencyMs ?? 0;
      if (latency > 0) await new Promise<void>((resolve) => this.#ctx.clock.afterReal(latency, resolve));
      const recorded = this.#store.record(checked.draft, "v1");
      if (!recorded.ok) return invalid(recorded.problem, { "stripe-should-retry": "false" });
      const e = recorded.event;
      return json(200, {
        object: "billing.meter_event",
        created: e.created,
        event_name: e.eventName,
        identifier: e.identifier,
        livemode: false,
        payload: params.payload,
        timestamp: e.timestamp,
      });
    } finally {
      this.#inFlight.delete(lock);
    }
  }

  #listMeters(): Reply {
    return json(200, {
      object: "list",
      data: this.#store.meters(),
      has_more: false,
      url: "/v1/billing/meters",
    });
  }

  #retrieveMeter(id: string): Reply {
    const meter = this.#store.meter(id);
    return meter === undefined ? noSuchMeter(id) : json(200, meter);
  }

  #createMeter(params: Record<string, unknown>): Reply {
    for (const p of ["display_name", "event_name"] as const)
      if (typeof params[p] !== "string" || params[p] === "")
        return invalid({ message: `Missing required param: ${p}.`, param: p, code: "parameter_missing" });
    const agg = params.default_aggregation;
    const formula = isRecord(agg) ? agg.formula : undefined;
    if (formula === undefined)
      return invalid({
        message: "Missing required param: default_aggregation[formula].",
        param: "default_aggregation[formula]",
        code: "parameter_missing",
      });
    if (formula !== "sum" && formula !== "count" && formula !== "last")
      return invalid({
        message: "Invalid default_aggregation[formula]: must be one of sum, count or last",
        param: "default_aggregation[formula]",
        code: "parameter_invalid_string",
      });
    // customer_mapping needs both its event_payload_key and type by_id; value_settings its key;
    // event_time_window is hour or day (https://docs.stripe.com/api/billing/meter/create).
    const keys: Record<"customer_mapping" | "value_settings", string | undefined> = {
      customer_mapping: undefined,
      value_settings: undefined,
    };
    for (const p of ["customer_mapping", "value_settings"] as const) {
      const v = params[p];
      if (v === undefined) continue;
      const key = isRecord(v) ? v.event_payload_key : undefined;
      if (typeof key !== "string" || key === "" || key.length > 100)
        return invalid({
          message: `Missing required param: ${p}[event_payload_key].`,
          param: `${p}[event_payload_key]`,
          code: "parameter_missing",
        });
      if (p === "customer_mapping" && isRecord(v) && v.type !== "by_id")
        return invalid({
          message: "Invalid customer_mapping[type]: must be by_id",
          param: "customer_mapping[type]",
          code: v.type === undefined ? "parameter_missing" : "parameter_invalid_string",
        });
      keys[p] = key;
    }
    const window = params.event_time_window;
    if (window !== undefined && window !== "hour" && window !== "day")
      return invalid({
        message: "Invalid event_time_window: must be one of day or hour",
        param: "event_time_window",
        code: "parameter_invalid_string",
      });
    const eventName = params.event_name as string;
    if (this.#store.meterFor(eventName) !== undefined)
      return invalid({
        message: `An active meter with event_name ${eventName} already exists.`,
        param: "event_name",
      });
    return json(
      200,
      this.#store.createMeter({
        displayName: params.display_name as string,
        eventName,
        formula: formula as Formula,
        ...(keys.customer_mapping !== undefined && { customerKey: keys.customer_mapping }),
        ...(keys.value_settings !== undefined && { valueKey: keys.value_settings }),
        ...(window !== undefined && { eventTimeWindow: window }),
      }),
    );
  }

  /** POST /v1/billing/meters/{id}/deactivate | reactivate: a meter stops or starts aggregating. */
  #setActive(id: string, active: boolean): Reply {
    const meter = this.#store.meter(id);
    if (meter === undefined) return noSuchMeter(id);
    if (active && meter.status !== "active" && this.#store.meterFor(meter.event_name) !== undefined)
      return invalid({
        message: `An active meter with event_name ${meter.event_name} already exists.`,
        param: "event_name",
      });
    return json(200, this.#store.setActive(id, active));
  }

  #summaries(id: string, url: URL): Reply {
    const meter = this.#store.meter(id);
    if (meter === undefined) return noSuchMeter(id);
    const q = url.searchParams;
    const customer = q.get("customer");
    if (customer === null || customer === "")
      return invalid({
        message: "Missing required param: customer.",
        param: "customer",
        code: "parameter_missing",
      });
    const times: Record<string, number> = {};
    for (const p of ["start_time", "end_time"] as const) {
      const v = q.get(p);
      if (v === null || v === "")
        return invalid({ message: `Missing required param: ${p}.`, param: p, code: "parameter_missing" });
      if (!/^\d{1,12}$/.test(v))
        return invalid({ message: `Invalid integer: ${v}`, param: p, code: "parameter_invalid_integer" });
      const n = Number(v);
      if (n % 60 !== 0) return invalid({ message: `${p} must be aligned with minute boundaries.`, param: p });
      times[p] = n;
    }
    const start = times.start_time as number;
    const end = times.end_time as number;
    if (start >= end) return invalid({ message: "start_time must be before end_time.", param: "start_time" });
    if (q.get("value_grouping_window") !== null)
      return invalid({
        message: "The simulator does not group summaries: omit value_grouping_window.",
        param: "value_grouping_window",
      });
    const summaryId = `mtrusg_${createHash("sha256").update(`${id}\u0000${customer}\u0000${start}\u0000${end}`).digest("hex").slice(0, 40)}`;
    return json(200, {
      object: "list",
      data: [
        {
          id: summaryId,
          object: "billing.meter_event_summary",
          aggregated_value: this.#store.aggregate(meter, customer, start, end),
          end_time: end,
          livemode: false,
          meter: id,
          start_time: start,
        },
      ],
      has_more: false,
      url: `/v1/billing/meters/${id}/event_summaries`,
    });
  }

  #createSession(): Reply {
    const now = this.#store.now();
    const token = `mes_tok_${this.#ctx.idRng.token(32)}`;
    this.#sessions.set(token, now + SESSION_TTL_S);
    for (const [t, exp] of this.#sessions) if (exp <= now) this.#sessions.delete(t);
    return json(200, {
      id: `mes_${this.#ctx.idRng.token(24)}`,
      object: "v2.billing.meter_event_session",
      authentication_token: token,
      created: new Date(now * 1000).toISOString(),
      expires_at: new Date((now + SESSION_TTL_S) * 1000).toISOString(),
      livemode: false,
    });
  }

  /** The high-throughput stream: a session token, a batch accepted whole, each event checked afterwards. */
  async #stream(req: IncomingMessage): Promise<Reply> {
    this.stats.requests++;
    this.stats.streamCalls++;
    const token = requestKey(req, new URL("http://x"), false);
    const expires = token === undefined ? undefined : this.#sessions.get(token);
    if (expires === undefined || expires <= this.#store.now())
      return stripeError(401, {
        type: "temporary_session_expired",
        code: "billing_meter_event_session_expired",
        message: "The meter event session has expired or is unknown: create a new one.",
      });
    const early = this.#faultBefore();
    if (early !== undefined && early !== "failAfter") return early;
    let body: unknown;
    const text = await readText(req, BODY_LIMIT);
    try {
      body = text.trim() === "" ? undefined : JSON.parse(text);
    } catch {
      return stripeError(400, {
        type: "invalid_request_error",
        code: "invalid_fields",
        message: "The body is not valid JSON.",
      });
    }
    const events = isRecord(body) ? body.events : undefined;
    if (!Array.isArray(events) || events.length === 0 || events.length > STREAM_BATCH_MAX)
      return stripeError(400, {
        type: "invalid_request_error",
        code: "invalid_fields",
        message: `events must be a list of 1 to ${STREAM_BATCH_MAX} meter events.`,
      });
    // The call takes as long as a v1 event's (Stripe answers either in about 100-300 ms).
    const latency = this.#ctx.faults().meterEventLatencyMs ?? 0;
    if (latency > 0) await new Promise<void>((resolve) => this.#ctx.clock.afterReal(latency, resolve));
    for (const raw of events) {
      const e = isRecord(raw) ? raw : {};
      const checked = this.#store.validate(
        { eventName: e.event_name, identifier: e.identifier, timestamp: e.timestamp, payload: e.payload },
        "v2",
      );
      if (!checked.ok) {
        this.#store.report({
          code: checked.errorCode,
          message: checked.problem.message,
          ...(typeof e.identifier === "string" && { identifier: e.identifier }),
        });
        continue;
      }
      if (!("draft" in checked)) continue;
      const recorded = this.#store.record(checked.draft, "v2");
      if (!recorded.ok)
        this.#store.report({
          code: recorded.errorCode,
          message: recorded.problem.message,
          identifier: checked.draft.identifier,
          eventName: checked.draft.eventName,
        });
    }
    return this.#faultAfter(true, early === "failAfter", json(200, {}));
  }
}

const notAllowed = (): Reply =>
  stripeError(405, { type: "invalid_request_error", message: "Unrecognized request method for this URL." });

const invalid = (
  p: { message: string; param?: string; code?: string },
  headers?: Record<string, string>,
): Reply => stripeError(400, { type: "invalid_request_error", ...p }, headers);

const rateLimited = (message: string): Reply =>
  stripeError(429, { type: "invalid_request_error", code: "rate_limit", message });

const apiError = (): Reply =>
  stripeError(500, {
    type: "api_error",
    message: "An unknown error occurred: the simulator's injected fault.",
  });

const noSuchMeter = (id: string): Reply =>
  stripeError(404, {
    type: "invalid_request_error",
    code: "resource_missing",
    param: "id",
    message: `No such billing meter: '${id}'`,
  });
