// The simulator's workers move real bytes through the presigned URLs of the worker contract
// (docs/provider.md): a job whose input carries `_mediaOrchestrator` URLs GETs its inputs when it
// starts and PUTs its outputs before it reports COMPLETED, against a real S3 server, and reports
// each output's digest; an expired URL, a URL for another key or an input whose digest differs
// fails the job with a message that names the object and not its URL; a worker told to skip its
// uploads completes with nothing stored (what the controller's check must catch).
import { createHash, randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { planAttemptIO, type AttemptDeadlines } from "../../src/storage/attempt-io.js";
import { openStore, type Store } from "../../src/storage/index.js";
import { mintAttemptIO, withAttemptIO, type AttemptIO } from "../../src/storage/mint.js";
import { inspectOutputs, reportedOutputs, verifyOutputs } from "../../src/storage/output-check.js";
import { startSimulator, type Simulator } from "../../tools/simulator/server.js";
import { startS3Server, type S3Server } from "../support/s3server.js";
import { storeEnv } from "../support/s3store.js";

const BUCKET = "media-sim";
let server: S3Server;
let store: Store;
let sim: Simulator | undefined;

beforeAll(async () => {
  server = await startS3Server();
  store = (await openStore(storeEnv(server, BUCKET)))!;
  await store.client.createBucket();
}, 240_000);
afterAll(async () => {
  store?.client.close();
  await server?.stop();
});
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

const uid = () => `${randomBytes(4).toString("hex")}-0000-4000-8000-${randomBytes(6).toString("hex")}`;
const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

async function urls(req: {
  jobUid: string;
  inputs?: Record<string, { uri: string; sha256?: string; size?: number }>;
  outputs: string[];
  deadlines?: AttemptDeadlines;
}): Promise<AttemptIO> {
  const res = planAttemptIO({
    scope: { namespace: "studio-a", jobUid: req.jobUid, attempt: 1 },
    bucket: BUCKET,
    inputs: req.inputs ?? {},
    outputs: req.outputs,
    deadlines: req.deadlines ?? {
      submittedAt: new Date(),
      startBy: new Date(Date.now() + 60_000),
      executionTimeoutSeconds: 300,
    },
  });
  if (!res.ok) throw new Error(res.message);
  return mintAttemptIO(res.plan, store.signer);
}

/** Runs one job on a simulated ASR endpoint and returns its final status. */
async function run(input: Record<string, unknown>, executionMs = 2_000): Promise<Record<string, unknown>> {
  sim = await startSimulator({
    timeScale: 0.01,
    coldStartMs: 100,
    executionMs,
    endpoints: [{ id: "ep", name: "media-asr-dev" }],
  });
  const headers = { authorization: "Bearer sim-key", "content-type": "application/json" };
  const sent = (await (
    await fetch(`${sim.url}/v2/ep/run`, { method: "POST", headers, body: JSON.stringify({ input }) })
  ).json()) as {
    id: string;
  };
  let status: Record<string, unknown> = {};
  await expect
    .poll(
      async () => {
        status = (await (await fetch(`${sim!.url}/v2/ep/status/${sent.id}`, { headers })).json()) as Record<
          string,
          unknown
        >;
        return status.status;
      },
      { timeout: 20_000, interval: 50 },
    )
    .toMatch(/COMPLETED|FAILED|TIMED_OUT/);
  return status;
}

describe("the simulator's workers and presigned URLs", () => {
  it("GET their inputs, PUT their outputs before COMPLETED, and report each output's digest", async () => {
    const audio = randomBytes(3000);
    await store.client.put("studio-a/episodes/7.wav", audio);
    const jobUid = uid();
    const io = await urls({
      jobUid,
      inputs: {
        audio: { uri: `s3://${BUCKET}/studio-a/episodes/7.wav`, sha256: sha256(audio), size: audio.length },
      },
      outputs: ["transcript.json", "words.bin"],
    });
    const status = await run(withAttemptIO({ language: "en" }, io));
    expect(status.status).toBe("COMPLETED");
    const reported = (
      status.output as { _mediaOrchestrator: { outputs: Record<string, { sha256: string; size: number }> } }
    )._mediaOrchestrator.outputs;
    expect(Object.keys(reported).sort()).toEqual(["transcript.json", "words.bin"]);
    for (const [name, r] of Object.entries(reported)) {
      const key = `studio-a/${jobUid}/1/${name}`;
      expect(await store.client.head(key)).toMatchObject({ size: r.size });
      const get = await fetch(await store.signer.presign("GET", key, 60, new Date()));
      expect(sha256(Buffer.from(await get.arrayBuffer()))).toBe(r.sha256);
    }
    // The transcript the worker stored is the output it returned.
    const transcript = await fetch(
      await store.signer.presign("GET", `studio-a/${jobUid}/1/transcript.json`, 60, new Date()),
    );
    const { _mediaOrchestrator: _io, ...output } = status.output as Record<string, unknown>;
    expect(await transcript.json()).toEqual(output);
    expect(JSON.stringify(status)).not.toContain("X-Amz-Signature");

    // The controller's check before Completed: every output stored as the worker reported it.
    const puts = ["transcript.json", "words.bin"].map((name) => ({
      name,
      key: `studio-a/${jobUid}/1/${name}`,
    }));
    const verdict = verifyOutputs(
      await inspectOutputs(store.client, puts, reportedOutputs(status.output)),
      reportedOutputs(status.output),
    );
    expect(verdict).toEqual({
      ok: true,
      outputs: Object.fromEntries(
        puts.map((p) => [
          p.name,
          { key: p.key, size: reported[p.name]!.size, sha256: reported[p.name]!.sha256 },
        ]),
      ),
    });
    // Bytes replaced behind the worker's back no longer match its report.
    await store.client.put(puts[1]!.key, Buffer.alloc(reported["words.bin"]!.size));
    expect(
      verifyOutputs(
        await inspectOutputs(store.client, puts, reportedOutputs(status.output)),
        reportedOutputs(status.output),
      ),
    ).toMatchObject({
      ok: false,
      reason: "OutputDigestMismatch",
    });
  });

  it("fail the job when the URLs expired before the upload, storing nothing", async () => {
    const jobUid = uid();
    // URLs that end 1.5 s from now; the job runs 3 s.
    const io = await urls({
      jobUid,
      outputs: ["speech.wav"],
      deadlines: {
        submittedAt: new Date(Date.now() - 120_000),
        activeDeadlineAt: new Date(Date.now() - 60_000 + 1_500),
      },
    });
    const status = await run(withAttemptIO({}, io), 300_000);
    expect(status.status).toBe("FAILED");
    expect(String(status.error)).toContain("output speech.wav: PUT answered 403 AccessDenied");
    expect(String(status.error)).not.toContain("X-Amz");
    expect(await store.client.head(`studio-a/${jobUid}/1/speech.wav`)).toBeUndefined();
  });

  it("fail the job on an input whose digest differs from its reference, or a URL for another key", async () => {
    await store.client.put("studio-a/episodes/8.wav", Buffer.from("actual bytes"));
    const io = await urls({
      jobUid: uid(),
      inputs: { audio: { uri: `s3://${BUCKET}/studio-a/episodes/8.wav`, sha256: sha256("other bytes") } },
      outputs: [],
    });
    const mismatch = await run(withAttemptIO({}, io));
    expect(mismatch.status).toBe("FAILED");
    expect(String(mismatch.error)).toContain("input audio: its SHA-256 differs");
    await sim?.close();

    const other = await urls({ jobUid: uid(), outputs: ["out.bin"] });
    other.outputs["out.bin"]!.url = other.outputs["out.bin"]!.url.replace("/studio-a/", "/studio-b/");
    const forged = await run(withAttemptIO({}, other));
    expect(forged.status).toBe("FAILED");
    expect(String(forged.error)).toContain("output out.bin: PUT answered 403 SignatureDoesNotMatch");
  });

  it("a worker that skips its uploads completes with nothing stored, and the output check fails it", async () => {
    const jobUid = uid();
    const io = await urls({ jobUid, outputs: ["speech.wav"] });
    const status = await run(withAttemptIO({ simulate: { skipOutputs: true } }, io));
    expect(status.status).toBe("COMPLETED");
    expect(await store.client.head(`studio-a/${jobUid}/1/speech.wav`)).toBeUndefined();
    // The controller's check catches it.
    const puts = [{ name: "speech.wav", key: `studio-a/${jobUid}/1/speech.wav` }];
    expect(
      verifyOutputs(await inspectOutputs(store.client, puts, reportedOutputs(status.output)), {}),
    ).toMatchObject({
      ok: false,
      reason: "OutputMissing",
    });
  });
});
