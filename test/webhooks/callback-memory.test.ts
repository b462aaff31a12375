// The sidecar as a process (`media-orchestrator webhooks`) under the callback attack of a leaked URL:
// 16 MiB bodies of `[{},{},...]`, four at once, to a finished job's callback URL and to unconfirmed
// submissions' URLs (whose bodies it must read). Its resident memory, read from its own /metrics
// while the attack runs, stays within the chart's limit for the container (256 MiB), and every
// genuine callback sent meanwhile is answered 2xx.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { build } from "esbuild";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RUNTIME_FLAGS } from "../../bench/lib.js";
import { KubeApi } from "../../src/k8s/api.js";
import { CALLBACK_BODY_LIMIT } from "../../src/webhooks/callbacks.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { CallbackJobs } from "../support/callbacks.js";
import { createTestNamespace, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import { SIM_KEY, startTestSimulator, waitForPhase } from "../support/stack.js";

/** The chart's memory limit for the webhooks container (deploy/helm/values.yaml). */
const CHART_LIMIT_BYTES = 256 * 1024 * 1024;

const kc = testKubeConfig();
const api = new KubeApi(kc);
const secret = `callback-secret-${randomBytes(16).toString("hex")}`;
let ns = "";
let sim: Simulator;
let sidecarUrl = "";
let stop: (() => void) | undefined;
let jobs: CallbackJobs;

beforeAll(async () => {
  ns = await createTestNamespace(kc, "webhooks-cb-memory");
  sim = await startTestSimulator();
  // As the image runs it: one JavaScript file (no TypeScript loader in the process), the image's
  // node flags and malloc settings (Dockerfile).
  const main = join(mkdtempSync(join(tmpdir(), "cb-memory-")), "main.mjs");
  await build({
    entryPoints: ["src/main.ts"],
    outfile: main,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node24",
    banner: {
      js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
    },
    logLevel: "error",
  });
  const child = spawn(process.execPath, [...RUNTIME_FLAGS, main, "webhooks"], {
    cwd: process.cwd(),
    env: {
      MALLOC_ARENA_MAX: "1",
      MALLOC_MMAP_THRESHOLD_: "131072",
      MALLOC_TRIM_THRESHOLD_: "131072",
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "",
      KUBECONFIG: testKubeconfigPath(),
      CALLBACK_SECRET: secret,
      GPU_PROVIDER_API_KEY: SIM_KEY,
      GPU_PROVIDER_API_URL: sim.url,
      PAYMENT_WEBHOOKS_ENABLED: "false",
      WATCH_NAMESPACE: ns,
      WEBHOOKS_HOST: "127.0.0.1",
      WEBHOOKS_PORT: "0",
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  stop = () => child.kill("SIGTERM");
  for await (const line of createInterface({ input: child.stdout })) {
    if (line.includes("webhooks sidecar started")) {
      sidecarUrl = (JSON.parse(line) as { url: string }).url;
      break;
    }
  }
  child.stdout.resume();
  jobs = new CallbackJobs({ api, namespace: ns, secret, sim, sidecarUrl: () => sidecarUrl });
}, 60_000);

afterAll(async () => {
  stop?.();
  await sim?.close();
});

async function rss(): Promise<number> {
  const text = await (await request(`${sidecarUrl}/metrics`)).body.text();
  const line = text.split("\n").find((l) => /^(\w+_)?process_resident_memory_bytes /.test(l));
  return Number(line?.split(" ")[1] ?? 0);
}

async function post(url: string, body: string | Buffer): Promise<number> {
  try {
    const res = await request(url, { method: "POST", headers: { "content-type": "application/json" }, body });
    await res.body.dump();
    return res.statusCode;
  } catch {
    return 0; // the sidecar answered and closed before the whole body was sent
  }
}

describe("the sidecar process under 16 MiB callback bodies", () => {
  it("stays within the chart's memory limit, and answers every genuine callback 2xx", async () => {
    const bigString = JSON.stringify("x".repeat(CALLBACK_BODY_LIMIT - 1024));
    const junk = `[${"{},".repeat(Math.floor((16 * 1024 * 1024) / 3) - 1)}{}]`;
    const { job: finished } = await jobs.submitted(`finished-${randomBytes(3).toString("hex")}`);
    await waitForPhase(api, ns, finished.metadata.name, "Completed");
    const unconfirmed = await Promise.all(
      [1, 2, 3, 4].map((i) => jobs.submitted(`unconfirmed-${i}`, { webhook: false, record: false })),
    );
    for (const u of unconfirmed) await jobs.finished(u.job);
    const genuine = await Promise.all(
      [1, 2, 3].map((i) => jobs.submitted(`genuine-${i}`, { webhook: false })),
    );
    for (const g of genuine) await jobs.finished(g.job);

    const before = await rss();
    let peak = before;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await rss().catch(() => 0));
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const attack = Promise.all([
      ...[1, 2, 3, 4].map(() => post(jobs.url(finished), junk)),
      ...unconfirmed.map((u, i) =>
        post(
          jobs.url(u.job),
          // Half carry millions of objects, half one string as large as the limit allows.
          `{"id":${JSON.stringify(u.providerJobId)},"status":"COMPLETED","output":${i % 2 ? junk : bigString}}`,
        ),
      ),
    ]);
    const genuineAnswers = await Promise.all(
      genuine.map((g) => post(jobs.url(g.job), JSON.stringify({ id: g.providerJobId, status: "COMPLETED" }))),
    );
    const attackAnswers = await attack;
    sampling = false;
    await sampler;
    process.stdout.write(
      `sidecar RSS: ${(before / 2 ** 20).toFixed(0)} MiB before, ${(peak / 2 ** 20).toFixed(0)} MiB peak ` +
        `(limit ${CHART_LIMIT_BYTES / 2 ** 20} MiB); attack answers ${attackAnswers.join(",")}\n`,
    );
    expect(genuineAnswers).toEqual([200, 200, 200]);
    // The unconfirmed submissions' callbacks were genuine too (their bodies held the right id).
    expect(attackAnswers.slice(4)).toEqual([200, 200, 200, 200]);
    expect(before).toBeGreaterThan(0);
    expect(peak).toBeLessThan(CHART_LIMIT_BYTES);
    for (const u of unconfirmed)
      expect((await waitForPhase(api, ns, u.job.metadata.name, "Completed")).status?.phase).toBe("Completed");
  }, 120_000);
});
