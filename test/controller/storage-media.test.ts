// Media through the object store, whole: the real control plane, the controller with the webhooks
// sidecar, the simulator over real HTTP (its workers GET their inputs and PUT their outputs
// through the presigned URLs, as docs/provider.md's worker contract says) and a real S3 server
// that verifies every signature and expiry (test/support/s3server.ts). A two-step pipeline's
// bytes flow from a tenant's input through the first step's output into the second step; a
// worker that uploads nothing ends OutputMissing after its retries; a store that cannot be read
// during the check leaves the job Processing until it can; the URLs stop working at the attempt's
// deadline; no URL is ever in a job's status or Events; kubectl media outputs signs downloads.
import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { URL_GRACE_SECONDS } from "../../src/storage/attempt-io.js";
import { openStore, type Store } from "../../src/storage/index.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { kubectlMedia } from "../support/cli.js";
import { spawnS3Server, startS3Server, type S3Server } from "../support/s3server.js";
import { storeEnv } from "../support/s3store.js";
import {
  condition,
  mediaJob,
  startControllerStack,
  waitForPhase,
  type ControllerStack,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const BUCKET = "media-flow";
const ACCOUNT = "cus_media_flow";
let server: S3Server;
let store: Store;
let stack: ControllerStack;
/** The S3 server started again on the same directory, port and keys (the store-down test). */
let respawned: ChildProcess | undefined;
const logs: string[] = [];

beforeAll(async () => {
  server = await startS3Server();
  const env = storeEnv(server, BUCKET);
  store = (await openStore(env))!;
  await store.client.createBucket();
  stack = await startControllerStack(kc, {
    name: "storage-media",
    sidecar: true,
    endpoints: ["asr", "tts"],
    accounts: [ACCOUNT],
    env: Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined)) as Record<string, string>,
    // The controller's every log line, at debug, to check that no URL is ever among them.
    manager: () => ({ log: pino({ level: "debug" }, { write: (line: string) => void logs.push(line) }) }),
  });
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  store?.client.close();
  respawned?.kill("SIGKILL");
  await server?.stop();
});

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const getJob = (name: string) => api.get<MediaJob>("mediajobs", stack.ns, name);

/** Everything a user can read of a job: its object and its Events, as text. */
async function visible(name: string): Promise<string> {
  return JSON.stringify([await getJob(name), await eventsOf(kc, stack.ns, name)]);
}

/** The attempt's `_mediaOrchestrator` as the provider received it, for the job's provider id. */
function sentIO(job: MediaJob) {
  const sim = stack.sim.jobs().find((j) => j.id === job.status?.providerJobId);
  return (sim?.input as { _mediaOrchestrator?: Record<string, unknown> } | undefined)?._mediaOrchestrator as
    | {
        expiresAt: string;
        attempt: number;
        inputs: Record<string, { url: string; sha256?: string; size?: number }>;
        outputs: Record<string, { url: string; method: string }>;
      }
    | undefined;
}

describe("media through presigned URLs per attempt", () => {
  it("a two-step pipeline reads a tenant's input, and the second step reads the first's output by name", async () => {
    const ns = stack.ns;
    const audio = Buffer.from("RIFF....WAVEfmt a tenant's episode");
    await store.client.put(`${ns}/episodes/42.wav`, audio);
    await api.create(
      "mediajobs",
      ns,
      mediaJob("episode", {
        workload: "asr",
        account: ACCOUNT,
        input: { language: "en" },
        media: {
          inputs: [
            {
              name: "audio",
              uri: `s3://${BUCKET}/${ns}/episodes/42.wav`,
              sha256: sha256(audio),
              size: audio.length,
            },
          ],
          outputs: [{ name: "transcript.json" }],
        },
        then: [{ workload: "tts", input: { voice: "en-1" }, media: { outputs: [{ name: "speech.wav" }] } }],
      }) as never,
    );
    const first = await waitForPhase(api, ns, "episode", "Completed", 40_000);
    const [transcript] = first.status!.outputs!;
    expect(transcript).toMatchObject({
      name: "transcript.json",
      key: `${ns}/${first.metadata.uid}/1/transcript.json`,
    });
    expect(transcript!.uri).toBe(`s3://${BUCKET}/${transcript!.key}`);
    // What status records is what the store holds: size and digest of the real bytes.
    const head = await store.client.head(transcript!.key);
    expect(head?.size).toBe(transcript!.size);
    expect(await store.client.sha256(transcript!.key)).toBe(transcript!.sha256);
    expect(condition(first, "OutputsVerified")).toMatchObject({ status: "True", reason: "Verified" });

    // The first step's worker got a GET for the tenant's input and a PUT for its own output only.
    const io = sentIO(first)!;
    expect(Object.keys(io.inputs)).toEqual(["audio"]);
    expect(io.inputs.audio).toMatchObject({ sha256: sha256(audio), size: audio.length });
    expect(io.inputs.audio!.url).toContain(`/${BUCKET}/${ns}/episodes/42.wav?`);
    expect(Object.keys(io.outputs)).toEqual(["transcript.json"]);
    expect(io.outputs["transcript.json"]!.url).toContain(`/${transcript!.key}?`);

    // The second step names the first's output as its input, and its worker read it (it checks
    // the digest and size it is given) before writing its own.
    const nextName = await eventually(async () => (await getJob("episode"))?.status?.nextJob);
    const second = await waitForPhase(api, ns, nextName, "Completed", 40_000);
    expect(second.spec.media?.inputs).toEqual([
      { name: "transcript.json", uri: transcript!.uri, size: transcript!.size, sha256: transcript!.sha256 },
    ]);
    const secondIO = sentIO(second)!;
    expect(secondIO.inputs["transcript.json"]).toMatchObject({
      sha256: transcript!.sha256,
      size: transcript!.size,
    });
    const [speech] = second.status!.outputs!;
    expect(speech!.key).toBe(`${ns}/${second.metadata.uid}/1/speech.wav`);
    expect(await store.client.sha256(speech!.key)).toBe(speech!.sha256);

    // The URLs are secrets: neither job's status nor Events hold one, only keys and references.
    for (const name of ["episode", nextName]) {
      const text = await visible(name);
      expect(text).not.toMatch(/X-Amz-(Signature|Credential)/i);
      expect(text).not.toContain(server.endpoint);
    }
    await eventually(async () => condition(await getJob("episode"), "PipelineSucceeded")?.status === "True");

    // Nor the controller's logs, which did tell of these jobs.
    expect(logs.join("\n")).toContain(ns);
    expect(logs.join("\n")).not.toMatch(/X-Amz-(Signature|Credential)/i);

    // kubectl media outputs: a short-lived download URL per output, signed with the store's settings.
    const env = Object.fromEntries(
      Object.entries(storeEnv(server, BUCKET)).filter(([, v]) => v !== undefined),
    );
    const listed = await kubectlMedia(["outputs", nextName, "-n", ns, "-o", "json", "--expires", "2m"], env);
    expect(listed.code).toBe(0);
    const [item] = (
      JSON.parse(listed.stdout) as { items: Array<{ name: string; url: string; expiresAt: string }> }
    ).items;
    expect(item!.name).toBe("speech.wav");
    expect(new URL(item!.url).searchParams.get("X-Amz-Expires")).toBe("120");
    const download = await fetch(item!.url);
    expect(download.status).toBe(200);
    expect(sha256(Buffer.from(await download.arrayBuffer()))).toBe(speech!.sha256);
    // Without the store's settings: the keys, and how to get URLs.
    const bare = await kubectlMedia(["outputs", nextName, "-n", ns]);
    expect(bare.code).toBe(0);
    expect(bare.stdout).toContain(speech!.key);
    expect(bare.stdout + bare.stderr).not.toContain("X-Amz-Signature");
    expect(bare.stdout + bare.stderr).toContain("STORAGE_BUCKET");
  });

  it("a worker that completes without uploading ends OutputMissing, after a retry that found nothing either", async () => {
    const ns = stack.ns;
    await api.create(
      "mediajobs",
      ns,
      mediaJob("no-upload", {
        workload: "asr",
        account: ACCOUNT,
        maxAttempts: 2,
        input: { simulate: { skipOutputs: true } },
        media: { outputs: [{ name: "transcript.json" }] },
      }) as never,
    );
    const failed = await waitForPhase(api, ns, "no-upload", "Failed", 40_000);
    expect(failed.status).toMatchObject({ reason: "OutputMissing", attempts: 2, failures: 2 });
    expect(failed.status?.error).toMatch(/^OutputMissing: .*transcript\.json/);
    expect(failed.status?.outputs).toBeUndefined();
    expect(condition(failed, "OutputsVerified")).toMatchObject({ status: "False", reason: "OutputMissing" });
    const events = await eventsOf(kc, ns, "no-upload");
    expect(events.filter((e) => e.reason === "OutputMissing").map((e) => e.message)).toEqual(
      expect.arrayContaining([expect.stringContaining("retrying")]),
    );
    // Each attempt had its own PUT key (the attempt in the key), and neither was written.
    for (const attempt of [1, 2])
      expect(
        await store.client.head(`${ns}/${failed.metadata.uid}/${attempt}/transcript.json`),
      ).toBeUndefined();
    expect(await visible("no-upload")).not.toMatch(/X-Amz-Signature/i);
    // Nothing to download: the command says why and exits 1.
    const none = await kubectlMedia(["outputs", "no-upload", "-n", ns]);
    expect(none.code).toBe(1);
    expect(none.stdout + none.stderr).toContain("no outputs recorded yet: it is Failed");
  });

  it("a store that cannot be read while the outputs are checked leaves the job Processing, then completes it", async () => {
    const ns = stack.ns;
    const created = await api.create<MediaJob>(
      "mediajobs",
      ns,
      mediaJob("store-down", {
        workload: "asr",
        account: ACCOUNT,
        suspend: true,
        media: { outputs: [{ name: "out.json" }] },
      }) as never,
    );
    const uid = created.metadata.uid!;
    // Held at the provider once its worker has uploaded, so the store can go away before the check.
    stack.sim.holdJob(uid);
    await api.mergePatch("mediajobs", ns, "store-down", { spec: { suspend: false } });
    const key = `${ns}/${uid}/1/out.json`;
    await eventually(async () => (await store.client.head(key)) !== undefined, { timeoutMs: 30_000 });
    process.kill(server.pid, "SIGKILL");
    stack.sim.releaseJob(uid);
    await eventually(
      async () => (await eventsOf(kc, ns, "store-down")).some((e) => e.reason === "OutputCheckFailed"),
      { timeoutMs: 30_000 },
    );
    const waiting = await getJob("store-down");
    expect(waiting?.status).toMatchObject({ phase: "Processing", attempts: 1 });
    expect(waiting?.status?.failures).toBeUndefined();
    expect(waiting?.status?.outputs).toBeUndefined();
    expect(condition(waiting, "OutputsVerified")).toMatchObject({
      status: "Unknown",
      reason: "ProviderCompleted",
    });
    // The same store back (its directory, port and keys): the check retried completes the job.
    respawned = spawnS3Server({
      dir: server.dir,
      port: Number(new URL(server.endpoint).port),
      region: server.region,
      accessKeyId: server.accessKeyId,
      secretAccessKey: server.secretAccessKey,
    });
    const done = await waitForPhase(api, ns, "store-down", "Completed", 60_000);
    expect(done.status?.outputs?.map((o) => o.key)).toEqual([key]);
    expect(done.status?.attempts).toBe(1);
    const warning = (await eventsOf(kc, ns, "store-down")).find((e) => e.reason === "OutputCheckFailed");
    expect(warning?.message).toContain(key);
    expect(warning?.message).not.toMatch(/X-Amz|Authorization/i);
  }, 120_000);

  it("an attempt's URLs stop working at its deadline plus the grace: a GET after that is refused", async () => {
    const ns = stack.ns;
    const body = Buffer.from("short-lived");
    await store.client.put(`${ns}/short.txt`, body);
    await api.create(
      "mediajobs",
      ns,
      mediaJob("deadline", {
        workload: "asr",
        account: ACCOUNT,
        activeDeadlineSeconds: 3,
        media: { inputs: [{ name: "text", uri: `s3://${BUCKET}/${ns}/short.txt` }] },
      }) as never,
    );
    const done = await waitForPhase(api, ns, "deadline", "Completed", 30_000);
    const io = sentIO(done)!;
    // The job's active deadline bounds the attempt: its URLs end 3 s after the first submission,
    // plus the grace, and no later.
    const expected = Date.parse(done.status!.startedAt!) + (3 + URL_GRACE_SECONDS) * 1000;
    expect(Date.parse(io.expiresAt)).toBe(expected);
    const url = io.inputs.text!.url;
    expect(new URL(url).searchParams.get("X-Amz-Expires")).toBe(String(3 + URL_GRACE_SECONDS));
    const before = await fetch(url);
    expect(before.status).toBe(200);
    expect(Buffer.from(await before.arrayBuffer())).toEqual(body);
    await new Promise((r) => setTimeout(r, Math.max(0, expected - Date.now()) + 2_000));
    const after = await fetch(url);
    expect(after.status).toBe(403);
    expect(await after.text()).toContain("expired");
  }, 120_000);
});
