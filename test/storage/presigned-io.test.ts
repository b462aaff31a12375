// Presigned I/O per attempt against a real S3-compatible server (test/support/s3server.ts, which
// verifies SigV4): the URLs minted for an attempt let a worker PUT its declared outputs and GET its
// inputs, with bytes that arrive intact; they stop working once the attempt's deadlines have passed;
// they open no other key (another attempt's, another tenant's) and no other method. The store's
// failures, logged as the controller logs errors, carry no signature, credential or URL query.
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.js";
import { planAttemptIO, type AttemptDeadlines, type AttemptIOPlan } from "../../src/storage/attempt-io.js";
import { StorageError } from "../../src/storage/client.js";
import { podCredentials } from "../../src/storage/credentials.js";
import { openStore, type Store } from "../../src/storage/index.js";
import { mintAttemptIO, withAttemptIO } from "../../src/storage/mint.js";
import { submissionIdentity, withSubmissionIdentity } from "../../src/mediajob/submission-identity.js";
import { startS3Server, type S3Server } from "../support/s3server.js";
import { storeEnv } from "../support/s3store.js";

const BUCKET = "media-io";
let server: S3Server;
let store: Store;

beforeAll(async () => {
  server = await startS3Server();
  store = (await openStore(storeEnv(server, BUCKET)))!;
  await store.client.createBucket();
}, 240_000);
afterAll(async () => {
  store?.client.close();
  await server?.stop();
});

const uid = () => `${randomBytes(4).toString("hex")}-0000-4000-8000-${randomBytes(6).toString("hex")}`;
const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

function plan(req: {
  namespace: string;
  jobUid: string;
  attempt: number;
  inputs?: Record<string, { uri: string; sha256?: string; size?: number }>;
  outputs: string[];
  deadlines?: AttemptDeadlines;
}): AttemptIOPlan {
  const res = planAttemptIO({
    scope: { namespace: req.namespace, jobUid: req.jobUid, attempt: req.attempt },
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
  return res.plan;
}

describe("presigned I/O per attempt, on a real S3 server", () => {
  it("lets a worker PUT its outputs and the next step GET them as inputs, bytes intact", async () => {
    const asr = { namespace: "studio-a", jobUid: uid(), attempt: 1 };
    const io = await mintAttemptIO(plan({ ...asr, outputs: ["transcript.json"] }), store.signer);
    const body = JSON.stringify({ text: "hello world", segments: [] });
    const put = await fetch(io.outputs["transcript.json"]!.url, { method: "PUT", body });
    expect(put.status).toBe(200);
    const key = `studio-a/${asr.jobUid}/1/transcript.json`;
    expect(await store.client.head(key)).toMatchObject({ size: Buffer.byteLength(body) });

    // The next step reads it by reference, with its digest.
    const tts = { namespace: "studio-a", jobUid: uid(), attempt: 1 };
    const next = await mintAttemptIO(
      plan({
        ...tts,
        inputs: { transcript: { uri: `s3://${BUCKET}/${key}`, sha256: sha256(body) } },
        outputs: ["speech.wav"],
      }),
      store.signer,
    );
    const get = await fetch(next.inputs.transcript!.url);
    expect(get.status).toBe(200);
    const got = Buffer.from(await get.arrayBuffer());
    expect(sha256(got)).toBe(next.inputs.transcript!.sha256);

    // Beside the submission's identity, which stays whole.
    const identity = submissionIdentity(tts.jobUid, tts.jobUid, {
      attempts: 1,
      submission: { id: "sub-12345678" },
    });
    const input = withAttemptIO(
      withSubmissionIdentity({ voice: "en-1", _mediaOrchestrator: { forged: true } }, identity),
      next,
    );
    expect(input.voice).toBe("en-1");
    expect(input._mediaOrchestrator).toEqual({ ...identity, ...next });
    expect(next.outputs["speech.wav"]).toMatchObject({ method: "PUT" });
  });

  it("URLs stop working once the attempt's deadlines have passed", async () => {
    const job = { namespace: "studio-a", jobUid: uid(), attempt: 1 };
    await store.client.put("studio-a/episodes/1.wav", Buffer.from("RIFF"));
    // Submitted 2 min ago with an active deadline that, with the grace, ends 1.5 s from now.
    const submittedAt = new Date(Date.now() - 120_000);
    const activeDeadlineAt = new Date(Date.now() - 60_000 + 1_500);
    const p = plan({
      ...job,
      inputs: { audio: { uri: `s3://${BUCKET}/studio-a/episodes/1.wav` } },
      outputs: ["out.txt"],
      deadlines: { submittedAt, activeDeadlineAt },
    });
    const io = await mintAttemptIO(p, store.signer);
    expect((await fetch(io.inputs.audio!.url)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 2_500));
    const late = await fetch(io.inputs.audio!.url);
    expect(late.status).toBe(403);
    expect(await late.text()).toContain("Request has expired");
    expect((await fetch(io.outputs["out.txt"]!.url, { method: "PUT", body: "late" })).status).toBe(403);
    expect(await store.client.head(`studio-a/${job.jobUid}/1/out.txt`)).toBeUndefined();
  });

  it("a URL opens its own key and method only: not another attempt's, not another tenant's", async () => {
    const job = { namespace: "studio-a", jobUid: uid(), attempt: 1 };
    const io = await mintAttemptIO(plan({ ...job, outputs: ["result.bin"] }), store.signer);
    const url = io.outputs["result.bin"]!.url;
    // Attempt 2's key, then another namespace's.
    const otherAttempt = url.replace(`/${job.jobUid}/1/`, `/${job.jobUid}/2/`);
    const otherTenant = url.replace("/studio-a/", "/studio-b/");
    for (const forged of [otherAttempt, otherTenant]) {
      expect(forged).not.toBe(url);
      expect((await fetch(forged, { method: "PUT", body: "x" })).status).toBe(403);
    }
    expect(await store.client.head(`studio-a/${job.jobUid}/2/result.bin`)).toBeUndefined();
    expect(await store.client.head(`studio-b/${job.jobUid}/1/result.bin`)).toBeUndefined();

    // A GET URL does not write: the input it reads stays as it was.
    await store.client.put("studio-a/episodes/2.wav", Buffer.from("original"));
    const reader = await mintAttemptIO(
      plan({
        ...job,
        attempt: 2,
        inputs: { audio: { uri: `s3://${BUCKET}/studio-a/episodes/2.wav` } },
        outputs: [],
      }),
      store.signer,
    );
    expect((await fetch(reader.inputs.audio!.url, { method: "PUT", body: "overwritten" })).status).toBe(403);
    expect(await (await fetch(reader.inputs.audio!.url)).text()).toBe("original");
  });

  it("signs with the pod's identity from the container credentials endpoint", async () => {
    const token = randomBytes(16).toString("hex");
    const dir = mkdtempSync(join(tmpdir(), "pod-identity-"));
    writeFileSync(join(dir, "token"), token);
    let calls = 0;
    const agent: Server = createServer((req, res) => {
      calls++;
      if (req.headers.authorization !== token) return res.writeHead(401).end();
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          AccessKeyId: server.accessKeyId,
          SecretAccessKey: server.secretAccessKey,
          Expiration: new Date(Date.now() + 3600_000).toISOString(),
        }),
      );
    });
    await new Promise<void>((r) => agent.listen(0, "127.0.0.1", r));
    const { port } = agent.address() as { port: number };
    const podEnv = {
      ...storeEnv(server, BUCKET),
      STORAGE_CREDENTIALS: "pod" as const,
      STORAGE_ACCESS_KEY_ID: undefined,
      STORAGE_SECRET_ACCESS_KEY: undefined,
    };
    try {
      const pod = (await openStore(
        podEnv,
        podCredentials({
          AWS_CONTAINER_CREDENTIALS_FULL_URI: `http://127.0.0.1:${port}/v1/credentials`,
          AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: join(dir, "token"),
        }),
      ))!;
      await pod.client.put("studio-a/pod/identity.txt", Buffer.from("via pod identity"));
      expect(await pod.client.head("studio-a/pod/identity.txt")).toMatchObject({ size: 16 });
      expect(calls).toBe(1); // kept until near their expiry
      pod.client.close();

      writeFileSync(join(dir, "token"), "revoked");
      const refused = (await openStore(
        podEnv,
        podCredentials({
          AWS_CONTAINER_CREDENTIALS_FULL_URI: `http://127.0.0.1:${port}/v1/credentials`,
          AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: join(dir, "token"),
        }),
      ))!;
      const err = await refused.client.head("studio-a/pod/identity.txt").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageError);
      expect(String((err as Error).cause)).toContain("answered 401");
      refused.client.close();
    } finally {
      agent.close();
    }
  });

  it("signs with the pod's IRSA identity: the web identity token exchanged at STS", async () => {
    const token = `eyJ${randomBytes(24).toString("base64url")}`;
    const dir = mkdtempSync(join(tmpdir(), "irsa-"));
    writeFileSync(join(dir, "token"), token);
    const roleArn = "arn:aws:iam::111122223333:role/media-orchestrator";
    const sts: Server = createServer((req, res) => {
      let body = "";
      req.on("data", (d: Buffer) => (body += d.toString()));
      req.on("end", () => {
        const form = new URLSearchParams(body);
        const ok =
          req.method === "POST" &&
          form.get("Action") === "AssumeRoleWithWebIdentity" &&
          form.get("RoleArn") === roleArn &&
          form.get("WebIdentityToken") === token;
        if (!ok) {
          res.writeHead(403).end("<ErrorResponse><Error><Code>AccessDenied</Code></Error></ErrorResponse>");
          return;
        }
        const expiration = new Date(Date.now() + 3600_000).toISOString();
        res.end(
          `<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>` +
            `<AccessKeyId>${server.accessKeyId}</AccessKeyId><SecretAccessKey>${server.secretAccessKey}</SecretAccessKey>` +
            `<Expiration>${expiration}</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`,
        );
      });
    });
    await new Promise<void>((r) => sts.listen(0, "127.0.0.1", r));
    const { port } = sts.address() as { port: number };
    const podEnv = {
      ...storeEnv(server, BUCKET),
      STORAGE_CREDENTIALS: "pod" as const,
      STORAGE_ACCESS_KEY_ID: undefined,
      STORAGE_SECRET_ACCESS_KEY: undefined,
    };
    const irsa = (file: string) => ({
      AWS_ROLE_ARN: roleArn,
      AWS_WEB_IDENTITY_TOKEN_FILE: file,
      AWS_ENDPOINT_URL_STS: `http://127.0.0.1:${port}/`,
    });
    try {
      const pod = (await openStore(podEnv, podCredentials(irsa(join(dir, "token")))))!;
      await pod.client.put("studio-a/pod/irsa.txt", Buffer.from("via irsa"));
      expect(await pod.client.head("studio-a/pod/irsa.txt")).toMatchObject({ size: 8 });
      pod.client.close();

      writeFileSync(join(dir, "other"), "not-the-token");
      const refused = (await openStore(podEnv, podCredentials(irsa(join(dir, "other")))))!;
      const err = await refused.client.head("studio-a/pod/irsa.txt").catch((e: unknown) => e);
      refused.client.close();
      expect(err).toBeInstanceOf(StorageError);
      expect(String((err as Error).cause)).toContain("STS answered 403 AccessDenied");
      expect(String((err as Error).cause)).not.toContain("not-the-token");
    } finally {
      sts.close();
    }
  });

  it("logs the store's failures without a signature, a credential or a URL query", async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString("utf8"));
        done();
      },
    });
    const log = createLogger("trace", "storage-log-test", sink);
    const wrongSecret = `wrong_${randomBytes(12).toString("hex")}`;
    const wrong = (await openStore({ ...storeEnv(server, BUCKET), STORAGE_SECRET_ACCESS_KEY: wrongSecret }))!;
    const refused = await wrong.client
      .put("studio-a/x/1/forged.bin", Buffer.from("x"))
      .catch((e: unknown) => e);
    wrong.client.close();
    expect(refused).toMatchObject({ status: 403, code: "SignatureDoesNotMatch" });
    log.error({ err: refused }, "storage put failed");

    // A store that is gone: the failure names the kind, not the URL.
    const gone = (await openStore({ ...storeEnv(server, BUCKET), STORAGE_ENDPOINT: "http://127.0.0.1:1" }))!;
    const unreachable = await gone.client.head("studio-a/x/1/out.bin").catch((e: unknown) => e);
    gone.client.close();
    expect(unreachable).toMatchObject({ status: 0, code: "ECONNREFUSED" });
    log.warn({ err: unreachable }, "storage head failed");

    // The URLs a worker got, and what they sign with.
    const io = await mintAttemptIO(
      plan({ namespace: "studio-a", jobUid: uid(), attempt: 1, outputs: ["o.bin"] }),
      store.signer,
    );
    const signature = new URL(io.outputs["o.bin"]!.url).searchParams.get("X-Amz-Signature")!;
    expect(signature).toMatch(/^[0-9a-f]{64}$/);

    const all = lines.join("\n");
    expect(all).toContain("SignatureDoesNotMatch");
    expect(all).toContain("ECONNREFUSED");
    for (const secret of [
      wrongSecret,
      server.secretAccessKey,
      signature,
      "X-Amz-Signature",
      "X-Amz-Credential",
      "Signature=",
      server.accessKeyId,
    ])
      expect(all).not.toContain(secret);
  });
});
