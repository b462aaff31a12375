// The stage cache, whole: the real control plane, the controller, the simulator over real HTTP (its
// workers GET inputs and PUT outputs through presigned URLs) and a real S3 server. A three-step
// pipeline whose last step fails is run again: the re-run submits only the failed stage, the
// earlier ones complete from the cache (CacheHit, nothing billed); a job with spec.cache: Never
// always runs; the cache's outputs outlive the jobs that made them through the sweep while their
// entry lives.
import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { openStore, type Store } from "../../src/storage/index.js";
import { eventually, testKubeConfig } from "../support/kube.js";
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
const BUCKET = "media-cache";
let server: S3Server;
let store: Store;
let stack: ControllerStack;
/** The S3 server started again on the same directory, port and keys (the store-down test). */
let respawned: ChildProcess | undefined;
const audio = Buffer.from("RIFF....WAVE the episode's audio, for the cache");
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

beforeAll(async () => {
  server = await startS3Server();
  const env = storeEnv(server, BUCKET);
  store = (await openStore(env))!;
  await store.client.createBucket();
  stack = await startControllerStack(kc, {
    name: "stage-cache",
    sidecar: true,
    endpoints: ["asr", "tts", "render"],
    env: {
      ...(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined)) as Record<
        string,
        string
      >),
      STORAGE_SWEEP_INTERVAL_SECONDS: "1",
      STORAGE_ORPHAN_MIN_AGE_SECONDS: "0",
    },
  });
  await store.client.put(`${stack.ns}/episodes/42.wav`, audio);
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  store?.client.close();
  respawned?.kill("SIGKILL");
  await server?.stop();
});

/** The three-step pipeline; `failRender`: its last step's worker fails. */
function pipeline(name: string, o: { failRender?: boolean; cache?: "Never" } = {}) {
  return mediaJob(name, {
    workload: "asr",
    input: { language: "en" },
    maxAttempts: 1,
    ...(o.cache && { cache: o.cache }),
    media: {
      inputs: [
        {
          name: "audio.wav",
          uri: `s3://${BUCKET}/${stack.ns}/episodes/42.wav`,
          sha256: sha256(audio),
          size: audio.length,
        },
      ],
      outputs: [{ name: "transcript.json" }],
    },
    then: [
      {
        workload: "tts",
        input: { voice: "en-1" },
        maxAttempts: 1,
        media: { outputs: [{ name: "speech.wav" }] },
      },
      {
        workload: "render",
        input: { format: "mp4", ...(o.failRender && { simulate: { fail: true } }) },
        maxAttempts: 1,
        media: { outputs: [{ name: "episode.mp4" }] },
      },
    ],
  }) as never;
}

/** The provider's own count of /run calls (a finished job is forgotten after its retention). */
const runs = () => stack.sim.stats().submissions - stack.sim.stats().duplicateSubmissions;
const entries = async () =>
  (await store.client.list(undefined, `${stack.ns}/_cache/`)).objects.map((o) => o.key);

describe("the stage cache", () => {
  it("runs only the failed stage again: the earlier ones complete from the cache, not billed", async () => {
    await api.create("mediajobs", stack.ns, pipeline("first", { failRender: true }));
    const firstSteps = ["first", "first-1-tts"];
    for (const n of firstSteps) await waitForPhase(api, stack.ns, n, "Completed", 60_000);
    await waitForPhase(api, stack.ns, "first-2-render", "Failed", 60_000);
    expect(runs()).toBe(3);
    // Each stage that completed left an entry; the failed one none.
    await eventually(async () => (await entries()).length === 2 || undefined, { timeoutMs: 30_000 });

    await api.create("mediajobs", stack.ns, pipeline("again"));
    const render = await waitForPhase(api, stack.ns, "again-2-render", "Completed", 60_000);
    expect(runs()).toBe(4); // the render alone
    expect(render.status?.outputs?.map((o) => o.name)).toEqual(["episode.mp4"]);
    for (const [n, from] of [
      ["again", "first"],
      ["again-1-tts", "first-1-tts"],
    ] as const) {
      const hit = (await api.get<MediaJob>("mediajobs", stack.ns, n))!;
      const original = (await api.get<MediaJob>("mediajobs", stack.ns, from))!;
      expect(condition(hit, "Succeeded")).toMatchObject({ status: "True", reason: "CacheHit" });
      expect(hit.status?.reason).toBe("CacheHit");
      // The same objects, with their digests; no provider job, no usage.
      expect(hit.status?.outputs).toEqual(original.status?.outputs);
      expect(hit.status?.providerJobId).toBeUndefined();
      expect(hit.status?.usage).toBeUndefined();
      for (const o of hit.status!.outputs!) expect(await store.client.sha256(o.key)).toBe(o.sha256);
    }
  }, 180_000);

  it("always runs a job with spec.cache: Never", async () => {
    const before = runs();
    await api.create("mediajobs", stack.ns, pipeline("never", { cache: "Never" }));
    const done = await waitForPhase(api, stack.ns, "never", "Completed", 60_000);
    expect(condition(done, "Succeeded")?.reason).toBe("Completed");
    expect(runs()).toBeGreaterThan(before);
  }, 120_000);

  it("keeps the outputs an entry names when their jobs are deleted and the sweep runs", async () => {
    const first = (await api.get<MediaJob>("mediajobs", stack.ns, "first"))!;
    const kept = first.status!.outputs![0]!.key;
    const failedRender = (await api.get<MediaJob>("mediajobs", stack.ns, "first-2-render"))!;
    for (const n of ["first", "first-1-tts", "first-2-render"]) await api.delete("mediajobs", stack.ns, n);
    // The sweep removes what no job and no entry keeps (the failed render's attempt)...
    const renderPrefix = `${stack.ns}/${failedRender.metadata.uid}/`;
    await eventually(
      async () => (await store.client.list(undefined, renderPrefix)).objects.length === 0 || undefined,
      { timeoutMs: 30_000 },
    );
    // ...and keeps the cached stage's, which a third run still completes from.
    expect(await store.client.head(kept)).toBeDefined();
    const before = runs();
    await api.create("mediajobs", stack.ns, pipeline("third"));
    const hit = await waitForPhase(api, stack.ns, "third", "Completed", 60_000);
    expect(hit.status?.reason).toBe("CacheHit");
    await waitForPhase(api, stack.ns, "third-2-render", "Completed", 60_000);
    expect(runs()).toBe(before); // all three stages from the cache
  }, 180_000);
  // Last: it stops the store.
  it("leaves a job Pending while the store cannot say whether its stage is cached; runs it once it can", async () => {
    const before = runs();
    process.kill(server.pid, "SIGKILL");
    await api.create("mediajobs", stack.ns, pipeline("store-down"));
    await eventually(
      async () =>
        (await api.get<MediaJob>("mediajobs", stack.ns, "store-down"))?.status?.conditions?.some(
          (c) => c.type === "Admitted" && c.status === "True",
        ) || undefined,
      { timeoutMs: 30_000 },
    );
    await new Promise((r) => setTimeout(r, 3_000));
    expect((await api.get<MediaJob>("mediajobs", stack.ns, "store-down"))?.status?.phase ?? "Pending").toBe(
      "Pending",
    );
    expect(runs()).toBe(before); // not run past a stage the cache may hold
    respawned = spawnS3Server({
      dir: server.dir,
      port: Number(new URL(server.endpoint).port),
      region: server.region,
      accessKeyId: server.accessKeyId,
      secretAccessKey: server.secretAccessKey,
    });
    const done = await waitForPhase(api, stack.ns, "store-down", "Completed", 60_000);
    expect(done.status?.reason).toBe("CacheHit");
    expect(runs()).toBe(before);
  }, 120_000);
});
