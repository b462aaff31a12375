// The reduced chaos run of `make chaos` (bench/chaos.ts): about 200 jobs with two leader kills, a
// sidecar kill and a control plane restart, every invariant 0. The script runs the whole stack
// as processes on its own control plane; its seed is printed so a failure can be replayed with
// `make chaos CHAOS_ARGS="--jobs 200 --seed S"`.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/controlplane.js";

const dir = mkdtempSync(join(tmpdir(), "chaos-reduced-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runChaos(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "bench/chaos.ts", ...args], {
      cwd: REPO_ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    const keep = (chunk: Buffer) => {
      output += chunk.toString();
      process.stderr.write(chunk); // the seed and the table, as the run goes
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    child.once("exit", (code) => resolve({ code, output }));
  });
}

describe("make chaos, reduced", () => {
  it(
    "keeps every invariant under kills, a control plane restart and provider faults",
    { timeout: 900_000 },
    async () => {
      const out = join(dir, "chaos.json");
      const { code, output } = await runChaos(["--jobs", "200", "--out", out]);
      const seed = /seed (\d+)/.exec(output)?.[1];
      expect(seed, "the run prints its seed").toBeDefined();
      expect(code, `chaos run failed; replay with --jobs 200 --seed ${seed}\n${output.slice(-4000)}`).toBe(0);
      const result = JSON.parse(readFileSync(out, "utf8")) as Record<string, unknown> & {
        faults: Record<string, number | boolean>;
      };
      for (const invariant of [
        "lost",
        "executedMoreThanOnce",
        "duplicateSteps",
        "adoptedAnotherJob",
        "paymentEventsDuplicated",
        "staleAccounts",
        "meteredSecondsDiff",
        "executionSecondsDiff",
        "meterEventsLost",
        "allocatedCostDiffMicros",
        "jobsOverWaitBound",
        "usageLimitOvershootSeconds",
        "concurrencyOverPlan",
        "outputsMissing",
        "orphanObjects",
        "crossTenantCacheHits",
      ])
        expect(result[invariant], invariant).toBe(0);
      expect(result.faults.controllerKills).toBeGreaterThanOrEqual(2);
      expect(result.faults.sidecarKills).toBeGreaterThanOrEqual(1);
      expect(result.faults.controlPlaneRestarts).toBe(1);
      // More accounts' bursts went through fair share: two accounts' bursts, low-priority jobs
      // followed by another account's normal jobs, and a backlog created while no leader ran.
      expect(result.burstJobs).toBeGreaterThanOrEqual(50);
      expect(result.lowPriorityJobs).toBeGreaterThanOrEqual(10);
      // Low jobs never make an endpoint scale, yet each ends: they run on the workers left up.
      expect(result.lowPriorityCompleted).toBeGreaterThan(0);
      expect(result.leaderStartBacklog).toBeGreaterThanOrEqual(10);
      // Customers on a capped plan reached it, waited, and were let go by an upgrade.
      expect(result.usageLimitReached).toBeGreaterThanOrEqual(1);
      expect(result.faults.ignoreClientId).toBe(true);
      // Reported, not an invariant: jobs failed (SubmissionUnconfirmed) rather than run twice.
      expect(result.unconfirmedSubmissionPolicy).toBe("fail");
      expect(typeof result.endedUnconfirmed).toBe("number");
    },
  );
});
