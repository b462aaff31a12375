// .local/env, the file `make dev-up` writes and the README tells the user to source: it puts the
// project's Node first on PATH, and RunPod's official Python SDK, configured by nothing but that
// file, manages endpoints and runs jobs on the stack's simulator (its management calls go to
// RUNPOD_API_BASE_URL, its job API to RUNPOD_ENDPOINT_BASE_URL). The file is written by the
// function dev-up uses, for a simulator started here.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { envFile, GPU_KEY, LOCAL } from "../../scripts/devstack-lib.js";
import { startSimulator, type Simulator } from "../../tools/simulator/server.js";

const PYTHON = join(LOCAL, "venv", "bin", "python");
let sim: Simulator;
let file = "";

beforeAll(async () => {
  sim = await startSimulator({
    apiKeys: [GPU_KEY],
    timeScale: 0.01,
    endpoints: [{ id: "ep-asr-env", name: "media-asr-dev", workload: "asr", workersMax: 2 }],
  });
  file = join(mkdtempSync(join(tmpdir(), "mo-env-")), "env");
  writeFileSync(
    file,
    envFile(
      {
        kubeconfig: "/nonexistent/kubeconfig",
        simulatorUrl: sim.url,
        webhooksUrl: "http://127.0.0.1:9",
        controllerUrl: "http://127.0.0.1:10",
        webhookSecret: "whsec_env_test",
      },
      join(LOCAL, "node", "24.21.0", "bin", "node"),
    ),
  );
});
afterAll(() => sim?.close());

function sourced(command: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    // A shell as a user has it: the machine's PATH, nothing of the stack exported yet.
    const child = spawn("bash", ["-c", `source ${file} && ${command}`], {
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: process.env.HOME },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? -1, output }));
  });
}

describe(".local/env", () => {
  it("puts .local/bin on PATH, where make helm links helm", async () => {
    const res = await sourced('echo "$PATH"');
    expect(res.output.split(":")).toContain(join(LOCAL, "bin"));
  });

  it("names the controller's and the sidecar's metrics URLs", async () => {
    const res = await sourced('echo "$CONTROLLER_METRICS_URL $WEBHOOKS_METRICS_URL"');
    expect(res.output.trim()).toBe("http://127.0.0.1:10/metrics http://127.0.0.1:9/metrics");
  });

  it("puts the project's Node first on PATH", async () => {
    const res = await sourced('echo "$PATH"');
    expect(res.output.split(":")[0]).toBe(join(LOCAL, "node", "24.21.0", "bin"));
  });

  it.skipIf(!existsSync(PYTHON))(
    "is all RunPod's Python SDK needs to reach the simulator: management calls and jobs",
    async () => {
      const script = [
        "import os, runpod",
        'runpod.api_key = os.environ["RUNPOD_API_KEY"]',
        "print('endpoints', sorted(e['name'] for e in runpod.get_endpoints()))",
        "print('job', runpod.Endpoint('ep-asr-env').run_sync({'audio': 'a.wav'}, timeout=30) is not None)",
      ].join("\n");
      const res = await sourced(`${PYTHON} -c "${script.replace(/"/g, '\\"')}"`);
      expect(res.code, res.output).toBe(0);
      expect(res.output).toContain("endpoints ['media-asr-dev']");
      expect(res.output).toContain("job True");
    },
    60_000,
  );
});
