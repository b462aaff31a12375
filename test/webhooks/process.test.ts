// The sidecar as a process (`media-orchestrator webhooks`): it refuses to start without a payment
// signing secret, naming the variable and the way out, and starts without one when payment
// webhooks are switched off on purpose.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { testKubeconfigPath } from "../support/kube.js";

interface Started {
  exited: Promise<number | null>;
  stderr: () => string;
  stdoutLines: AsyncIterable<string>;
  kill: () => void;
}

// A sidecar that outlives a failed test must not outlive the run.
const running = new Set<() => void>();
afterEach(() => {
  for (const kill of running) kill();
  running.clear();
});

function startSidecar(extra: Record<string, string>): Started {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    KUBECONFIG: testKubeconfigPath(),
    CALLBACK_SECRET: `callback-secret-${randomBytes(8).toString("hex")}`,
    GPU_PROVIDER_API_KEY: "sim-key",
    WEBHOOKS_HOST: "127.0.0.1",
    WEBHOOKS_PORT: "0",
    ...extra,
  };
  const child = spawn("node_modules/.bin/tsx", ["src/main.ts", "webhooks"], {
    cwd: process.cwd(),
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const kill = () => child.kill("SIGTERM");
  running.add(kill);
  return {
    exited: new Promise((resolve) => child.on("exit", (code) => resolve(code))),
    stderr: () => stderr,
    stdoutLines: createInterface({ input: child.stdout }),
    kill,
  };
}

describe("the webhooks sidecar process", () => {
  it("exits 1 without PAYMENT_PROVIDER_WEBHOOK_SECRET, naming it and PAYMENT_WEBHOOKS_ENABLED", async () => {
    const sidecar = startSidecar({});
    expect(await sidecar.exited).toBe(1);
    expect(sidecar.stderr()).toContain("PAYMENT_PROVIDER_WEBHOOK_SECRET: required by the webhooks sidecar");
    expect(sidecar.stderr()).toContain("PAYMENT_WEBHOOKS_ENABLED=false");
  });

  it("starts without a signing secret when PAYMENT_WEBHOOKS_ENABLED=false, and serves", async () => {
    const sidecar = startSidecar({ PAYMENT_WEBHOOKS_ENABLED: "false" });
    let started = false;
    for await (const line of sidecar.stdoutLines) {
      if (line.includes("webhooks sidecar started")) {
        started = true;
        break;
      }
    }
    expect(started, sidecar.stderr()).toBe(true);
    sidecar.kill();
    await sidecar.exited;
  });
});
