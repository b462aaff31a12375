// Durations as kubectl and Go write them: 90s, 5m, 2h, 1d, 1h30m, 500ms. A unit is required.
import { UsageError } from "./errors.js";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/y;

/** Milliseconds in a duration such as `90s` or `1h30m`; a UsageError names the flag otherwise. */
export function parseDuration(text: string, flag: string): number {
  const value = text.trim();
  let total = 0;
  PART.lastIndex = 0;
  let matched = 0;
  while (PART.lastIndex < value.length) {
    const m = PART.exec(value);
    if (!m) break;
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    matched = PART.lastIndex;
  }
  if (value === "" || matched !== value.length) {
    throw new UsageError(
      `invalid duration for ${flag}: "${text}". Use a number with a unit, for example 90s, 5m, 2h, 1d or 1h30m`,
    );
  }
  return Math.round(total);
}

/** A short human duration, as kubectl prints ages: 45s, 3m20s, 12m, 5h3m, 20h, 3d4h, 40d. */
export function humanDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const m = Math.floor(s / 60);
  const h = Math.floor(m / 60);
  const d = Math.floor(h / 24);
  if (s < 120) return `${s}s`;
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (h < 3) return `${m}m`;
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  if (d < 2) return `${h}h`;
  if (d < 8) return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`;
  return `${d}d`;
}
