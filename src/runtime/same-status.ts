// Semantic equality of two statuses: a reconciler writes status only when it changed.
//
// Compared as their JSON would be, without writing it: the statuses are compared on every pass of
// every job, and serialising both (with sorted keys) was a measurable share of the controller's
// CPU per job (docs/benchmarks.md, "End-to-end job throughput").

/** Semantic equality of two statuses, as their JSON: key order ignored, undefined members absent. */
export function sameStatus(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) {
    // JSON writes a non-finite number as null.
    const asJson = (v: unknown) => (typeof v === "number" && !Number.isFinite(v) ? null : v);
    return asJson(a) === asJson(b);
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    // JSON writes an undefined element (or a function) of an array as null.
    const item = (v: unknown) => (v === undefined || typeof v === "function" ? null : v);
    return a.every((v, i) => sameStatus(item(v), item(b[i])));
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const present = (o: Record<string, unknown>) =>
    Object.keys(o).filter((k) => o[k] !== undefined && typeof o[k] !== "function");
  const keys = present(x);
  if (keys.length !== present(y).length) return false;
  return keys.every((k) => Object.hasOwn(y, k) && y[k] !== undefined && sameStatus(x[k], y[k]));
}
