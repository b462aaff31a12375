// What the controller's code loads: what only a configured feature uses is loaded when the
// configuration turns it on (docs/benchmarks.md, "Footprint of the containers"). The containers'
// idle memory is a target (issue: at or under 80 MiB), and every module loaded stays resident.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/controlplane.js";

const dir = mkdtempSync(join(tmpdir(), "mo-modules-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The repository's own modules (src/...) a fresh process resolves while importing `modules`. */
function loadedSources(modules: string[]): string[] {
  const hook = join(dir, "resolutions.mjs");
  writeFileSync(
    hook,
    `import { registerHooks } from "node:module";
const seen = new Set();
registerHooks({ resolve(s, c, next) { const r = next(s, c); const m = /\\/(src\\/.*)$/.exec(r.url); if (m && !r.url.includes("/node_modules/")) seen.add(m[1]); return r; } });
process.on("exit", () => process.stdout.write(JSON.stringify([...seen])));`,
  );
  const code = `for (const m of ${JSON.stringify(modules)}) await import(m); process.exit(0);`;
  const res = spawnSync(
    process.execPath,
    ["--import", hook, "--import", "tsx", "--input-type=module", "-e", code],
    {
      cwd: REPO_ROOT,
      encoding: "utf8",
    },
  );
  expect(res.status, res.stderr).toBe(0);
  return JSON.parse(res.stdout) as string[];
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
