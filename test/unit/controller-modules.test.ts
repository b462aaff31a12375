// What the controller's code loads: what only a configured feature uses is loaded when the
// configuration turns it on (docs/benchmarks.md, "Footprint of the containers"). The containers'
// idle memory is a target (issue: at or under 80 MiB), and every module loaded stays resident.
import { describe, expect, it } from "vitest";
import { resolvedModules } from "../support/module-loads.js";

/** The repository's own modules (src/...) a fresh process resolves while importing `modules`. */
function loadedSources(modules: string[]): string[] {
  return resolvedModules(modules).flatMap((url) => {
    const m = /\/(src\/.*)$/.exec(url);
    return m && !url.includes("/node_modules/") ? [m[1]!] : [];
  });
}

describe("the controller's modules", () => {
  it("leave the payment provider's meter client out until metering is configured (the manager loads it at start)", () => {
    const loaded = loadedSources(["./src/log.ts", "./src/config/env.ts", "./src/controller/run.ts"]);
    // The usage reporter runs in every controller (accounts' period usage); the client only meters.
    expect(loaded).toContain("src/controller/usage/reporter.ts");
    expect(loaded).not.toContain("src/controller/usage/meter-client.ts");
    // The hook sees the client when it is loaded.
    expect(loadedSources(["./src/controller/usage/meter-client.ts"])).toContain(
      "src/controller/usage/meter-client.ts",
    );
  });
});
