// The worker kit (worker-kit/, PyPI-style package media-orchestrator-worker) under RunPod's own worker
// runtime: the sample handler (worker-kit/examples/handler.py) runs as RunPod documents local
// testing (`python handler.py --rp_serve_api`, https://docs.runpod.io/serverless/development/local-testing),
// served by the pinned runpod SDK's development API server, and is driven over HTTP. Its job input
// is what the controller sends: the submission's identity and the attempt's presigned URLs, minted
// with src/storage against a real S3 server (versitygw, which checks signatures and expiry). The
// outputs it uploads pass the controller's own output check (inspectOutputs/verifyOutputs), and
// its failures (a wrong digest, an expired URL, an altered URL) are clear errors that name the
// input or output and never carry a URL, in the job's error or the worker's log. The kit's own cases
// (retries, refusals, what a handler must write and return) are in test_worker_kit.py, against a
// scripted store; each becomes one vitest test here, as in python-sdk.test.ts.
// `make sdk-venv` installs the SDK and the kit into .local/venv.
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../scripts/devstack-lib.js";
import { submissionIdentity, withSubmissionIdentity } from "../../src/mediajob/submission-identity.js";
import { planAttemptIO, type AttemptDeadlines, type AttemptIOPlan } from "../../src/storage/attempt-io.js";
import { openStore, type Store } from "../../src/storage/index.js";
import { mintAttemptIO, withAttemptIO, type AttemptIO } from "../../src/storage/mint.js";
import { inspectOutputs, reportedOutputs, verifyOutputs } from "../../src/storage/output-check.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import { KubeApi } from "../../src/k8s/api.js";
import { testKubeConfig } from "../support/kube.js";
import { startS3Server, type S3Server } from "../support/s3server.js";
import { storeEnv } from "../support/s3store.js";
import {
  condition,
  gpuEndpoint,
  mediaJob,
  startControllerStack,
  waitForPhase,
  type ControllerStack,
} from "../support/stack.js";

const PYTHON = join(process.cwd(), ".local", "venv", "bin", "python");
const HANDLER = join(process.cwd(), "worker-kit", "examples", "handler.py");
const BUCKET = "worker-kit";
const NAMESPACE = "studio-a";

/** Whether the venv has the SDK and the kit (`make sdk-venv`). */
const installed =
  existsSync(PYTHON) &&
  spawnSync(PYTHON, ["-c", "import runpod, media_orchestrator_worker"], { stdio: "ignore" }).status === 0;

const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");
const uid = () => `${randomBytes(4).toString("hex")}-0000-4000-8000-${randomBytes(6).toString("hex")}`;

let s3: S3Server;
let store: Store;
let worker: ChildProcess;
let workerUrl: string;
let workerLog = "";
/** Every URL minted in this file: none may appear in a job's error or the worker's log. */
const minted: string[] = [];

async function startWorker(): Promise<void> {
  const port = await freePort();
  workerUrl = `http://127.0.0.1:${port}`;
  worker = spawn(
    PYTHON,
    [HANDLER, "--rp_serve_api", "--rp_api_host", "127.0.0.1", "--rp_api_port", String(port)],
    {
      // Nothing of RunPod's deployment (RUNPOD_ENDPOINT_ID, RUNPOD_WEBHOOK_PING): a local worker.
      env: { PATH: process.env.PATH, HOME: process.env.HOME, PYTHONUNBUFFERED: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  worker.stdout!.on("data", (c: Buffer) => (workerLog += c.toString()));
  worker.stderr!.on("data", (c: Buffer) => (workerLog += c.toString()));
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (worker.exitCode !== null) throw new Error(`the worker exited (${worker.exitCode}): ${workerLog}`);
    try {
      if ((await fetch(`${workerUrl}/openapi.json`, { signal: AbortSignal.timeout(1_000) })).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`the worker did not answer within 60 s: ${workerLog}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A job's input as the controller sends it: the user's parameters, the identity, the attempt's URLs. */
async function controllerInput(req: {
  inputs: Record<string, { uri: string; sha256?: string; size?: number }>;
  outputs: string[];
  deadlines?: AttemptDeadlines;
  params?: Record<string, unknown>;
}): Promise<{ input: Record<string, unknown>; plan: AttemptIOPlan; io: AttemptIO }> {
  const jobUid = uid();
  const res = planAttemptIO({
    scope: { namespace: NAMESPACE, jobUid, attempt: 1 },
    bucket: BUCKET,
    inputs: req.inputs,
    outputs: req.outputs,
    deadlines: req.deadlines ?? {
      submittedAt: new Date(),
      startBy: new Date(Date.now() + 60_000),
      executionTimeoutSeconds: 300,
    },
  });
  if (!res.ok) throw new Error(res.message);
  const io = await mintAttemptIO(res.plan, store.signer);
  minted.push(...Object.values(io.inputs).map((t) => t.url), ...Object.values(io.outputs).map((t) => t.url));
  const identity = submissionIdentity(jobUid, jobUid, { attempts: 1, submission: { id: `sub-${jobUid}` } });
  return { input: withAttemptIO(withSubmissionIdentity(req.params ?? {}, identity), io), plan: res.plan, io };
}

interface LocalJob {
  id: string;
  status: string;
  output?: Record<string, unknown>;
  error?: string;
}

async function post(path: string, body?: unknown): Promise<LocalJob> {
  const res = await fetch(`${workerUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  expect(res.status, path).toBe(200);
  return (await res.json()) as LocalJob;
}

/** runpod-python's error of a FAILED job: a JSON object with the handler's exception. */
function handlerError(job: LocalJob): { error_type: string; error_message: string; error_traceback: string } {
  expect(job.status, JSON.stringify(job)).toBe("FAILED");
  return JSON.parse(job.error!) as { error_type: string; error_message: string; error_traceback: string };
}

function expectNoUrl(text: string): void {
  expect(text).not.toMatch(/X-Amz-(Signature|Credential)/i);
  expect(text).not.toContain(s3.endpoint);
  for (const url of minted) expect(text).not.toContain(new URL(url).searchParams.get("X-Amz-Signature")!);
}

/** An object the user uploaded, referenced as the controller's input reference. */
async function transcript(text: string): Promise<{ uri: string; sha256: string; size: number }> {
  const key = `${NAMESPACE}/episodes/${uid()}.txt`;
  await store.client.put(key, Buffer.from(text), "text/plain");
  return { uri: `s3://${BUCKET}/${key}`, sha256: sha256(text), size: Buffer.byteLength(text) };
}

const TEXT = "Welcome back to the show. Today we talk about object storage.";
const WORDS = TEXT.split(/\s+/).length;

describe.runIf(installed)("the worker kit under RunPod's local API server", () => {
  beforeAll(async () => {
    s3 = await startS3Server();
    store = (await openStore(storeEnv(s3, BUCKET)))!;
    await store.client.createBucket();
    await startWorker();
  }, 240_000);
  afterAll(async () => {
    if (worker?.exitCode === null) {
      const exited = new Promise((r) => worker.once("exit", r));
      worker.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
      if (worker.exitCode === null && worker.signalCode === null) worker.kill("SIGKILL");
    }
    store?.client.close();
    await s3?.stop();
  });

  it("downloads the inputs, uploads the outputs, and returns digests the controller's output check accepts", async () => {
    const ref = await transcript(TEXT);
    const { input, plan } = await controllerInput({
      inputs: { transcript: ref },
      outputs: ["speech.wav"],
      params: { secondsPerWord: 0.05 },
    });
    const job = await post("/runsync", { input });
    expect(job.status, JSON.stringify(job)).toBe("COMPLETED");
    const output = job.output!;
    expect(output).toMatchObject({ words: WORDS, seconds: WORDS * 0.05 });

    // What the contract asks a worker to return: each output's digest and size, no URL.
    const reported = reportedOutputs(output);
    expect(Object.keys(reported)).toEqual(["speech.wav"]);
    expectNoUrl(JSON.stringify(output));

    // The controller's check before Completed: the object exists with that size and digest.
    const verdict = verifyOutputs(await inspectOutputs(store.client, plan.puts, reported), reported);
    expect(verdict).toEqual({
      ok: true,
      outputs: {
        "speech.wav": {
          key: `${NAMESPACE}/${plan.scope.jobUid}/1/speech.wav`,
          size: reported["speech.wav"]!.size,
          sha256: reported["speech.wav"]!.sha256,
        },
      },
    });
    // And read independently: a real WAV file, 16-bit mono at 16 kHz, 0.05 s per word.
    const key = plan.puts[0]!.key;
    expect(await store.client.sha256(key)).toBe(reported["speech.wav"]!.sha256);
    const wav = Buffer.from(
      await (await fetch(await store.signer.presign("GET", key, 60, new Date()))).arrayBuffer(),
    );
    expect(wav.subarray(0, 4).toString()).toBe("RIFF");
    expect(wav.subarray(8, 12).toString()).toBe("WAVE");
    expect(wav.byteLength).toBe(44 + WORDS * 800 * 2);
    expect(reported["speech.wav"]!.size).toBe(wav.byteLength);
  });

  it("runs a job submitted with /run when its status is asked, as RunPod's development server does", async () => {
    const { input, plan } = await controllerInput({
      inputs: { transcript: await transcript("one two three") },
      outputs: ["speech.wav"],
    });
    const queued = await post("/run", { input });
    expect(queued).toMatchObject({ status: "IN_PROGRESS" });
    // The development server takes no job id of ours: it assigns its own, as RunPod does.
    expect(queued.id).toMatch(/^test-/);
    const done = await post(`/status/${queued.id}`);
    expect(done.status, JSON.stringify(done)).toBe("COMPLETED");
    const reported = reportedOutputs(done.output);
    expect(await store.client.head(plan.puts[0]!.key)).toMatchObject({ size: reported["speech.wav"]!.size });
  });

  it("fails a job whose input does not have the reference's SHA-256, naming the input, and uploads nothing", async () => {
    const ref = await transcript(TEXT);
    const wrong = sha256("another transcript");
    const { input, plan } = await controllerInput({
      inputs: { transcript: { ...ref, sha256: wrong } },
      outputs: ["speech.wav"],
    });
    const err = handlerError(await post("/runsync", { input }));
    expect(err.error_type).toContain("MediaTransferError");
    expect(err.error_message).toBe(
      `input transcript: its SHA-256 is ${ref.sha256}, the reference says ${wrong}`,
    );
    expectNoUrl(JSON.stringify(err));
    expect(await store.client.head(plan.puts[0]!.key)).toBeUndefined();
  });

  it("fails a job whose input is shorter than the reference's size", async () => {
    const ref = await transcript(TEXT);
    const { input } = await controllerInput({
      inputs: { transcript: { uri: ref.uri, size: ref.size + 1 } },
      outputs: ["speech.wav"],
    });
    const err = handlerError(await post("/runsync", { input }));
    expect(err.error_message).toBe(`input transcript: ${ref.size} bytes, the reference says ${ref.size + 1}`);
  });

  it("fails a job whose URLs expired with an error naming the input and the expiry, never the URL", async () => {
    const ref = await transcript(TEXT);
    // Submitted 2 min ago with an active deadline that, with the URLs' grace, ends 1.5 s from now.
    const { input, io } = await controllerInput({
      inputs: { transcript: ref },
      outputs: ["speech.wav"],
      deadlines: {
        submittedAt: new Date(Date.now() - 120_000),
        activeDeadlineAt: new Date(Date.now() - 58_500),
      },
    });
    await new Promise((r) => setTimeout(r, 3_000));
    const err = handlerError(await post("/runsync", { input }));
    expect(err.error_message).toMatch(
      /^input transcript: GET refused with 403 AccessDenied \(Request has expired\)/,
    );
    expect(err.error_message).toContain(`stopped working at ${io.expiresAt}`);
    expectNoUrl(JSON.stringify(err));
  });

  it("fails a job whose output URL was altered, naming the output and S3's code", async () => {
    const { input, plan } = await controllerInput({
      inputs: { transcript: await transcript(TEXT) },
      outputs: ["speech.wav"],
    });
    const io = input._mediaOrchestrator as AttemptIO;
    const put = new URL(io.outputs["speech.wav"]!.url);
    const sig = put.searchParams.get("X-Amz-Signature")!;
    put.searchParams.set("X-Amz-Signature", `${sig.slice(0, -1)}${sig.endsWith("0") ? "1" : "0"}`);
    io.outputs["speech.wav"]!.url = put.toString();
    minted.push(put.toString());
    const err = handlerError(await post("/runsync", { input }));
    expect(err.error_message).toMatch(
      /^output speech\.wav: PUT refused with 403 SignatureDoesNotMatch .*: the URL was altered/,
    );
    expectNoUrl(JSON.stringify(err));
    expect(await store.client.head(plan.puts[0]!.key)).toBeUndefined();
  });

  // The product against RunPod's worker runtime: the controller submits to a self-hosted GpuEndpoint
  // (spec.baseUrl) whose base URL is the worker's development API server.
  describe("a MediaJob on a self-hosted GpuEndpoint served by the worker", () => {
    const kc = testKubeConfig();
    const api = new KubeApi(kc);
    const ACCOUNT = "cus_worker_kit";
    let stack: ControllerStack;
    beforeAll(async () => {
      const env = Object.fromEntries(
        Object.entries(storeEnv(s3, BUCKET)).filter(([, v]) => v !== undefined),
      ) as Record<string, string>;
      stack = await startControllerStack(kc, {
        name: "worker-kit",
        endpoints: [{ workload: "tts", baseUrl: workerUrl, maxInFlight: 2 }],
        accounts: [ACCOUNT],
        env,
      });
    }, 240_000);
    afterAll(() => stack?.stop());

    it("gets its input downloaded and its output uploaded by the kit, and completes with the digest checked", async () => {
      const ns = stack.ns;
      const text = "Good evening and welcome to the late news.";
      const key = `${ns}/episodes/7.txt`;
      await store.client.put(key, Buffer.from(text), "text/plain");
      await api.create(
        "mediajobs",
        ns,
        mediaJob("late-news", {
          workload: "tts",
          account: ACCOUNT,
          input: { secondsPerWord: 0.05 },
          media: {
            inputs: [
              { name: "transcript", uri: `s3://${BUCKET}/${key}`, sha256: sha256(text), size: text.length },
            ],
            outputs: [{ name: "speech.wav" }],
          },
        }) as never,
      );
      const job = await waitForPhase(api, ns, "late-news", "Completed", 50_000);
      // The development server's own job id: the controller submitted to it, not to the provider.
      expect(job.status?.providerJobId).toMatch(/^test-/);
      const words = text.split(/\s+/).length;
      const [speech] = job.status!.outputs!;
      expect(speech).toMatchObject({
        name: "speech.wav",
        key: `${ns}/${job.metadata.uid}/1/speech.wav`,
        size: 44 + words * 800 * 2,
      });
      // The digest the kit reported is the stored object's, as the controller checked before Completed.
      expect(await store.client.sha256(speech!.key)).toBe(speech!.sha256);
      expect(condition(job, "OutputsVerified")).toMatchObject({ status: "True", reason: "Verified" });
      expect(job.status?.output).toMatchObject({ words, seconds: words * 0.05 });
      expectNoUrl(JSON.stringify(job));

      const ep = await api.get<GpuEndpoint>("gpuendpoints", ns, "tts");
      expect(ep?.status).toMatchObject({ endpointId: "tts", resolvedBy: "baseUrl" });
      expect(condition(ep as never, "Ready")).toMatchObject({ status: "True", reason: "SelfHosted" });
    });

    it("refuses a baseUrl that is not a plain http(s) URL, and one without spec.maxInFlight", async () => {
      const create = (name: string, spec: Record<string, unknown>) =>
        api.create("gpuendpoints", stack.ns, gpuEndpoint(name, { workload: "render", ...spec }) as never);
      for (const baseUrl of [
        "file:///etc/passwd",
        "http://127.0.0.1:1/?token=x",
        "http://user:pw@127.0.0.1:1",
      ])
        await expect(create("bad-url", { baseUrl, maxInFlight: 1 }), baseUrl).rejects.toMatchObject({
          code: 422,
        });
      await expect(create("no-window", { baseUrl: workerUrl })).rejects.toMatchObject({
        code: 422,
        body: expect.stringContaining("spec.maxInFlight is required with spec.baseUrl"),
      });
      expect(await api.get<GpuEndpoint>("gpuendpoints", stack.ns, "bad-url")).toBeUndefined();
    });
  });

  it("wrote no presigned URL to the worker's log", () => {
    // Every case above ran; the failures were logged by runpod-python in full (type, message, traceback).
    expect(workerLog).toContain("Captured Handler Exception");
    expectNoUrl(workerLog);
  });
});

const KIT_CASES = "test/sdk/test_worker_kit.py";
const PYTEST = ["-m", "pytest", "-p", "no:cacheprovider", KIT_CASES];

/** The kit's pytest cases, collected without running them. */
function kitCases(): string[] {
  if (!installed) return [];
  const listed = execFileSync(PYTHON, [...PYTEST, "--collect-only", "-q"], {
    encoding: "utf8",
    env: { PATH: process.env.PATH },
  });
  return listed
    .split("\n")
    .filter((l) => l.startsWith(`${KIT_CASES}::`))
    .map((l) => l.slice(KIT_CASES.length + 2));
}

const cases = kitCases();

describe.runIf(installed)("the worker kit's own cases (test_worker_kit.py)", () => {
  let outcomes = new Map<string, string>();
  let pytestOutput = "";
  beforeAll(async () => {
    const child = spawn(PYTHON, [...PYTEST, "-q", "-rA"], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.on("data", (c: Buffer) => (pytestOutput += c.toString()));
    child.stderr.on("data", (c: Buffer) => (pytestOutput += c.toString()));
    await new Promise((resolve, reject) => child.on("error", reject).on("close", resolve));
    // -rA ends with one line per case: "PASSED test/sdk/test_worker_kit.py::test_x".
    outcomes = new Map(
      [...pytestOutput.matchAll(/^(PASSED|FAILED|ERROR|SKIPPED)\S* \S+::(\w+)/gm)].map((m) => [m[2]!, m[1]!]),
    );
  }, 120_000);

  for (const name of cases) {
    it(name.replace(/^test_/, "").replace(/_/g, " "), () => {
      expect(outcomes.get(name), pytestOutput).toBe("PASSED");
    });
  }
});

describe.skipIf(installed)("the worker kit", () => {
  it("is installed with RunPod's Python SDK", () => {
    expect(installed, "RunPod's Python SDK or the worker kit is not installed: run `make sdk-venv`").toBe(
      true,
    );
  });
});
