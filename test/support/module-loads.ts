// What a fresh process loads: every module URL it resolves while importing the given modules (run
// through tsx from the repository's root), recorded by a resolve hook. Tests of what the
// containers load read it (a module once loaded stays resident).
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import { REPO_ROOT } from "./controlplane.js";

const HOOK = `import { registerHooks } from "node:module";
const seen = new Set();
registerHooks({ resolve(s, c, next) { const r = next(s, c); seen.add(r.url); return r; } });
process.on("exit", () => process.stdout.write(JSON.stringify([...seen])));`;

/** The URLs a fresh process resolves while importing `modules` (paths relative to the repository). */
export function resolvedModules(modules: string[]): string[] {
  const dir = mkdtempSync(join(tmpdir(), "mo-modules-"));
  try {
    const hook = join(dir, "resolutions.mjs");
    writeFileSync(hook, HOOK);
    const code = `for (const m of ${JSON.stringify(modules)}) await import(m); process.exit(0);`;
    const res = spawnSync(
      process.execPath,
      ["--import", hook, "--import", "tsx", "--input-type=module", "-e", code],
      { cwd: REPO_ROOT, encoding: "utf8" },
    );
    expect(res.status, res.stderr).toBe(0);
    return JSON.parse(res.stdout) as string[];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
