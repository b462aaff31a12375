import { describe, expect, it } from "vitest";
import { keptVersion, versionString } from "../../src/controller/resource-version.js";

describe("a resourceVersion as it is kept", () => {
  const table: Array<[string, "number" | "string"]> = [
    ["1", "number"],
    ["42", "number"],
    ["999999999", "number"],
    ["1000000000", "string"],
    ["12345678901", "string"],
    ["0", "string"],
    ["0042", "string"],
    ["-1", "string"],
    ["1e3", "string"],
    [" 42", "string"],
    ["42 ", "string"],
    ["4.2", "string"],
    ["v1-abc", "string"],
    ["", "string"],
  ];

  it.each(table)("keeps %j as a %s and reads it back unchanged", (rv, kind) => {
    const kept = keptVersion(rv);
    expect(typeof kept).toBe(kind);
    expect(versionString(kept)).toBe(rv);
  });

  it("keeps different versions as different values", () => {
    const kept = table.map(([rv]) => keptVersion(rv));
    expect(new Set(kept).size).toBe(table.length);
  });

  it("keeps no version as none", () => {
    expect(keptVersion(undefined)).toBeUndefined();
    expect(versionString(undefined)).toBeUndefined();
  });
});
