// The whole product in one place: the controller, the webhooks sidecar and the simulator over real
// HTTP against the real control plane. Completions here come from the provider's callbacks
// (timeouts are long), and the demo's scenario runs exactly as `make demo` runs it.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { applyManifests } from "../../scripts/devstack-lib.js";
import { PIPELINE, runDemoScenario } from "../../scripts/demo-scenario.js";
import { sampleAudio, sampleAudioKey, seedSampleMedia, sha256 } from "../../scripts/sample-media.js";
import { openStore, type Store } from "../../src/storage/index.js";
import { startS3Server, type S3Server } from "../support/s3server.js";
import { storeEnv } from "../support/s3store.js";
import { REPO_ROOT } from "../support/controlplane.js";
import { eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import {
  condition,
  controllerStackForTests,
  mediaJob,
  waitForCompletedAndRecorded,
  waitForPhase,
  waitForReady,
} from "../support/stack.js";
import { changeBinding } from "../../src/cli/bind.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);

// The demo's pipeline moves its media through a real S3 server, as dev-up's does. Started first:
// the stack below reads its settings when it starts.
const BUCKET = "media-e2e";
const env: Record<string, string> = { MEDIA_ENV: "dev" };
let s3: S3Server | undefined;
let store: Store | undefined;
beforeAll(async () => {
  s3 = await startS3Server();
  const settings = storeEnv(s3, BUCKET);
  for (const [k, v] of Object.entries(settings)) if (v !== undefined) env[k] = v;
  store = (await openStore(settings))!;
  await store.client.createBucket();
}, 60_000);
afterAll(async () => {
  store?.client.close();
  await s3?.stop();
});

const stack = controllerStackForTests(kc, {
  name: "e2e",
  // The demo's endpoints are named <prefix>-<workload>-dev.
  sim: {
    endpoints: ["asr", "tts", "render"].map((w) => ({
      name: `media-${w}-dev`,
      workload: w as "asr",
      workersMax: 3,
    })),
  },
  env,
  sidecar: true,
});

beforeAll(async () => {
  stack.sim.setPaymentWebhook({
    url: `${stack.sidecar!.url}/webhooks/payment_provider`,
    secret: stack.env.PAYMENT_PROVIDER_WEBHOOK_SECRET!,
  });
  await applyManifests(api, stack.ns, join(REPO_ROOT, "config/samples/gpuendpoints.yaml"));
  for (const w of ["asr", "tts", "render"]) await waitForReady(api, stack.ns, w);
});

describe("callbacks complete jobs", () => {
  it.each(["asr", "tts", "render"])(
    "runs a %s job to Completed from its callback, executed once",
    async (workload) => {
      const id = `happy-${workload}`;
      await api.create(
        "mediajobs",
        stack.ns,
        mediaJob(id, { workload, id, timeoutSeconds: 600, input: { text: `hello ${workload}` } }) as never,
      );
      const job = await waitForCompletedAndRecorded(api, stack.ns, id);
      expect(stack.sim.executions(id)).toBe(1);
      // The simulator records the delivery once the sidecar has answered, just after the write.
      await eventually(() => stack.sim.deliveries().some((d) => d.key === id && d.ok));
      // The output written is the provider's, as its status API reports it.
      expect(job.status?.output).toEqual(stack.sim.getJob(id)!.output);
      expect(job.status?.attempts).toBe(1);
    },
  );

  // Two readings of "sent twice": the copies race (the second reaches the sidecar while the first
  // is being handled, and is refused 429 for the provider to retry), or the second comes once the
  // first was answered (and changes nothing). Either way the job ends as one delivery leaves it.
  // RunPod makes 3 attempts per callback (the simulator's default); a copy has settled when one was
  // answered 2xx or all 3 were refused.
  const ATTEMPTS = 3;
  it.each([
    { reading: "at the same moment", duplicateGapMs: 0, prefix: "dupr" },
    { reading: "after the first was answered", duplicateGapMs: 300_000, prefix: "dupl" },
  ])(
    "converges on duplicated and reordered callbacks sent $reading to the state of one delivery",
    async ({ duplicateGapMs, prefix }) => {
      stack.sim.setFaults({ duplicateCallback: 1, reorderCallbacks: true, duplicateGapMs });
      try {
        const names = ["a", "b", "c"].map((x) => `${prefix}-${x}`);
        for (const n of names)
          await api.create(
            "mediajobs",
            stack.ns,
            mediaJob(n, { workload: "tts", id: n, timeoutSeconds: 600 }) as never,
          );
        for (const n of names) {
          const job = await waitForCompletedAndRecorded(api, stack.ns, n);
          expect(job.status?.attempts).toBe(1);
          expect(stack.sim.executions(n)).toBe(1);
          const of = () => stack.sim.deliveries().filter((d) => d.key === n);
          const settled = (copy: number) =>
            of().some((d) => d.copy === copy && (d.ok || d.attempt >= ATTEMPTS));
          // 3 s at the tests' time scale for the later copy.
          await eventually(() => settled(0) && settled(1), {
            timeoutMs: 20_000,
            message: () => `both copies of ${n}'s callback to settle: ${JSON.stringify(of())}`,
          });
          const answers = of().map((d) => d.httpStatus);
          // A copy is answered 2xx, or 429 while the other is in flight: never an error.
          expect(
            answers.every((a) => a === 200 || a === 429),
            JSON.stringify(of()),
          ).toBe(true);
          expect(answers).toContain(200);
          if (duplicateGapMs > 0)
            expect(
              of()
                .filter((d) => d.ok)
                .map((d) => d.copy)
                .sort(),
            ).toEqual([0, 1]);
          const again = await api.get<MediaJob>("mediajobs", stack.ns, n);
          expect(again?.status?.completedAt).toBe(job.status?.completedAt);
          expect(again?.status?.attempts).toBe(1);
        }
      } finally {
        stack.sim.setFaults({});
      }
    },
    200_000,
  );
});

describe("results of any size fit the job's status", () => {
  it("a 5,000-character error ends the job Failed, its message cut to the CRD's limit", async () => {
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("long-error", {
        workload: "asr",
        timeoutSeconds: 600,
        input: { simulate: { fail: true, tracebackChars: 5_000 } },
      }) as never,
    );
    const job = await waitForPhase(api, stack.ns, "long-error", "Failed");
    expect(job.status?.error?.length).toBeLessThanOrEqual(4096);
    expect(job.status?.error).toMatch(/^FAILED: .*… \[truncated\]$/s);
  });

  it("a 2 MiB output ends Completed with the truncation marker, and the next step starts", async () => {
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("huge-output", {
        workload: "asr",
        timeoutSeconds: 600,
        input: { simulate: { outputBytes: 2 * 1024 * 1024 } },
        then: [{ workload: "tts", timeoutSeconds: 600 }],
      }) as never,
    );
    const job = await waitForPhase(api, stack.ns, "huge-output", "Completed");
    expect(job.status?.output).toMatchObject({ truncated: true, maxBytes: 256 * 1024 });
    expect(job.status?.output?.originalBytes as number).toBeGreaterThan(2 * 1024 * 1024);
    const next = await waitForPhase(api, stack.ns, "huge-output-1-tts", "Completed");
    expect(next.spec.input).toMatchObject({ previous: { output: { truncated: true } } });
  });
});

describe("one handle on a whole pipeline", () => {
  // Asynchronous: the controller and the sidecar run in this process and must go on meanwhile.
  const kubectl = async (...args: string[]): Promise<string> =>
    (
      await promisify(execFile)("kubectl", ["--kubeconfig", testKubeconfigPath(), "-n", stack.ns, ...args], {
        encoding: "utf8",
      })
    ).stdout;
  const threeSteps = (name: string, tts: Record<string, unknown> = {}, more: Record<string, unknown> = {}) =>
    mediaJob(name, {
      ...more,
      workload: "asr",
      timeoutSeconds: 600,
      input: { audio: "s3://in.wav" },
      then: [
        { workload: "tts", timeoutSeconds: 600, input: tts },
        { workload: "render", timeoutSeconds: 600 },
      ],
    });

  it("kubectl wait --for=condition=PipelineSucceeded on the first job returns once the last step completed", async () => {
    // Waiting starts before the pipeline does, as a script would.
    await api.create("mediajobs", stack.ns, threeSteps("episode-7") as never);
    const waited = kubectl("wait", "--for=condition=PipelineSucceeded", "mj/episode-7", "--timeout=45s");
    expect(await waited).toMatch(/mediajob.media-orchestrator.io\/episode-7 condition met/);
    const last = await api.get<MediaJob>("mediajobs", stack.ns, "episode-7-2-render");
    expect(last?.status?.phase).toBe("Completed");
    // One selector for every step, the first included.
    const names = await kubectl("get", "mj", "-l", "media-orchestrator.io/pipeline=episode-7", "-o", "name");
    expect(names.trim().split("\n").sort()).toEqual(
      ["episode-7", "episode-7-1-tts", "episode-7-2-render"].map(
        (n) => `mediajob.media-orchestrator.io/${n}`,
      ),
    );
    // Succeeded keeps speaking for the first job alone.
    const first = await api.get<MediaJob>("mediajobs", stack.ns, "episode-7");
    expect(condition(first, "Succeeded")).toMatchObject({ status: "True", reason: "Completed" });
    expect(condition(first, "PipelineSucceeded")).toMatchObject({
      status: "True",
      reason: "PipelineCompleted",
    });
  });

  it("a pipeline that waits already has its handle: the first job is labelled, PipelineSucceeded Unknown", async () => {
    // Its customer has no subscription yet, and the namespace is bound to it only while the job is
    // created: the first job waits (Admitted=False), never submitted; the other jobs here bill none.
    await changeBinding(api, stack.ns, "cus_nobody", "bind");
    await api.create("mediajobs", stack.ns, threeSteps("episode-10", {}, { account: "cus_nobody" }) as never);
    await changeBinding(api, stack.ns, "cus_nobody", "unbind");
    const first = await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", stack.ns, "episode-10");
      return condition(j, "Admitted")?.status === "False" ? j : undefined;
    });
    expect(first.status?.phase).toBe("Pending");
    expect(condition(first, "PipelineSucceeded")).toMatchObject({
      status: "Unknown",
      reason: "StepsRunning",
    });
    const names = await kubectl("get", "mj", "-l", "media-orchestrator.io/pipeline=episode-10", "-o", "name");
    expect(names.trim()).toBe("mediajob.media-orchestrator.io/episode-10");
  });

  it("=False returns once a step fails, with the step and its reason", async () => {
    await api.create("mediajobs", stack.ns, threeSteps("episode-8", { simulate: { fail: true } }) as never);
    const out = await kubectl(
      "wait",
      "--for=condition=PipelineSucceeded=False",
      "mj/episode-8",
      "--timeout=45s",
    );
    expect(out).toMatch(/condition met/);
    const first = await api.get<MediaJob>("mediajobs", stack.ns, "episode-8");
    expect(condition(first, "PipelineSucceeded")).toMatchObject({
      reason: "StepFailed",
      message: expect.stringMatching(/^step 2 \(episode-8-1-tts\) ended Failed: Failed: FAILED: /),
    });
    expect(condition(first, "Succeeded")?.status).toBe("True");
    expect(await api.get("mediajobs", stack.ns, "episode-8-2-render")).toBeUndefined();
  });

  it("=False returns once an unfinished step is deleted: the pipeline cannot go on, so a wait does not hang", async () => {
    // The second step waits for a GpuEndpoint that does not exist, and is deleted meanwhile.
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("episode-9", {
        workload: "asr",
        timeoutSeconds: 600,
        input: { audio: "s3://in.wav" },
        then: [{ workload: "tts", endpointRef: "no-such-endpoint", timeoutSeconds: 600 }],
      }) as never,
    );
    await eventually(async () => {
      const step = await api.get<MediaJob>("mediajobs", stack.ns, "episode-9-1-tts");
      return condition(step, "EndpointReady")?.status === "False";
    });
    const waited = kubectl(
      "wait",
      "--for=condition=PipelineSucceeded=False",
      "mj/episode-9",
      "--timeout=30s",
    );
    await kubectl("delete", "mj", "episode-9-1-tts", "--wait=false");
    expect(await waited).toMatch(/condition met/);
    const first = await api.get<MediaJob>("mediajobs", stack.ns, "episode-9");
    expect(condition(first, "PipelineSucceeded")).toMatchObject({
      reason: "StepDeleted",
      message: expect.stringMatching(/^step 2 \(episode-9-1-tts\) was deleted while Pending/),
    });
  });
});

describe("the demo's scenario", () => {
  it("completes the pipeline after the payment event, recovers the lost callback, and the replay changes nothing", async () => {
    await seedSampleMedia(store!.client, stack.ns);
    const summary = await runDemoScenario({
      api,
      namespace: stack.ns,
      simulatorUrl: stack.sim.url,
      bucket: BUCKET,
      timeoutMs: 90_000,
    });
    expect(summary.steps.map((s) => [s.name, s.phase])).toEqual(PIPELINE.map((n) => [n, "Completed"]));
    expect(summary.recovered.map((r) => r.job)).toEqual(["episode-42"]);
    expect(summary.recovered[0]!.how).toMatch(/^RecoveredMissedCallback/);
    expect(summary.payment.firstDelivery).toBe(200);
    expect(summary.payment.replayDelivery).toBe(200);
    expect(summary.payment.accountStatus).toBe("active");
    expect(summary.payment.replayChangedNothing).toBe(true);
    for (const step of summary.steps) expect(step.attempts).toBe(1);
    // Each step's file is in the store with the digest its status records; the ASR worker read
    // the sample audio through its presigned URL (a wrong digest would have failed it).
    expect(summary.steps.map((s) => s.outputs.map((o) => o.name))).toEqual([
      ["transcript.json"],
      ["speech.wav"],
      ["episode.mp4"],
    ]);
    for (const step of summary.steps) {
      const job = await api.get<MediaJob>("mediajobs", stack.ns, step.name);
      for (const o of job!.status!.outputs!) {
        expect(await store!.client.sha256(o.key)).toBe(o.sha256);
        expect((await store!.client.head(o.key))?.size).toBe(o.size);
      }
    }
    expect(await store!.client.sha256(sampleAudioKey(stack.ns))).toBe(sha256(sampleAudio()));
  }, 120_000);
});
