// A status is written only when it changed: equality as the statuses' JSON, whatever the key order.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { sameStatus } from "../../src/runtime/same-status.js";
import { stableJson } from "../../src/stable-json.js";

describe("sameStatus", () => {
  it.each([
    ["keys in another order", { a: 1, b: { c: [1, 2] } }, { b: { c: [1, 2] }, a: 1 }, true],
    [
      "an undefined member is absent",
      { phase: "Pending", lastSyncedAt: undefined },
      { phase: "Pending" },
      true,
    ],
    ["a member set to null is not absent", { phase: "Pending", output: null }, { phase: "Pending" }, false],
    [
      "a changed leaf",
      { conditions: [{ type: "Ready", status: "True" }] },
      { conditions: [{ type: "Ready", status: "False" }] },
      false,
    ],
    ["arrays in another order", { attempts: [1, 2] }, { attempts: [2, 1] }, false],
    ["an array beside an object of the same keys", { x: ["a"] }, { x: { 0: "a" } }, false],
    ["a number beside its text", { attempts: 1 }, { attempts: "1" }, false],
    ["no status beside an empty one", undefined, {}, false],
    ["no status on both sides", undefined, undefined, true],
  ])("%s", (_name, a, b, same) => {
    expect(sameStatus(a, b)).toBe(same);
    expect(sameStatus(b, a)).toBe(same);
  });

  it("agrees with comparing the statuses' JSON with sorted keys, for any JSON-like value", () => {
    const value = fc.letrec((tie) => ({
      leaf: fc.oneof(
        fc.constant(undefined),
        fc.constant(null),
        fc.boolean(),
        fc.integer({ min: -3, max: 3 }),
        fc.constantFrom("", "a", "b"),
      ),
      node: fc.oneof({ depthSize: "small" }, tie("leaf"), tie("array"), tie("object")),
      array: fc.array(tie("node"), { maxLength: 3 }),
      object: fc.dictionary(fc.constantFrom("a", "b", "c"), tie("node"), { maxKeys: 3 }),
    })).node;
    // Pairs drawn independently, and pairs of a value and a copy with its keys reordered.
    const reordered = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(reordered)
        : v && typeof v === "object"
          ? Object.fromEntries(
              Object.entries(v)
                .reverse()
                .map(([k, x]) => [k, reordered(x)]),
            )
          : v;
    fc.assert(
      fc.property(value, value, (a, b) => {
        expect(sameStatus(a, b)).toBe(stableJson(a) === stableJson(b));
        expect(sameStatus(a, reordered(a))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
});
