// Output that goes to a pipe or a file carries no ANSI colour codes: the test targets' (vitest
// colours by default even into a pipe) and the kubectl plugin's.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/controlplane.js";

const ANSI = /\x1b\[[0-9;]*m/; // eslint-disable-line no-control-regex

function piped(command: string, args: string[]): { status: number | null; output: string } {
  const env: NodeJS.ProcessEnv = { ...process.env, TERM: "xterm-256color" };
  for (const k of ["NO_COLOR", "FORCE_COLOR", "FORCE_TTY", "CI"]) delete env[k];
  const res = spawnSync(command, args, { cwd: REPO_ROOT, env, encoding: "utf8" });
  return { status: res.status, output: res.stdout + res.stderr };
}

describe("no colour codes when output is not a terminal", () => {
  it("make test-unit into a pipe", () => {
    const res = piped("make", ["--no-print-directory", "test-unit", "TEST_ARGS=test/cli/demo-view.test.ts"]);
    expect(res.status, res.output).toBe(0);
    expect(res.output).toContain("demo-view.test.ts");
    expect(res.output).not.toMatch(ANSI);
  }, 60_000);

  it("npm test into a pipe", () => {
    const res = piped("npm", [
      "test",
      "--silent",
      "--",
      "--config",
      "vitest.unit.config.ts",
      "test/cli/demo-view.test.ts",
    ]);
    expect(res.status, res.output).toBe(0);
    expect(res.output).toContain("demo-view.test.ts");
    expect(res.output).not.toMatch(ANSI);
  }, 60_000);

  it("kubectl media into a pipe", () => {
    const res = piped(join(REPO_ROOT, "bin/kubectl-media"), ["--help"]);
    expect(res.status, res.output).toBe(0);
    expect(res.output).toContain("kubectl media");
    expect(res.output).not.toMatch(ANSI);
  }, 60_000);
});
