import type { Rng } from "./random.js";

// The payment provider's Billing Meters, as state: meters, the meter events they aggregate, the
// identifiers seen in the deduplication window, and the error reports of events that were accepted
// but matched no meter. Rules follow Stripe's public API reference:
// - an event's `timestamp` is "within the past 35 calendar days or up to 5 minutes in the future";
// - an `identifier` is unique "within a rolling period of at least 24 hours" (here exactly 24 h
//   from the first event that used it); a repeat inside it is refused with a 400
//   invalid_request_error "An event already exists with identifier …", without `param`;
// - summaries aggregate events whose timestamp is in [start_time, end_time), both on minute
//   boundaries (https://docs.stripe.com/api/billing/meter-event-summary/list).
// Time is real time plus an offset tests can advance (advance()), so a day can pass in a test.

const DEDUP_WINDOW_S = 24 * 3600;
const TIMESTAMP_PAST_S = 35 * 24 * 3600;
const TIMESTAMP_FUTURE_S = 5 * 60;

export type Formula = "sum" | "count" | "last";

export type EventTimeWindow = "hour" | "day";

/** A meter as Stripe's API returns it (https://docs.stripe.com/api/billing/meter/object). */
export interface SimMeter {
  id: string;
  object: "billing.meter";
  created: number;
  customer_mapping: { event_payload_key: string; type: "by_id" };
  default_aggregation: { formula: Formula };
  display_name: string;
  event_name: string;
  /** Pre-aggregation: only the latest event of each window counts; null: every event. */
  event_time_window: EventTimeWindow | null;
  livemode: false;
  status: "active" | "inactive";
  status_transitions: { deactivated_at: number | null };
  updated: number;
  value_settings: { event_payload_key: string };
}

/** One accepted meter event, with how it came in. */
export interface RecordedMeterEvent {
  identifier: string;
  eventName: string;
  customer: string;
  value: number;
  /** Event time, unix seconds. */
  timestamp: number;
  /** When the provider accepted it, unix seconds (its clock, offset included). */
  created: number;
  /** The meter it was aggregated into; undefined: no meter had its event name (see errors()). */
  meterId?: string;
  via: "v1" | "v2";
}

/** An event that was accepted but could not be aggregated, as Stripe's error reports list them. */
export interface MeterErrorReport {
  code:
    | "no_meter"
    | "meter_event_invalid_value"
    | "meter_event_no_customer_defined"
    | "timestamp_too_far_in_past"
    | "timestamp_in_future"
    | "duplicate_meter_event"
    | "invalid_event";
  message: string;
  identifier?: string;
  eventName?: string;
  at: number;
}

/** A validation failure of one event, Stripe-shaped (`param` names the field). */
interface EventProblem {
  message: string;
  param?: string;
  code?: string;
}

export interface EventInput {
  eventName: unknown;
  identifier: unknown;
  /** Unix seconds (v1) or an ISO date-time (v2); undefined: now. */
  timestamp: unknown;
  payload: unknown;
}

type Accepted =
  | { ok: true; event: RecordedMeterEvent }
  | { ok: false; problem: EventProblem; errorCode: MeterErrorReport["code"] };

// A whole number of units, at most 15 digits (exact in a double). Corrections are not negative
// events at Stripe but meter event adjustments, which the simulator does not serve.
const WHOLE_NUMBER = /^\d{1,15}$/;

export class MeterStore {
  readonly #rng: Rng;
  readonly #meters = new Map<string, SimMeter>();
  readonly #events: RecordedMeterEvent[] = [];
  /** identifier -> unix seconds of its first acceptance, while inside the window. */
  readonly #seen = new Map<string, number>();
  readonly #errors: MeterErrorReport[] = [];
  #offsetMs = 0;

  constructor(rng: Rng) {
    this.#rng = rng;
  }

  /** The provider's clock, unix seconds. */
  now(): number {
    return Math.floor((Date.now() + this.#offsetMs) / 1000);
  }

  /** Moves the provider's clock forward (identifiers leave the window, timestamps age). */
  advance(ms: number): void {
    this.#offsetMs += Math.max(0, ms);
  }

  createMeter(args: {
    displayName: string;
    eventName: string;
    formula: Formula;
    id?: string;
    customerKey?: string;
    valueKey?: string;
    eventTimeWindow?: EventTimeWindow;
  }): SimMeter {
    const now = this.now();
    const meter: SimMeter = {
      id: args.id ?? `mtr_${this.#rng.token(24)}`,
      object: "billing.meter",
      created: now,
      customer_mapping: { event_payload_key: args.customerKey ?? "stripe_customer_id", type: "by_id" },
      default_aggregation: { formula: args.formula },
      display_name: args.displayName,
      event_name: args.eventName,
      event_time_window: args.eventTimeWindow ?? null,
      livemode: false,
      status: "active",
      status_transitions: { deactivated_at: null },
      updated: now,
      value_settings: { event_payload_key: args.valueKey ?? "value" },
    };
    this.#meters.set(meter.id, meter);
    return meter;
  }

  /** Deactivates or reactivates a meter (its events stop or start being aggregated); undefined: unknown id. */
  setActive(id: string, active: boolean): SimMeter | undefined {
    const m = this.#meters.get(id);
    if (m === undefined) return undefined;
    const now = this.now();
    m.status = active ? "active" : "inactive";
    m.status_transitions = { deactivated_at: active ? null : now };
    m.updated = now;
    return { ...m };
  }

  meters(): SimMeter[] {
    return [...this.#meters.values()].map((m) => ({ ...m }));
  }

  meter(id: string): SimMeter | undefined {
    return this.#meters.get(id);
  }

  /** The active meter of an event name (Stripe allows one). */
  meterFor(eventName: string): SimMeter | undefined {
    for (const m of this.#meters.values()) if (m.event_name === eventName && m.status === "active") return m;
    return undefined;
  }

  events(): RecordedMeterEvent[] {
    return this.#events.map((e) => ({ ...e }));
  }

  errors(): MeterErrorReport[] {
    return this.#errors.map((e) => ({ ...e }));
  }

  /** Whether the identifier was accepted within the window (a repeat would be refused). */
  seen(identifier: string): boolean {
    this.#expire();
    return this.#seen.has(identifier);
  }

  #expire(): void {
    const cutoff = this.now() - DEDUP_WINDOW_S;
    for (const [id, at] of this.#seen) if (at <= cutoff) this.#seen.delete(id);
  }

  /** Validates one event (v1: `timestamp` in seconds; v2: ISO) without recording it. */
  validate(
    input: EventInput,
    via: "v1" | "v2",
  ): Accepted | { ok: true; draft: Omit<RecordedMeterEvent, "created" | "via"> } {
    const fail = (
      problem: EventProblem,
      errorCode: MeterErrorReport["code"] = "invalid_event",
    ): Accepted => ({
      ok: false,
      problem,
      errorCode,
    });
    const { eventName, identifier, timestamp, payload } = input;
    if (eventName === undefined || eventName === "")
      return fail({
        message: "Missing required param: event_name.",
        param: "event_name",
        code: "parameter_missing",
      });
    if (typeof eventName !== "string" || eventName.length > 100)
      return fail({
        message: "Invalid string: event_name must be at most 100 characters.",
        param: "event_name",
        code: "parameter_invalid_string",
      });
    if (payload === undefined || payload === null || typeof payload !== "object" || Array.isArray(payload))
      return fail({
        message: "Missing required param: payload.",
        param: "payload",
        code: "parameter_missing",
      });
    const p = payload as Record<string, unknown>;
    // The payload must hold the keys of the event name's meter (defaults without one): "the
    // fields corresponding to a meter's customer_mapping.event_payload_key ... and
    // value_settings.event_payload_key" (https://docs.stripe.com/api/billing/meter-event/create).
    const meter = typeof eventName === "string" ? this.meterFor(eventName) : undefined;
    const customerKey = meter?.customer_mapping.event_payload_key ?? "stripe_customer_id";
    const valueKey = meter?.value_settings.event_payload_key ?? "value";
    const customer = p[customerKey];
    if (typeof customer !== "string" || customer === "")
      return fail(
        {
          message: `Missing required param: payload[${customerKey}].`,
          param: `payload[${customerKey}]`,
          code: "parameter_missing",
        },
        "meter_event_no_customer_defined",
      );
    const rawValue = p[valueKey];
    if (rawValue === undefined)
      return fail(
        {
          message: `Missing required param: payload[${valueKey}].`,
          param: `payload[${valueKey}]`,
          code: "parameter_missing",
        },
        "meter_event_invalid_value",
      );
    const valueText = typeof rawValue === "number" ? String(rawValue) : rawValue;
    if (typeof valueText !== "string" || !WHOLE_NUMBER.test(valueText))
      return fail(
        {
          message: "Invalid payload[value]: it must be a whole number.",
          param: "payload[value]",
          code: "parameter_invalid_integer",
        },
        "meter_event_invalid_value",
      );
    let id: string;
    if (identifier === undefined || identifier === "") id = `${via === "v1" ? "" : "v2_"}${this.#rng.uuid()}`;
    else if (typeof identifier !== "string" || identifier.length > 100)
      return fail({
        message: "Invalid string: identifier must be at most 100 characters.",
        param: "identifier",
        code: "parameter_invalid_string",
      });
    else id = identifier;
    const now = this.now();
    let ts: number;
    if (timestamp === undefined || timestamp === "") ts = now;
    else if (via === "v1") {
      if (typeof timestamp !== "string" || !/^\d{1,12}$/.test(timestamp))
        return fail({
          message: "Invalid integer: timestamp.",
          param: "timestamp",
          code: "parameter_invalid_integer",
        });
      ts = Number(timestamp);
    } else {
      const ms = typeof timestamp === "string" ? Date.parse(timestamp) : Number.NaN;
      if (Number.isNaN(ms))
        return fail({
          message: "Invalid date-time: timestamp.",
          param: "timestamp",
          code: "parameter_invalid_string",
        });
      ts = Math.floor(ms / 1000);
    }
    if (ts < now - TIMESTAMP_PAST_S)
      return fail(
        {
          message: "Timestamp must be within the past 35 calendar days or up to 5 minutes in the future.",
          param: "timestamp",
          code: "timestamp_too_far_in_past",
        },
        "timestamp_too_far_in_past",
      );
    if (ts > now + TIMESTAMP_FUTURE_S)
      return fail(
        {
          message: "Timestamp must be within the past 35 calendar days or up to 5 minutes in the future.",
          param: "timestamp",
          code: "timestamp_in_future",
        },
        "timestamp_in_future",
      );
    return {
      ok: true,
      draft: { identifier: id, eventName, customer, value: Number(valueText), timestamp: ts },
    };
  }

  /**
   * Records a validated event unless its identifier is inside the window. Aggregation matches a
   * meter by event name; an event no meter matches is kept and reported (code no_meter), as Stripe
   * accepts it and reports the error afterwards.
   */
  record(draft: Omit<RecordedMeterEvent, "created" | "via">, via: "v1" | "v2"): Accepted {
    if (this.seen(draft.identifier))
      return {
        ok: false,
        // Stripe's answer names neither a param nor a code: a 400 invalid_request_error with this
        // message and Stripe-Should-Retry: false (as reported in
        // https://github.com/langfuse/langfuse/pull/16292).
        problem: { message: `An event already exists with identifier ${draft.identifier}.` },
        errorCode: "duplicate_meter_event",
      };
    const created = this.now();
    this.#seen.set(draft.identifier, created);
    const meter = this.meterFor(draft.eventName);
    const event: RecordedMeterEvent = { ...draft, created, via, ...(meter && { meterId: meter.id }) };
    this.#events.push(event);
    if (meter === undefined)
      this.report({
        code: "no_meter",
        message: `No active meter was found for event_name ${draft.eventName}.`,
        identifier: draft.identifier,
        eventName: draft.eventName,
      });
    return { ok: true, event };
  }

  report(e: Omit<MeterErrorReport, "at">): void {
    this.#errors.push({ ...e, at: this.now() });
  }

  /**
   * The meter's aggregate of one customer's events with timestamp in [start, end). A meter with an
   * event_time_window pre-aggregates: of each hour or day (UTC) only the latest event counts.
   */
  aggregate(meter: SimMeter, customer: string, start: number, end: number): number {
    let events = this.#events.filter(
      (e) => e.meterId === meter.id && e.customer === customer && e.timestamp >= start && e.timestamp < end,
    );
    const windowS =
      meter.event_time_window === "hour" ? 3600 : meter.event_time_window === "day" ? 86_400 : 0;
    if (windowS > 0) {
      const latest = new Map<number, RecordedMeterEvent>();
      for (const e of events) {
        const w = Math.floor(e.timestamp / windowS);
        const prior = latest.get(w);
        if (prior === undefined || e.timestamp >= prior.timestamp) latest.set(w, e);
      }
      events = [...latest.values()];
    }
    switch (meter.default_aggregation.formula) {
      case "count":
        return events.length;
      case "last":
        return (
          events.reduce<RecordedMeterEvent | undefined>(
            (a, e) => (a === undefined || e.timestamp >= a.timestamp ? e : a),
            undefined,
          )?.value ?? 0
        );
      case "sum":
        return events.reduce((s, e) => s + e.value, 0);
    }
  }
}
