// Semantic equality of two statuses: a reconciler writes status only when it changed.
import { stableJson } from "../stable-json.js";

/** Semantic equality of two statuses, ignoring the order of keys. */
export function sameStatus(a: unknown, b: unknown): boolean {
  return stableJson(a) === stableJson(b);
}
