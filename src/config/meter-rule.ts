// What a payment-provider meter must be for the usage this product sends it to be billed as sent.
// Each meter event carries `payload[stripe_customer_id]` and `payload[value]` (whole seconds), one
// event per job attempt, to be summed. A Stripe meter (https://docs.stripe.com/api/billing/meter/object)
// that maps the customer or the value from other payload keys, aggregates with `count` or `last`,
// or pre-aggregates (`event_time_window` hour or day: only the latest event of each window counts,
// https://docs.stripe.com/billing/subscriptions/usage-based/recording-usage) accepts the events and
// bills something else, silently. Pure: the meter list in, a verdict per configured event name out.

/** The payload keys the meter client sends (src/controller/usage/meter-client.ts). */
const CUSTOMER_PAYLOAD_KEY = "stripe_customer_id";
const VALUE_PAYLOAD_KEY = "value";

export type MeterVerdict =
  { ok: true; meterId: string } | { ok: false; meterId?: string; problems: string[] };

const record = (v: unknown): Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};

/** The problems of one meter object for the usage sent under `eventName` (none: it bills it right). */
export function meterProblems(meter: unknown): string[] {
  const m = record(meter);
  const problems: string[] = [];
  const status = m.status;
  if (status !== undefined && status !== "active") problems.push(`status is ${String(status)}, not active`);
  const customer = record(m.customer_mapping);
  if (customer.event_payload_key !== CUSTOMER_PAYLOAD_KEY)
    problems.push(
      `customer_mapping.event_payload_key is ${JSON.stringify(customer.event_payload_key)}, not "${CUSTOMER_PAYLOAD_KEY}"`,
    );
  if (customer.type !== undefined && customer.type !== "by_id")
    problems.push(`customer_mapping.type is ${JSON.stringify(customer.type)}, not "by_id"`);
  const value = record(m.value_settings);
  if (value.event_payload_key !== VALUE_PAYLOAD_KEY)
    problems.push(
      `value_settings.event_payload_key is ${JSON.stringify(value.event_payload_key)}, not "${VALUE_PAYLOAD_KEY}"`,
    );
  const formula = record(m.default_aggregation).formula;
  if (formula !== "sum")
    problems.push(`default_aggregation.formula is ${JSON.stringify(formula)}, not "sum"`);
  const window = m.event_time_window;
  if (window !== undefined && window !== null)
    problems.push(
      `event_time_window is ${JSON.stringify(window)}: the meter pre-aggregates (only the last event counts)`,
    );
  return problems;
}

/**
 * A verdict per configured event name, from the provider's meter list. An event name with no
 * active meter is a problem too: Stripe accepts its events and reports them afterwards as errors
 * (no_meter), billing nothing. Of several meters with the name, the active one is judged.
 */
export function judgeMeters(
  meters: readonly unknown[],
  eventNames: Iterable<string>,
): Map<string, MeterVerdict> {
  const out = new Map<string, MeterVerdict>();
  for (const name of new Set(eventNames)) {
    const named = meters.map(record).filter((m) => m.event_name === name);
    const meter = named.find((m) => m.status === undefined || m.status === "active") ?? named[0];
    const meterId = typeof meter?.id === "string" ? meter.id : undefined;
    if (meter === undefined) {
      out.set(name, { ok: false, problems: [`no meter has event_name "${name}"`] });
      continue;
    }
    const problems = meterProblems(meter);
    out.set(
      name,
      problems.length === 0 && meterId !== undefined
        ? { ok: true, meterId }
        : { ok: false, ...(meterId !== undefined && { meterId }), problems },
    );
  }
  return out;
}

/** One line for logs, Events and conditions: "gpu_seconds (mtr_1): a; b". */
export function describeVerdict(eventName: string, v: MeterVerdict): string {
  if (v.ok) return `${eventName} (${v.meterId}): as expected`;
  return `${eventName}${v.meterId !== undefined ? ` (${v.meterId})` : ""}: ${v.problems.join("; ")}`;
}
