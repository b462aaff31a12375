// make bench BENCH_ARGS="--only storage": media through the object store, measured. N three-step
// pipelines (asr -> tts -> render, each step's file stored and checked) whose render fails, then the
// same N pipelines again: what the stage cache saves (provider submissions and GPU worker-seconds,
// from the simulator's own records), what a presigned URL costs to mint, and what a completed job
// with its outputs as references weighs in the controller's cache. The controller runs in this
// process against the real control plane, the simulator over HTTP and a real S3 server.
import { createHash } from "node:crypto";
import type { KubeConfig } from "@kubernetes/client-node";
import type { MediaJob } from "../src/crds/mediajob.js";
import { KubeApi } from "../src/k8s/api.js";
import { openStore } from "../src/storage/index.js";
import { planAttemptIO } from "../src/storage/attempt-io.js";
import { mintAttemptIO } from "../src/storage/mint.js";
import { startS3Server } from "../test/support/s3server.js";
import { storeEnv } from "../test/support/s3store.js";
import { mediaJob, startControllerStack } from "../test/support/stack.js";

const BUCKET = "media-bench";
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function storageBench(o: { kc: KubeConfig; pipelines: number; log: (s: string) => void }) {
  const api = new KubeApi(o.kc);
  const server = await startS3Server();
  const env = storeEnv(server, BUCKET);
  const store = (await openStore(env))!;
  await store.client.createBucket();
  const stack = await startControllerStack(o.kc, {
    name: "bench-storage",
    sidecar: true,
    endpoints: [
      { workload: "asr", maxWorkers: 10 },
      { workload: "tts", maxWorkers: 10 },
      { workload: "render", maxWorkers: 10 },
    ],
    sim: { executionMs: 2_000 },
    env: {
      ...(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined)) as Record<
        string,
        string
      >),
      MAX_CONCURRENT_RECONCILES: "8",
    },
  });
  try {
    const audio = Buffer.alloc(64 * 1024, 7);
    await store.client.put(`${stack.ns}/episodes/in.wav`, audio);
    // Each pipeline an episode of its own (its input differs), so pipelines never share a stage.
    const pipeline = (name: string, episode: number, failRender: boolean) =>
      mediaJob(name, {
        workload: "asr",
        input: { language: "en", episode },
        maxAttempts: 1,
        media: {
          inputs: [
            {
              name: "audio.wav",
              uri: `s3://${BUCKET}/${stack.ns}/episodes/in.wav`,
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
            input: { format: "mp4", ...(failRender && { simulate: { fail: true } }) },
            maxAttempts: 1,
            media: { outputs: [{ name: "episode.mp4" }] },
          },
        ],
      }) as never;
    const ended = (j: MediaJob) => ["Completed", "Failed", "Cancelled"].includes(j.status?.phase ?? "");
    const billedWorkerSeconds = () => stack.sim.workerLedger().reduce((n, r) => n + r.billedSeconds, 0);

    /** N pipelines, created at once; waits until each one's last step ended. */
    async function run(prefix: string, failRender: boolean) {
      const runsBefore = stack.sim.jobs().length;
      const executionBefore = stack.sim.jobs().reduce((n, j) => n + (j.executionTime ?? 0), 0);
      const started = Date.now();
      for (let i = 0; i < o.pipelines; i++)
        await api.create("mediajobs", stack.ns, pipeline(`${prefix}-${i}`, i, failRender));
      const last = (i: number) => `${prefix}-${i}-2-render`;
      for (;;) {
        const { items } = await api.list<MediaJob>("mediajobs", stack.ns);
        const byName = new Map(items.map((j) => [j.metadata.name, j]));
        const done = Array.from({ length: o.pipelines }, (_, i) => byName.get(last(i))).filter(
          (j) => j && ended(j),
        );
        if (done.length === o.pipelines) {
          const steps = items.filter((j) => j.metadata.name.startsWith(`${prefix}-`));
          return {
            seconds: Math.round((Date.now() - started) / 100) / 10,
            providerSubmissions: stack.sim.jobs().length - runsBefore,
            providerExecutionSeconds:
              Math.round(
                (stack.sim.jobs().reduce((n, j) => n + (j.executionTime ?? 0), 0) - executionBefore) / 100,
              ) / 10,
            cacheHits: steps.filter((j) => j.status?.reason === "CacheHit").length,
            completedSteps: steps.filter((j) => j.status?.phase === "Completed").length,
            failedSteps: steps.filter((j) => j.status?.phase === "Failed").length,
            meanCompletedJobBytes: Math.round(
              steps
                .filter((j) => j.status?.phase === "Completed")
                .reduce((n, j) => n + JSON.stringify(j).length, 0) /
                Math.max(1, steps.filter((j) => j.status?.phase === "Completed").length),
            ),
          };
        }
        if (Date.now() - started > 30 * 60_000)
          throw new Error(`storage bench: ${prefix} did not end in 30 min`);
        await sleep(1_000);
      }
    }

    o.log(`  storage: ${o.pipelines} three-step pipelines, the render failing...`);
    const workerSecondsBefore = billedWorkerSeconds();
    const first = await run("first", true);
    const firstWorkerSeconds = billedWorkerSeconds() - workerSecondsBefore;
    o.log(`    ${JSON.stringify(first)}`);
    o.log(`  storage: the same pipelines again (the render fixed)...`);
    const rerunBefore = billedWorkerSeconds();
    const rerun = await run("again", false);
    // The workers' idle tails end after the last job: wait for them before reading the bill.
    await sleep(2_000);
    const rerunWorkerSeconds = billedWorkerSeconds() - rerunBefore;
    o.log(`    ${JSON.stringify(rerun)}`);

    // A presigned URL's cost: one attempt's I/O (one GET, one PUT) minted many times, CPU µs per URL.
    const n = 2_000;
    const plan = planAttemptIO({
      scope: { namespace: stack.ns, jobUid: "0f8fad5b-d9cb-469f-a165-70867728950e", attempt: 1 },
      bucket: BUCKET,
      inputs: { "audio.wav": { uri: `s3://${BUCKET}/${stack.ns}/episodes/in.wav` } },
      outputs: ["transcript.json"],
      deadlines: {
        submittedAt: new Date(),
        executionTimeoutSeconds: 600,
        providerExpiresAt: new Date(Date.now() + 3_600_000),
      },
    });
    if (!plan.ok) throw new Error(`storage bench: no attempt plan: ${plan.reason}`);
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < n; i++) await mintAttemptIO(plan.plan, store.signer);
    const cpu = process.cpuUsage(cpu0);
    const presignCpuMicrosPerUrl = Math.round(((cpu.user + cpu.system) / (n * 2)) * 10) / 10;

    return {
      pipelines: o.pipelines,
      stepsPerPipeline: 3,
      first: { ...first, billedWorkerSeconds: firstWorkerSeconds },
      rerun: { ...rerun, billedWorkerSeconds: rerunWorkerSeconds },
      saved: {
        providerSubmissions: first.providerSubmissions - rerun.providerSubmissions,
        targetRerunSubmissions: o.pipelines,
        rerunSubmitsOnlyTheFailedStage: rerun.providerSubmissions === o.pipelines,
      },
      presignCpuMicrosPerUrl,
    };
  } finally {
    await stack.stop();
    store.client.close();
    await server.stop();
  }
}
