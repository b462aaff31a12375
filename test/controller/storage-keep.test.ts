// Outputs kept before the provider forgets them, whole: the real control plane, the controller
// with the webhooks sidecar, the simulator over real HTTP and a real S3 server. The simulator's
// workers leave their outputs at the provider (its own storage, as RunPod's rp_upload does) and
// report a URL for each instead of writing through the presigned PUT: the controller copies the
// bytes into the store under the job's own key and checks their digest, so the job ends Completed
// with its output in our store; a URL that answers 404 or bytes whose digest differs from the
// worker's report fail with their reasons; the provider's URL is never in status, Events or logs.
// The store is on 127.0.0.1, so the stack allows private addresses (STORAGE_KEEP_ALLOW_PRIVATE);
// the refusal of loopback without it is test/storage/keep.test.ts's.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { openStore, type Store } from "../../src/storage/index.js";
import { eventsOf, testKubeConfig } from "../support/kube.js";
import { startS3Server, type S3Server } from "../support/s3server.js";
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
const BUCKET = "media-keep";
const ACCOUNT = "cus_media_keep";
let server: S3Server;
let store: Store;
let stack: ControllerStack;
const logs: string[] = [];

beforeAll(async () => {
  server = await startS3Server();
  const env = storeEnv(server, BUCKET);
  store = (await openStore(env))!;
  await store.client.createBucket();
  stack = await startControllerStack(kc, {
    name: "storage-keep",
    sidecar: true,
    endpoints: ["tts"],
    accounts: [ACCOUNT],
    env: {
      ...(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined)) as Record<
        string,
        string
      >),
      STORAGE_KEEP_ALLOW_PRIVATE: "true",
    },
    manager: () => ({ log: pino({ level: "debug" }, { write: (line: string) => void logs.push(line) }) }),
  });
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  store?.client.close();
  await server?.stop();
});

const getJob = (name: string) => api.get<MediaJob>("mediajobs", stack.ns, name);

/** Everything a user can read of a job: its object and its Events, as text. */
async function visible(name: string): Promise<string> {
  return JSON.stringify([await getJob(name), await eventsOf(kc, stack.ns, name)]);
}

/** The URL the worker reported for an output, as the provider holds it. */
function hostedUrl(job: MediaJob, output: string): string {
  const sim = stack.sim.jobs().find((j) => j.id === job.status?.providerJobId);
  const io = (sim?.output as { _mediaOrchestrator?: { outputs?: Record<string, { url?: string }> } })
    ?._mediaOrchestrator?.outputs;
  return io![output]!.url!;
}

function job(name: string, hostOutputs: string, maxAttempts = 1) {
  return mediaJob(name, {
    workload: "tts",
    account: ACCOUNT,
    maxAttempts,
    input: { voice: "en-1", simulate: { hostOutputs } },
    media: { outputs: [{ name: "speech.wav" }] },
  }) as never;
}

describe("outputs a worker leaves at its provider are kept in our store", () => {
  it("copies the hosted output under the job's own key, with the worker's digest, and never shows the URL", async () => {
    const ns = stack.ns;
    await api.create("mediajobs", ns, job("hosted", "ok"));
    const done = await waitForPhase(api, ns, "hosted", "Completed", 60_000);
    const [speech] = done.status!.outputs!;
    expect(speech).toMatchObject({ name: "speech.wav", key: `${ns}/${done.metadata.uid}/1/speech.wav` });
    // What status records is what our store holds, and what the worker reported.
    const reported = (
      done.status!.output as {
        _mediaOrchestrator: { outputs: Record<string, { sha256: string; size: number }> };
      }
    )._mediaOrchestrator.outputs["speech.wav"]!;
    expect(speech!.sha256).toBe(reported.sha256);
    expect(await store.client.sha256(speech!.key)).toBe(speech!.sha256);
    expect((await store.client.head(speech!.key))?.size).toBe(reported.size);
    expect(condition(done, "OutputsVerified")).toMatchObject({ status: "True" });
    // The provider's URL (its secret query) is nowhere a user or an operator reads.
    const url = hostedUrl(done, "speech.wav");
    const secret = new URL(url).searchParams.get("X-Sim-Signature")!;
    expect(secret).toMatch(/^[0-9a-f]{32}$/);
    const text = await visible("hosted");
    expect(text).not.toContain(secret);
    expect(text).not.toContain("/hosted/");
    expect(logs.join("\n")).not.toContain(secret);
    // Once kept, the provider may forget it: our copy stays.
    stack.sim.forgetJob(done.status!.providerJobId!);
    expect(await store.client.sha256(speech!.key)).toBe(speech!.sha256);
  });

  it("a URL that answers 404 fails OutputNotKept, each attempt tried by policy", async () => {
    const ns = stack.ns;
    await api.create("mediajobs", ns, job("hosted-gone", "missing", 2));
    const failed = await waitForPhase(api, ns, "hosted-gone", "Failed", 60_000);
    expect(failed.status).toMatchObject({ reason: "OutputNotKept", attempts: 2, failures: 2 });
    expect(failed.status?.error).toMatch(/^OutputNotKept: output speech\.wav .*answered 404/);
    expect(failed.status?.outputs).toBeUndefined();
    expect(condition(failed, "OutputsVerified")).toMatchObject({ status: "False", reason: "OutputNotKept" });
    for (const attempt of [1, 2])
      expect(await store.client.head(`${ns}/${failed.metadata.uid}/${attempt}/speech.wav`)).toBeUndefined();
    expect(await visible("hosted-gone")).not.toContain("/hosted/");
  });

  it("bytes whose digest differs from the worker's report fail OutputDigestMismatch", async () => {
    const ns = stack.ns;
    await api.create("mediajobs", ns, job("hosted-wrong", "wrongDigest"));
    const failed = await waitForPhase(api, ns, "hosted-wrong", "Failed", 60_000);
    expect(failed.status).toMatchObject({ reason: "OutputDigestMismatch" });
    expect(failed.status?.outputs).toBeUndefined();
    expect(await visible("hosted-wrong")).not.toContain("/hosted/");
  });
});
