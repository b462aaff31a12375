// Meter event names per workload (USAGE_METER_EVENT_NAMES), checked when the environment is parsed.

/** A Stripe meter event_name as this product accepts it (Stripe: at most 100 characters). */
export const METER_EVENT_NAME = /^[A-Za-z0-9_.:-]{1,100}$/;

/** `asr=asr_seconds,render=render_seconds` -> { asr: ..., render: ... }; undefined if malformed. */
export function parseEventNames(text: string): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  for (const part of text.split(",")) {
    const entry = part.trim();
    if (entry === "") continue;
    const m = /^([a-z0-9-]{1,63})=(.+)$/.exec(entry);
    if (!m || !METER_EVENT_NAME.test(m[2]!)) return undefined;
    out[m[1]!] = m[2]!;
  }
  return out;
}
