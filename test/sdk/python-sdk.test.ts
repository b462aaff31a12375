// RunPod's official Python SDK (PyPI `runpod`, pinned in test/sdk/requirements.txt) drives the
// simulator: its GraphQL queries for the user and the endpoints, and its job API calls. The cases
// are in test_runpod_python.py; each becomes one vitest test here, so the summary counts them.
// `make sdk-venv` (a prerequisite of `make test`) installs the SDK into .local/venv.
import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimulator, type Simulator } from "../../tools/simulator/server.js";

const PYTHON = join(process.cwd(), ".local", "venv", "bin", "python");
const FILE = "test/sdk/test_runpod_python.py";
const PYTEST = ["-m", "pytest", "-p", "no:cacheprovider", FILE];
const KEY = "rp_PYTHONSDK_9f8e7d6c";

/** The pytest cases, collected without running them (needs only the venv). */
function collect(): string[] {
  if (!existsSync(PYTHON)) return [];
  const listed = execFileSync(PYTHON, [...PYTEST, "--collect-only", "-q"], {
    encoding: "utf8",
    env: {
      PATH: process.env.PATH,
      SIM_URL: "x",
      SIM_ASR_ENDPOINT: "x",
      SIM_IDLE_ENDPOINT: "x",
      RUNPOD_API_KEY: "x",
    },
  });
  return listed
    .split("\n")
    .filter((l) => l.startsWith(`${FILE}::`))
    .map((l) => l.slice(FILE.length + 2));
}

let sim: Simulator;
let outcomes: Map<string, string>;
let output = "";

function runPytest(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [...PYTEST, "-q", "-rA"], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        SIM_URL: sim.url,
        SIM_ASR_ENDPOINT: "ep-asr-sdk",
        SIM_IDLE_ENDPOINT: "ep-idle-sdk",
        RUNPOD_API_KEY: KEY,
        RUNPOD_API_BASE_URL: sim.url,
        RUNPOD_ENDPOINT_BASE_URL: `${sim.url}/v2`,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    child.on("error", reject);
    child.on("close", () => resolve());
  });
}

const cases = collect();

describe("RunPod's Python SDK against the simulator", () => {
  beforeAll(async () => {
    if (cases.length === 0) return;
    sim = await startSimulator({
      apiKeys: [KEY],
      timeScale: 0.01,
      endpoints: [
        { id: "ep-asr-sdk", name: "media-asr-sdk", workload: "asr", workersMax: 2 },
        { id: "ep-idle-sdk", name: "media-render-idle", workload: "render", workersMax: 0 },
      ],
    });
    await runPytest();
    // -rA ends with one line per case: "PASSED test/sdk/test_runpod_python.py::test_x".
    outcomes = new Map(
      [...output.matchAll(/^(PASSED|FAILED|ERROR|SKIPPED)\S* \S+::(\w+)/gm)].map((m) => [m[2]!, m[1]!]),
    );
  }, 120_000);
  afterAll(() => sim?.close());

  if (cases.length === 0) {
    it("has the SDK installed", () => {
      expect(existsSync(PYTHON), "RunPod's Python SDK is not installed: run `make sdk-venv`").toBe(true);
    });
  }
  for (const name of cases) {
    it(name.replace(/^test_/, "").replace(/_/g, " "), () => {
      expect(outcomes.get(name), output).toBe("PASSED");
    });
  }
});
