// kubectl-media as the on-call engineer runs it: a real child process against the real control
// plane and the provider simulator over HTTP. No controller runs here (jobs must stay Processing):
// the tests write MediaJob status themselves, then assert stdout, stderr, the exit code and the
// resulting Kubernetes state. One test runs a Manager to show `complete` triggers the next step.
// Every run also asserts that no secret appears in its output.
//
// Speed: under tsx, loading @kubernetes/client-node costs about 4 s of CPU per process (measured:
// 4.1 s user for `stuck`, against 0.6 s for the same source bundled by esbuild), and this file
// starts some forty processes on a 2-core machine. So the source is bundled once, in beforeAll,
// and each run is `node <bundle>`; the plugin path itself (bin/kubectl-media through kubectl, on
// tsx) is exercised once, in the stuck/recover test.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CoreV1Api } from "@kubernetes/client-node";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { GpuProviderClient } from "../../src/provider/index.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { verifyStripeSignature } from "../../src/webhooks/signature.js";
import {
  createTestNamespace,
  eventsOf,
  eventually,
  testKubeConfig,
  testKubeconfigPath,
} from "../support/kube.js";
import {
  gpuEndpoint,
  mediaJob,
  simEndpointId,
  startManager,
  startTestSimulator,
  testEnv,
  waitForPhase,
  waitForReady,
} from "../support/stack.js";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
const BUILD_DIR = mkdtempSync(join(tmpdir(), "kubectl-media-test-"));
const CLI = join(BUILD_DIR, "kubectl-media.mjs");

/** The CLI's source as one file, so each run starts in well under a second. */
async function bundleCli(): Promise<void> {
  await build({
    entryPoints: [join(REPO, "src/cli/kubectl-media.ts")],
    outfile: CLI,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // Bundled CommonJS dependencies call require().
    banner: {
      js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);",
    },
    logLevel: "error",
  });
}

const tag = randomBytes(6).toString("hex");
const GPU_KEY = `gpu-key-${tag}`;
const WRONG_GPU_KEY = `wrong-gpu-key-${tag}`;
const SUSPENDED_GPU_KEY = `suspended-gpu-key-${tag}`;
const PAY_KEY = `pay-key-${tag}`;
const WRONG_PAY_KEY = `wrong-pay-key-${tag}`;
const WHSEC = `whsec_right_${tag}`;
const WRONG_WHSEC = `whsec_wrong_${tag}`;
const CALLBACK_SECRET = `callback-secret-${tag}`;
const SECRETS = [
  GPU_KEY,
  WRONG_GPU_KEY,
  SUSPENDED_GPU_KEY,
  PAY_KEY,
  WRONG_PAY_KEY,
  WHSEC,
  WRONG_WHSEC,
  CALLBACK_SECRET,
];

const kc = testKubeConfig();
const api = new KubeApi(kc);
let sim: Simulator;
let gpu: GpuProviderClient;
let sidecar: FakeSidecar;
let asrId = "";
let nsA = ""; // single-job commands: status, reset, complete
let nsB = ""; // the stuck/recover sequence

const HOUR_AGO = () => new Date(Date.now() - 3_600_000).toISOString();

// ---- running the CLI ----------------------------------------------------------------------------

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cliEnv(overrides: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) {
    if (/^(GPU_PROVIDER_|PAYMENT_PROVIDER_|CALLBACK_|WEBHOOKS_URL|MEDIA_|JOB_TIMEOUT)/.test(k)) delete env[k];
  }
  Object.assign(env, {
    KUBECONFIG: testKubeconfigPath(),
    GPU_PROVIDER_API_URL: sim.url,
    GPU_PROVIDER_API_KEY: GPU_KEY,
    PAYMENT_PROVIDER_API_URL: sim.url,
    PAYMENT_PROVIDER_API_KEY: PAY_KEY,
    PAYMENT_PROVIDER_WEBHOOK_SECRET: WHSEC,
    CALLBACK_SECRET,
  });
  for (const [k, v] of Object.entries(overrides)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

// At most three CLI processes at a time: more only starve each other on two cores.
let running = 0;
const waiting: Array<() => void> = [];
async function slot<T>(fn: () => Promise<T>): Promise<T> {
  if (running >= 3) await new Promise<void>((r) => waiting.push(r));
  running++;
  try {
    return await fn();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

async function run(
  command: string,
  args: string[],
  overrides: Record<string, string | undefined>,
  cwd = REPO,
): Promise<Run> {
  const res = await slot(() => spawnRun(command, args, overrides, cwd));
  for (const secret of SECRETS) {
    expect(res.stdout, `stdout of ${args.join(" ")} leaks a secret`).not.toContain(secret);
    expect(res.stderr, `stderr of ${args.join(" ")} leaks a secret`).not.toContain(secret);
  }
  return res;
}

function spawnRun(
  command: string,
  args: string[],
  overrides: Record<string, string | undefined>,
  cwd: string,
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: cliEnv(overrides), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      // CLI_TEST_ECHO=1 shows what the on-call engineer would see.
      if (process.env.CLI_TEST_ECHO)
        process.stderr.write(
          `\n$ kubectl media ${args.slice(1).join(" ")}  (exit ${code})\n${stdout}${stderr}`,
        );
      resolve({ code, stdout, stderr });
    });
  });
}

/** `kubectl media ...`: the bundled source, run by node. */
const media = (args: string[], overrides: Record<string, string | undefined> = {}) =>
  run(process.execPath, [CLI, ...args], overrides);

// ---- fixtures -----------------------------------------------------------------------------------

/** A stand-in for the webhooks sidecar: health routes, and the real Stripe signature check. */
interface FakeSidecar {
  url: string;
  events: Array<{ id: string; type: string }>;
  close(): Promise<void>;
}

async function startFakeSidecar(secret: string): Promise<FakeSidecar> {
  const events: FakeSidecar["events"] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const reply = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      if (req.method === "GET" && (req.url === "/healthz" || req.url === "/readyz"))
        return reply(200, { status: "ok" });
      if (req.method === "POST" && req.url === "/webhooks/payment_provider") {
        const raw = Buffer.concat(chunks);
        const header = req.headers["stripe-signature"];
        const check = verifyStripeSignature(
          raw,
          typeof header === "string" ? header : undefined,
          [secret],
          300,
          Date.now() / 1000,
        );
        if (!check.ok) return reply(400, { error: "invalid signature" });
        const event = JSON.parse(raw.toString("utf8")) as { id: string; type: string };
        events.push({ id: event.id, type: event.type });
        return reply(200, { received: true });
      }
      reply(404, { error: "not found" });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    events,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

type ProviderState = "COMPLETED" | "IN_PROGRESS" | "FAILED";

/**
 * A job at the provider in the given state (held jobs stay IN_PROGRESS). The provider ignores our
 * id (RunPod), so its own id is returned, as the controller would have recorded it.
 */
async function providerJob(id: string, state: ProviderState): Promise<string> {
  if (state === "IN_PROGRESS") sim.holdJob(id);
  if (state === "FAILED") sim.setFaults({ failJob: 1 });
  const submitted = await gpu.submit(asrId, { id, input: { audio: `${id}.wav` } });
  await eventually(() => sim.getJob(id)?.status === state, { message: `provider job ${id} ${state}` });
  if (state === "FAILED") sim.setFaults({});
  return submitted.id;
}

/** A MediaJob with the status a test needs, written as the controller would have. */
async function job(
  ns: string,
  name: string,
  status: Partial<NonNullable<MediaJob["status"]>> & { phase: string },
  spec: Record<string, unknown> = {},
): Promise<MediaJob> {
  const created = await api.create<MediaJob>(
    "mediajobs",
    ns,
    mediaJob(name, { workload: "asr", id: name, ...spec }) as never,
  );
  const at = HOUR_AGO();
  return api.replaceStatus<MediaJob>("mediajobs", {
    ...created,
    status: {
      jobId: name,
      attempts: 1,
      ...(status.phase === "Pending" ? {} : { providerJobId: name, endpointId: asrId, submittedAt: at }),
      updatedAt: at,
      ...status,
    },
  } as MediaJob);
}

/** A Processing MediaJob, submitted an hour ago, whose provider job is in `state` (or unknown). */
async function processing(ns: string, name: string, state?: ProviderState): Promise<MediaJob> {
  const providerJobId = state ? await providerJob(name, state) : `${name}-unknown-u1`;
  return job(ns, name, { phase: "Processing", providerJobId });
}

const get = async (ns: string, name: string) => (await api.get<MediaJob>("mediajobs", ns, name))!;

beforeAll(async () => {
  const bundled = bundleCli();
  sim = await startTestSimulator({
    apiKeys: [GPU_KEY],
    accountProblemKeys: [SUSPENDED_GPU_KEY],
    paymentApiKeys: [PAY_KEY],
    statusRetentionMs: 1e9,
    endpoints: ["asr", "tts", "render"].map((w) => ({
      name: `media-${w}-test`,
      workload: w as "asr",
      workersMax: 10,
    })),
  });
  gpu = new GpuProviderClient({ apiUrl: sim.url, apiKey: GPU_KEY });
  asrId = simEndpointId(sim, "media-asr-test")!;
  sidecar = await startFakeSidecar(WHSEC);
  [nsA, nsB] = await Promise.all([
    createTestNamespace(kc, "cli-jobs"),
    createTestNamespace(kc, "cli-recover"),
  ]);
  await Promise.all([
    processing(nsA, "a-status-done", "COMPLETED"),
    processing(nsA, "a-complete-done", "COMPLETED"),
    processing(nsA, "a-running", "IN_PROGRESS"),
    processing(nsA, "a-lost"),
    processing(nsA, "a-reset"),
    job(nsA, "a-finished", { phase: "Completed", completedAt: HOUR_AGO(), output: { transcript: "x" } }),
    job(nsA, "a-pending", { phase: "Pending" }),
    job(nsA, "a-leaky", { phase: "Failed", error: `provider said: bad key ${GPU_KEY}` }),
    job(nsA, "a-unconfirmed", {
      phase: "Failed",
      providerJobId: undefined,
      completedAt: HOUR_AGO(),
      error: "SubmissionUnconfirmed: attempt 1 was never confirmed",
      submission: { attempt: 1, id: "sub-unconfirmed-1", startedAt: HOUR_AGO(), state: "Unconfirmed" },
    }),
    processing(nsB, "b-done", "COMPLETED"),
    processing(nsB, "b-running", "IN_PROGRESS"),
    processing(nsB, "b-lost"),
    job(nsB, "b-fresh", { phase: "Processing", submittedAt: new Date().toISOString() }),
    job(nsB, "b-finished", { phase: "Completed", completedAt: HOUR_AGO(), output: {} }),
  ]);
  // Last, alone: the failJob fault is global while it is set.
  await processing(nsB, "b-failed", "FAILED");
  await bundled;
}, 120_000);

afterAll(async () => {
  await sidecar?.close();
  await sim?.close();
  rmSync(BUILD_DIR, { recursive: true, force: true });
});

// ---- the commands -------------------------------------------------------------------------------

// Generous timeouts: the tests queue for CLI slots, and a shared 2-core machine may be busy.
describe.concurrent("kubectl media", { timeout: 180_000 }, () => {
  it("exits 2 with a pointer to help on usage errors", async () => {
    const [unknown, flag, missing] = await Promise.all([
      media(["restart"]),
      media(["stuck", "--dry-run"]),
      media(["reset"]),
    ]);
    expect(unknown).toMatchObject({ code: 2, stdout: "" });
    expect(unknown.stderr).toContain('error: unknown command "restart"');
    expect(unknown.stderr).toContain("See 'kubectl media --help' for usage.");
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("stuck does not take --dry-run");
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("reset needs <mediajob>");
    expect(missing.stderr).toContain("See 'kubectl media reset --help'");
  });

  it("check-key: valid, invalid, account problem, unreachable; -o json for scripts", async () => {
    const [valid, invalid, account, down, json] = await Promise.all([
      media(["check-key"]),
      media(["check-key"], { GPU_PROVIDER_API_KEY: WRONG_GPU_KEY }),
      media(["check-key"], { GPU_PROVIDER_API_KEY: SUSPENDED_GPU_KEY }),
      media(["check-key", "--request-timeout", "2s"], { GPU_PROVIDER_API_URL: "http://127.0.0.1:1" }),
      media(["check-key", "-o", "json"], { GPU_PROVIDER_API_KEY: WRONG_GPU_KEY }),
    ]);
    expect(valid.code).toBe(0);
    expect(valid.stdout).toMatch(/GPU provider API key: valid\n.*valid \(account user_\w+\)/);
    expect(invalid.code).toBe(1);
    expect(invalid.stdout).toContain("GPU provider API key: INVALID");
    expect(invalid.stdout).toContain("Fix: rotate the key in the provider's API-key settings");
    expect(account.code).toBe(1);
    expect(account.stdout).toContain("GPU provider API key: ACCOUNT PROBLEM");
    expect(account.stdout).toMatch(/billing|balance/);
    expect(down.code).toBe(1);
    expect(down.stdout).toContain("GPU provider API key: UNKNOWN");
    expect(down.stdout).toContain("Fix: check GPU_PROVIDER_API_URL");
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ result: "invalid", keySource: "environment" });
  });

  it("check-key: reads the key from the operator's Secret when the environment has none", async () => {
    await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace: nsA,
      body: {
        metadata: { name: "orchestrator" },
        stringData: {
          GPU_PROVIDER_API_KEY: GPU_KEY,
          GPU_PROVIDER_API_URL: sim.url,
          OTHER_TOKEN: WRONG_PAY_KEY,
        },
      },
    });
    const unset = { GPU_PROVIDER_API_KEY: undefined, GPU_PROVIDER_API_URL: undefined, KUBECONFIG: undefined };
    const kubeconfig = ["--kubeconfig", testKubeconfigPath()];
    const [noKey, fromSecret, missingSecret] = await Promise.all([
      media(["check-key"], unset),
      media(["check-key", "-o", "json", "--secret", `${nsA}/orchestrator`, ...kubeconfig], unset),
      media(["check-key", "--secret", "nope", "-n", nsA, ...kubeconfig], unset),
    ]);
    expect(noKey.code).toBe(1);
    expect(noKey.stdout).toContain("GPU_PROVIDER_API_KEY is not set");
    expect(noKey.stdout).toContain("--secret <namespace>/<name>");
    expect(fromSecret.code).toBe(0);
    expect(JSON.parse(fromSecret.stdout)).toMatchObject({
      result: "valid",
      keySource: "secret",
      apiUrl: sim.url,
    });
    expect(missingSecret.code).toBe(1);
    expect(missingSecret.stderr).toContain(`error: Secret ${nsA}/nope not found`);
    expect(missingSecret.stderr).toContain(`hint: check --secret: kubectl get secrets -n ${nsA}`);
  });

  it("status: shows both sides and says what to do when they disagree", async () => {
    const [missed, running, unknown, json, badKey, leaky] = await Promise.all([
      media(["status", "a-status-done", "-n", nsA]),
      media(["status", "mj/a-running", "-n", nsA]),
      media(["status", "no-such-job", "-n", nsA]),
      media(["status", "a-status-done", "-n", nsA, "-o", "json"]),
      media(["status", "a-running", "-n", nsA], { GPU_PROVIDER_API_KEY: WRONG_GPU_KEY }),
      media(["status", "a-leaky", "-n", nsA]),
    ]);
    expect(missed.code).toBe(1);
    expect(missed.stdout).toMatch(/Phase: +Processing for \d+m \(timeout 10m: STUCK\)/);
    expect(missed.stdout).toMatch(/Status: +COMPLETED/);
    expect(missed.stdout).toContain(
      "Verdict: the provider completed the job but Kubernetes still shows Processing",
    );
    expect(missed.stdout).toContain(`Next:    'kubectl media complete a-status-done -n ${nsA}'`);

    expect(running.code).toBe(0);
    expect(running.stdout).toMatch(/Status: +IN_PROGRESS/);
    expect(running.stdout).toContain("Verdict: the provider is still working on it (IN_PROGRESS); wait");

    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toContain(`error: MediaJob "no-such-job" not found in namespace "${nsA}"`);
    expect(unknown.stderr).toContain(`hint: list the jobs with: kubectl get mediajobs -n ${nsA}`);

    expect(json.code).toBe(1);
    const doc = JSON.parse(json.stdout);
    expect(doc.mediaJob).toMatchObject({
      name: "a-status-done",
      phase: "Processing",
      stuck: true,
      endpointId: asrId,
    });
    expect(doc.provider).toMatchObject({ status: "COMPLETED", id: sim.getJob("a-status-done")!.id });
    expect(doc.provider.output).toEqual(sim.getJob("a-status-done")!.output);
    expect(doc.verdict).toMatchObject({ attention: true });

    expect(badKey.code).toBe(1);
    expect(badKey.stdout).toContain("ERROR (INVALID_API_KEY)");
    expect(badKey.stdout).toContain("run 'kubectl media check-key'");

    // A secret that reached the status (a provider echoing the key) is masked, not printed.
    expect(leaky.stdout).toContain("provider said: bad key [REDACTED]");
  });

  it("reset: Processing -> Pending with replay, as one atomic patch; refused otherwise", async () => {
    const before = await get(nsA, "a-finished");
    const started = Date.now() - 1000;
    const ok = await media(["reset", "a-reset", "-n", nsA]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(
      "mediajob.media-orchestrator.io/a-reset reset: Processing -> Pending, replay=true",
    );
    const after = await get(nsA, "a-reset");
    expect(after.status).toMatchObject({ phase: "Pending", replay: true, jobId: "a-reset", attempts: 1 });
    expect(Date.parse(after.status!.updatedAt!)).toBeGreaterThan(started);

    const [again, finished, unknown] = await Promise.all([
      media(["reset", "a-reset", "-n", nsA]),
      media(["reset", "a-finished", "-n", nsA]),
      media(["reset", "ghost", "-n", nsA]),
    ]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(
      `error: refused to reset MediaJob ${nsA}/a-reset: it is Pending, not Processing`,
    );
    expect(again.stderr).toContain("hint: nothing to do: a Pending job is already queued");
    expect(finished.code).toBe(1);
    expect(finished.stderr).toContain("it is Completed, not Processing");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('MediaJob "ghost" not found');
    // The refused resets changed nothing.
    expect((await get(nsA, "a-finished")).metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect((await get(nsA, "a-reset")).metadata.resourceVersion).toBe(after.metadata.resourceVersion);
  });

  it("reset: resubmits a job Failed with SubmissionUnconfirmed on purpose, and no other Failed job", async () => {
    const leaky = await get(nsA, "a-leaky");
    const ok = await media(["reset", "a-unconfirmed", "-n", nsA]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(
      "mediajob.media-orchestrator.io/a-unconfirmed reset: Failed (SubmissionUnconfirmed) -> Pending, replay=true",
    );
    expect(ok.stdout).toContain("if it did, the job runs twice");
    const after = await get(nsA, "a-unconfirmed");
    expect(after.status).toMatchObject({ phase: "Pending", replay: true, jobId: "a-unconfirmed" });
    expect(after.status?.submission).toBeUndefined();
    expect(after.status?.error).toBeUndefined();
    expect(after.status?.completedAt).toBeUndefined();
    const reasons = (await eventsOf(kc, nsA, "a-unconfirmed")).map((e) => e.reason);
    expect(reasons).toContain("ResubmittedByOperator");

    const refused = await media(["reset", "a-leaky", "-n", nsA]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("it is Failed, not Processing or Failed with SubmissionUnconfirmed");
    expect((await get(nsA, "a-leaky")).metadata.resourceVersion).toBe(leaky.metadata.resourceVersion);
  });

  it("complete: takes the provider's output only when it shows COMPLETED", async () => {
    const [ok, running, lost, pending, finished, unknown] = await Promise.all([
      media(["complete", "a-complete-done", "-n", nsA]),
      media(["complete", "a-running", "-n", nsA]),
      media(["complete", "a-lost", "-n", nsA]),
      media(["complete", "a-pending", "-n", nsA]),
      media(["complete", "a-finished", "-n", nsA]),
      media(["complete", "ghost", "-n", nsA]),
    ]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(
      "mediajob.media-orchestrator.io/a-complete-done completed from the provider's result",
    );
    const done = await get(nsA, "a-complete-done");
    expect(done.status).toMatchObject({
      phase: "Completed",
      providerJobId: sim.getJob("a-complete-done")!.id,
    });
    expect(done.status?.output).toEqual(sim.getJob("a-complete-done")!.output);
    expect(done.status?.conditions).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: "Succeeded", status: "True", reason: "Completed" }),
      ]),
    );

    expect(running.code).toBe(1);
    expect(running.stderr).toContain(
      "the provider says the job is still running (IN_PROGRESS), not COMPLETED",
    );
    expect(running.stderr).toContain(
      `hint: wait for it; check again with 'kubectl media status a-running -n ${nsA}'`,
    );
    expect(lost.code).toBe(1);
    expect(lost.stderr).toContain("the provider does not know job a-lost");
    expect(lost.stderr).toContain(`hint: replay it with 'kubectl media reset a-lost -n ${nsA}'`);
    expect(pending.code).toBe(1);
    expect(pending.stderr).toContain("it is Pending, not Processing");
    expect(finished.code).toBe(0);
    expect(finished.stdout).toContain("already Completed: nothing to do");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('MediaJob "ghost" not found');
    for (const name of ["a-running", "a-lost"])
      expect((await get(nsA, name)).status?.phase).toBe("Processing");
    expect((await get(nsA, "a-pending")).status?.phase).toBe("Pending");
  });

  it("stuck, then recover: each stuck job handled as the runbook says", async () => {
    const names = (r: Run) =>
      (JSON.parse(r.stdout) as { items: Array<{ name: string }> }).items.map((i) => i.name).sort();
    const stuckSet = ["b-done", "b-failed", "b-lost", "b-running"];

    const [table, json, older, all, badKey] = await Promise.all([
      media(["stuck", "-n", nsB]),
      media(["stuck", "-n", nsB, "-o", "json"]),
      media(["stuck", "-n", nsB, "--older-than", "2h"]),
      media(["stuck", "-A", "-o", "yaml"]),
      media(["recover", "-n", nsB], { GPU_PROVIDER_API_KEY: WRONG_GPU_KEY }),
    ]);
    expect(table.code).toBe(1);
    expect(table.stdout).toMatch(
      /^NAME +WORKLOAD +ENDPOINT +PROVIDER JOB +ATTEMPTS +PROCESSING FOR +LIMIT\n/,
    );
    expect(table.stdout).toMatch(/b-running +asr +\w+ +[0-9a-f-]+-u1 +1 +\d+m +10m/);
    expect(table.stderr).toContain(`4 stuck MediaJob(s) in namespace "${nsB}"`);
    expect(json.code).toBe(1);
    expect(names(json)).toEqual(stuckSet);
    expect(older.code).toBe(0);
    expect(older.stdout).toBe("");
    expect(older.stderr).toContain(`No stuck MediaJobs in namespace "${nsB}".`);
    expect(all.code).toBe(1);
    expect(all.stdout).toContain(`namespace: ${nsB}\n    name: b-running`);
    expect(badKey.code).toBe(1);
    expect(badKey.stderr).toContain("the GPU provider refuses the key (INVALID_API_KEY)");
    expect(badKey.stderr).toContain("hint: run 'kubectl media check-key'");

    const dry = await media(["recover", "-n", nsB, "--dry-run", "-o", "json"]);
    expect(dry.code).toBe(0);
    const plan = JSON.parse(dry.stdout) as { dryRun: boolean; items: Array<Record<string, unknown>> };
    expect(plan.dryRun).toBe(true);
    const byName = (items: Array<Record<string, unknown>>) =>
      Object.fromEntries(items.map((i) => [i.name, i]));
    expect(byName(plan.items)).toMatchObject({
      "b-done": { provider: "COMPLETED", action: "complete", outcome: "planned" },
      "b-failed": { provider: "FAILED", action: "record-result", outcome: "planned" },
      "b-lost": { provider: "NOT_FOUND", action: "reset", outcome: "planned" },
      "b-running": { provider: "IN_PROGRESS", action: "none", outcome: "skipped" },
    });
    for (const name of stuckSet) expect((await get(nsB, name)).status?.phase).toBe("Processing");

    const real = await media(["recover", "-n", nsB]);
    expect(real.code).toBe(0);
    expect(real.stdout).toMatch(
      /b-done +\d+m +COMPLETED +complete +done: the provider completed it: completed from the provider's output/,
    );
    expect(real.stdout).toMatch(/b-lost +.* +NOT_FOUND +reset +done: .*reset to Pending \(replay\)/);
    expect(real.stdout).toMatch(
      /b-failed +.* +FAILED +record-result +done: the provider reports FAILED: recorded that result \(now Failed\)/,
    );
    expect(real.stdout).toMatch(
      /b-running +.* +IN_PROGRESS +none +skipped: the provider is still working on it/,
    );
    expect(real.stderr).toContain("4 stuck job(s)");
    expect(real.stderr).toContain("3 recovered, 1 left as they are, 0 failed");

    expect((await get(nsB, "b-done")).status).toMatchObject({
      phase: "Completed",
      output: sim.getJob("b-done")!.output,
    });
    expect((await get(nsB, "b-lost")).status).toMatchObject({ phase: "Pending", replay: true });
    expect((await get(nsB, "b-failed")).status).toMatchObject({ phase: "Failed", failures: 1 });
    expect((await get(nsB, "b-failed")).status?.error).toMatch(/^FAILED: /);
    expect((await get(nsB, "b-running")).status?.phase).toBe("Processing");
    expect((await get(nsB, "b-fresh")).status?.phase).toBe("Processing");

    // The plugin as kubectl finds it on PATH: only the job still running is left stuck.
    const viaKubectl = await run("kubectl", ["media", "stuck", "-n", nsB, "-o", "json"], {
      PATH: `${REPO}bin:${process.env.PATH}`,
    });
    expect(viaKubectl.code).toBe(1);
    expect(names(viaKubectl)).toEqual(["b-running"]);
  });

  it("redeliver: the payment provider's redeliver call, and what our endpoint answered", async () => {
    sim.setPaymentWebhook({ url: `${sidecar.url}/webhooks/payment_provider`, secret: WHSEC });
    const delivery = await sim.sendPaymentEvent({ type: "invoice.paid" });
    expect(sidecar.events.filter((e) => e.id === delivery.eventId)).toHaveLength(1);

    const [ok, wrongKey, unknown] = await Promise.all([
      media(["redeliver", delivery.id]),
      media(["redeliver", delivery.id], { PAYMENT_PROVIDER_API_KEY: WRONG_PAY_KEY }),
      media(["redeliver", "whdel_unknown"]),
    ]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(`redelivered webhook delivery ${delivery.id} (event ${delivery.eventId})`);
    expect(ok.stdout).toContain("our webhook endpoint accepted it (HTTP 200)");
    expect(sidecar.events.filter((e) => e.id === delivery.eventId)).toHaveLength(2);
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stderr).toContain("the payment provider rejected PAYMENT_PROVIDER_API_KEY (HTTP 401");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('knows no webhook delivery "whdel_unknown" (HTTP 404');
    expect(unknown.stderr).toContain("hint: find the delivery id in the provider's dashboard");

    // The provider signs with a secret our endpoint does not have: redelivery reaches it, gets 400.
    sim.setPaymentWebhook({ url: `${sidecar.url}/webhooks/payment_provider`, secret: WRONG_WHSEC });
    const rejected = await media(["redeliver", delivery.id]);
    expect(rejected.code).toBe(1);
    expect(rejected.stderr).toContain("but our webhook endpoint answered HTTP 400");
    expect(rejected.stderr).toContain(
      "hint: a 400 means the signature did not verify: make PAYMENT_PROVIDER_WEBHOOK_SECRET",
    );
  });

  it("doctor: every check in the runbook's order, each finding with its fix", async () => {
    const [nsGood, nsBad] = await Promise.all([
      createTestNamespace(kc, "cli-doctor-ok"),
      createTestNamespace(kc, "cli-doctor-bad"),
    ]);
    const endpoint = async (ns: string, name: string, workload: string, endpointId: string) => {
      const ep = await api.create<GpuEndpoint>("gpuendpoints", ns, gpuEndpoint(name, { workload }) as never);
      await api.replaceStatus("gpuendpoints", { ...ep, status: { endpointId } });
    };
    await Promise.all([
      endpoint(nsGood, "asr", "asr", asrId),
      endpoint(nsBad, "asr", "asr", asrId),
      endpoint(nsBad, "render", "render", "gone0000000000"),
    ]);
    const before = sidecar.events.length;
    const [good, bad, broken] = await Promise.all([
      media(["doctor", "-n", nsGood, "--webhooks-url", sidecar.url], { MEDIA_ENV: "prod" }),
      media(["doctor", "-n", nsBad], {
        WEBHOOKS_URL: sidecar.url,
        PAYMENT_PROVIDER_WEBHOOK_SECRET: WRONG_WHSEC,
      }),
      media(
        [
          "doctor",
          "-n",
          nsGood,
          "-o",
          "json",
          "--webhooks-url",
          "http://127.0.0.1:1",
          "--request-timeout",
          "2s",
        ],
        {
          GPU_PROVIDER_API_KEY: WRONG_GPU_KEY,
          PAYMENT_PROVIDER_API_KEY: undefined,
        },
      ),
    ]);

    expect(good.code, good.stdout + good.stderr).toBe(0);
    const lines = good.stdout.split("\n");
    const order = [
      "Diagnose failing jobs",
      "[ok]   GPU API key: the GPU provider API key is valid",
      `[ok]   endpoint id (gpuendpoint ${nsGood}/asr): ${asrId} is live (media-asr-test)`,
      `[ok]   worker health (gpuendpoint ${nsGood}/asr)`,
      // (max: whatever the pipeline test's controller last set on the shared simulator)
      `[WARN] cold start (gpuendpoint ${nsGood}/asr): min workers 0, max `,
      "at the provider: this production endpoint scales to zero, so jobs pay cold-start latency",
      "Fix: set spec.minWorkers to 1; use spec.maxWorkers to cap cost",
      "Replay a payment webhook",
      "[ok]   webhook secret: set (1 secret; from the environment)",
      "[ok]   payment API key",
      `[ok]   webhooks sidecar (/healthz): ${sidecar.url}/healthz answered 200`,
      "[ok]   webhooks sidecar (/readyz)",
      "[ok]   webhook signature: the sidecar accepted a test event signed with the secret (evt_doctor_",
      "Stuck jobs",
      "[ok]   stuck jobs: no MediaJob is Processing past its timeout",
    ];
    const at = order.map((text) => lines.findIndex((l) => l.includes(text)));
    expect(
      at.every((i) => i >= 0),
      `missing: ${order.filter((_, i) => at[i]! < 0).join(" | ")}`,
    ).toBe(true);
    expect([...at].sort((x, y) => x - y)).toEqual(at);
    expect(good.stdout).toContain("0 failed");
    const test = sidecar.events.slice(before).filter((e) => e.id.startsWith("evt_doctor_"));
    expect(test.length).toBeGreaterThanOrEqual(1);
    expect(test[0]!.type).toBe("media_orchestrator.doctor");

    expect(bad.code).toBe(1);
    expect(bad.stdout).toContain(
      `[FAIL] endpoint id (gpuendpoint ${nsBad}/render): ENDPOINT_NOT_FOUND: gone0000000000 matches no live endpoint`,
    );
    expect(bad.stdout).toContain("Fix: re-deploy the endpoint, then update the id");
    expect(bad.stdout).toContain(
      "[FAIL] webhook signature: the sidecar rejected a test event signed with this secret (400)",
    );
    expect(bad.stdout).toContain(
      "Fix: make PAYMENT_PROVIDER_WEBHOOK_SECRET (in the operator's Secret) equal the signing secret",
    );
    expect(bad.stdout).toMatch(/2 failed/);

    expect(broken.code).toBe(1);
    const doc = JSON.parse(broken.stdout) as { ok: boolean; findings: Array<Record<string, string>> };
    expect(doc.ok).toBe(false);
    const find = (check: string, target?: string) =>
      doc.findings.find((f) => f.check === check && (target === undefined || f.target === target));
    expect(find("GPU API key")).toMatchObject({
      result: "fail",
      message: "the GPU provider rejects the API key",
    });
    expect(find("endpoint id")).toMatchObject({ result: "skip" });
    expect(find("payment API key")).toMatchObject({ result: "warn" });
    expect(find("webhooks sidecar", "/healthz")).toMatchObject({ result: "fail" });
    expect(find("webhooks sidecar", "/healthz")?.message).toContain("is unreachable");
    expect(find("webhook signature")).toMatchObject({ result: "skip" });
  });

  it("complete on a live pipeline: the controller then creates the next step", async () => {
    const ns = await createTestNamespace(kc, "cli-pipeline");
    const manager = startManager(
      kc,
      sim,
      testEnv(ns, { GPU_PROVIDER_API_URL: sim.url, GPU_PROVIDER_API_KEY: GPU_KEY, CALLBACK_SECRET }),
    );
    await manager.start();
    try {
      for (const w of ["asr", "tts"])
        await api.create("gpuendpoints", ns, gpuEndpoint(w, { workload: w }) as never);
      await Promise.all(["asr", "tts"].map((w) => waitForReady(api, ns, w)));
      // A long timeout: the controller will not poll the provider, so only `complete` can finish it.
      await api.create(
        "mediajobs",
        ns,
        mediaJob("pipe", {
          workload: "asr",
          id: `pipe-${tag}`,
          timeoutSeconds: 3600,
          input: { audio: "talk.wav" },
          then: [{ workload: "tts", timeoutSeconds: 3600 }],
        }) as never,
      );
      await waitForPhase(api, ns, "pipe", "Processing");
      await eventually(() => sim.getJob(`pipe-${tag}`)?.status === "COMPLETED");

      const res = await media(["complete", "pipe", "-n", ns]);
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toContain(
        "The controller now creates the next pipeline step: MediaJob pipe-1-tts (tts)",
      );
      const next = await eventually(() => api.get<MediaJob>("mediajobs", ns, "pipe-1-tts"));
      const output = sim.getJob(`pipe-${tag}`)!.output;
      expect(next.spec.input).toMatchObject({ previous: { job: "pipe", workload: "asr", output } });
      await eventually(async () => (await get(ns, "pipe")).status?.nextJob === "pipe-1-tts");
    } finally {
      await manager.stop();
    }
  });
});
