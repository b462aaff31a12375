// JSON with every object's keys in one order (by UTF-16 code units, as Array.prototype.sort does),
// so equal values always give the same text: status comparisons (runtime/same-status.ts) and
// content hashes that must not change between processes or locales (mediajob/stage-cache.ts).
export function stableJson(v: unknown): string {
  return JSON.stringify(v, (_k, val: unknown) =>
    val && typeof val === "object" && !Array.isArray(val)
      ? Object.fromEntries(
          Object.entries(val as Record<string, unknown>).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)),
        )
      : val,
  );
}
