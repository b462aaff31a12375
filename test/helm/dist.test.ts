// What the image runs, built the way the Dockerfile builds it: dist/ compiled by tsc from
// tsconfig.build.json, node_modules from `npm ci --omit=dev --ignore-scripts` of the same lock file,
// and nothing else of the repository. Both containers' commands start from it against the local
// control plane and the provider simulator, answer /readyz, and run a job end to end, so a runtime
// import of a dev dependency, a path that only resolves from the sources, or a mode the entry point
// lost fails here (no Docker engine is needed).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { freePort } from "../../scripts/devstack-lib.js";
import { RUNTIME_ENV, RUNTIME_FLAGS } from "../../bench/lib.js";
import { REPO_ROOT } from "../support/controlplane.js";
import { createTestNamespace, eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import {
  gpuEndpoint,
  mediaJob,
  SIM_KEY,
  startTestSimulator,
  TEST_ENV,
  waitForPhase,
  waitForReady,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let sim: Simulator;
let appDir = "";
const children: Array<{ name: string; child: ChildProcess; stderr: () => string }> = [];
let controllerUrl = "";
let webhooksUrl = "";

function run(cmd: string, args: string[], cwd: string): void {
  const res = spawnSync(cmd, args, { cwd, encoding: "utf8", env: process.env });
  if (res.status !== 0)
    throw new Error(`${cmd} ${args.join(" ")} exited ${res.status}: ${res.stderr || res.stdout}`);
}

/** The image's command (ENTRYPOINT node ... dist/src/main.js, CMD mode). */
function startContainer(mode: "controller" | "webhooks", env: Record<string, string>): void {
  const args = [...RUNTIME_FLAGS, "dist/src/main.js", mode];
  const child = spawn(process.execPath, args, {
    cwd: appDir,
    stdio: ["ignore", "ignore", "pipe"],
    // Only what the chart gives the container: no loader or NODE_OPTIONS of the test run.
    env: {
      PATH: process.env.PATH ?? "",
      NODE_ENV: "production",
      ...RUNTIME_ENV,
      KUBECONFIG: testKubeconfigPath(),
      ...env,
    },
  });
  let stderr = "";
  child.stderr?.on("data", (c: Buffer) => (stderr += c.toString()));
  children.push({ name: mode, child, stderr: () => stderr });
}

async function readyz(url: string): Promise<number | undefined> {
  try {
    const res = await request(`${url}/readyz`);
    await res.body.dump();
    return res.statusCode;
  } catch {
    return undefined;
  }
}

beforeAll(async () => {
  appDir = mkdtempSync(join(tmpdir(), "mo-dist-"));
  // The build stage: the full dependency set compiles src into dist/src.
  run(
    process.execPath,
    [
      join(REPO_ROOT, "node_modules/typescript/bin/tsc"),
      "-p",
      "tsconfig.build.json",
      "--outDir",
      join(appDir, "dist"),
    ],
    REPO_ROOT,
  );
  // The deps stage: production dependencies only, from the same lock file.
  for (const f of ["package.json", "package-lock.json"]) copyFileSync(join(REPO_ROOT, f), join(appDir, f));
  run("npm", ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline"], appDir);

  ns = await createTestNamespace(kc, "dist");
  sim = await startTestSimulator();
  const [controllerPort, webhooksPort] = [await freePort(), await freePort()];
  controllerUrl = `http://127.0.0.1:${controllerPort}`;
  webhooksUrl = `http://127.0.0.1:${webhooksPort}`;
  const shared = {
    GPU_PROVIDER_API_URL: sim.url,
    GPU_PROVIDER_API_KEY: SIM_KEY,
    MEDIA_ENV: TEST_ENV,
    CALLBACK_BASE_URL: webhooksUrl,
    CALLBACK_SECRET: `callback-secret-${randomBytes(8).toString("hex")}`,
    WATCH_NAMESPACE: ns,
    LOG_LEVEL: "warn",
  };
  startContainer("controller", {
    ...shared,
    LEADER_ELECTION: "false",
    RESYNC_INTERVAL_SECONDS: "1",
    CONTROLLER_METRICS_PORT: String(controllerPort),
  });
  startContainer("webhooks", {
    ...shared,
    WEBHOOKS_HOST: "127.0.0.1",
    WEBHOOKS_PORT: String(webhooksPort),
    PAYMENT_PROVIDER_WEBHOOK_SECRET: `whsec_${randomBytes(12).toString("hex")}`,
  });
});

afterAll(async () => {
  await Promise.all(
    children.map(
      ({ child }) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once("exit", () => resolve());
          child.kill("SIGTERM");
        }),
    ),
  );
  await sim?.close();
  if (appDir) rmSync(appDir, { recursive: true, force: true });
});

const exited = () =>
  children
    .filter(({ child }) => child.exitCode !== null || child.signalCode !== null)
    .map(({ name, child, stderr }) => `${name} exited ${child.exitCode ?? child.signalCode}: ${stderr()}`);

describe("the compiled build with production dependencies only", () => {
  it("holds no dev dependency", () => {
    expect(existsSync(join(appDir, "dist/src/main.js"))).toBe(true);
    for (const dev of ["typescript", "vitest", "tsx"])
      expect(existsSync(join(appDir, "node_modules", dev)), dev).toBe(false);
  });

  it("holds the product's sources only: no provider simulator, no tool", () => {
    const compiled = readdirSync(join(appDir, "dist"), { recursive: true, encoding: "utf8" });
    expect(readdirSync(join(appDir, "dist"))).toEqual(["src"]);
    expect(compiled.filter((f) => /simulator/i.test(f))).toEqual([]);
  });

  it("starts both containers' commands, each ready on /readyz", async () => {
    for (const url of [controllerUrl, webhooksUrl]) {
      await eventually(
        async () => {
          const died = exited();
          if (died.length) throw new Error(died.join("\n"));
          return (await readyz(url)) === 200;
        },
        { timeoutMs: 30_000, message: () => `${url}/readyz to answer 200 (${exited().join("; ")})` },
      );
    }
  });

  it("runs a job to Completed with the provider's output, its callback through the sidecar", async () => {
    await api.create("gpuendpoints", ns, gpuEndpoint("asr", { workload: "asr" }) as never);
    await waitForReady(api, ns, "asr", 30_000);
    await api.create(
      "mediajobs",
      ns,
      mediaJob("built", { workload: "asr", id: "built-1", input: { audio: "s3://in.wav" } }) as never,
    );
    const job = await waitForPhase(api, ns, "built", "Completed", 30_000);
    const atProvider = sim.getJob("built-1")!;
    expect(job.status?.output).toEqual(atProvider.output);
    expect(sim.executions("built-1")).toBe(1);
    // The sidecar wrote the completion before it answered the callback; the simulator records the
    // delivery once the answer is in.
    await eventually(() => sim.deliveries().some((d) => d.key === "built-1" && d.ok), {
      message: () => `the callback to be delivered (${JSON.stringify(sim.deliveries())})`,
    });
    expect(exited()).toEqual([]);
    const check = await api.get<MediaJob>("mediajobs", ns, "built");
    expect(check?.status?.providerJobId).toBe(atProvider.id);
  });
});
