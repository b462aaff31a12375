// A fast job's callback can reach the sidecar before the controller has written that it submitted
// the job: the controller's status write then loses a conflict to the sidecar's. These tests force
// that order on every submission (the provider client answers the controller only once the sidecar
// has applied the callback) and check that the submission is still recorded and the retry policy
// still holds: no job without submittedAt, attempts or endpointId, no extra run of paid work. The
// provider ignores client ids (RunPod), so the sidecar adopts the provider's id from the callback.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { GpuProviderClient, type SubmitRequest } from "../../src/provider/index.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import {
  condition,
  controllerStackForTests,
  mediaJob,
  simEndpointId,
  waitForCompletedAndRecorded,
  waitForPhase,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);

/** The job's status as the sidecar leaves it after the callback for submission `id`. */
const callbackApplied = (job: MediaJob | undefined, id: string): boolean => {
  const s = job?.status;
  if (!s) return false;
  if (s.phase === "Completed" || s.phase === "Failed" || s.phase === "Cancelled") return true;
  // A FAILED callback with attempts left sends the job back to Pending with one more failure.
  const failuresAfter = id.includes("-retry-") ? Number(id.split("-retry-")[1]) + 1 : 1;
  return s.phase === "Pending" && (s.failures ?? 0) >= failuresAfter;
};

/** A provider client that answers a submission only after the sidecar has applied its callback. */
class CallbackFirstClient extends GpuProviderClient {
  override async submit(endpointId: string, req: SubmitRequest) {
    const res = await super.submit(endpointId, req);
    // The id sent is `<scope>.<jobId>[-retry-<n>]` (providerRequestId); the job ids here are the names.
    const name = req.id.slice(req.id.indexOf(".") + 1).split("-retry-")[0]!;
    await eventually(
      async () => callbackApplied(await api.get<MediaJob>("mediajobs", stack.ns, name), req.id),
      { message: `the callback for ${req.id} was never applied` },
    );
    return res;
  }
}

const stack = controllerStackForTests(kc, {
  name: "callback-race",
  sim: { endpoints: [{ name: "media-asr-test", workload: "asr", workersMax: 3 }] },
  env: { JOB_TIMEOUT_SECONDS: "600" },
  sidecar: true,
  endpoints: ["asr"],
  manager: (env, simulator) => ({
    provider: new CallbackFirstClient({
      apiUrl: simulator.url,
      apiKey: env.GPU_PROVIDER_API_KEY!,
      timeoutMs: 5_000,
      retryBudgetMs: 5_000,
    }),
  }),
});

const finalizerGone = (name: string) =>
  eventually(async () => {
    const j = await api.get<MediaJob>("mediajobs", stack.ns, name);
    return !(j?.metadata.finalizers ?? []).length && j;
  });

describe("a callback that beats the controller's record of the submission", () => {
  it("COMPLETED: the job keeps the callback's output and still says when, where and as which attempt it ran", async () => {
    await api.create(
      "mediajobs",
      stack.ns,
      mediaJob("fast", { workload: "asr", id: "fast", input: { audio: "a.wav" } }) as never,
    );
    const job = await waitForCompletedAndRecorded(api, stack.ns, "fast");
    const atProvider = stack.sim.getJob("fast")!;
    expect(job.status).toMatchObject({
      phase: "Completed",
      jobId: "fast",
      providerJobId: atProvider.id,
      attempts: 1,
      endpointId: simEndpointId(stack.sim, "media-asr-test"),
    });
    expect(job.status?.output).toEqual(atProvider.output);
    expect(Date.parse(job.status!.submittedAt!)).toBeLessThanOrEqual(Date.parse(job.status!.completedAt!));
    expect(condition(job, "Submitted")).toMatchObject({ status: "True" });
    expect(condition(job, "Succeeded")).toMatchObject({ status: "True", reason: "Completed" });
    expect(stack.sim.executions("fast")).toBe(1);
    await finalizerGone("fast");
  });

  it("FAILED with retries allowed: exactly maxAttempts runs, then Failed with every attempt counted", async () => {
    stack.sim.setFaults({ failJob: 1 });
    try {
      await api.create(
        "mediajobs",
        stack.ns,
        mediaJob("flaky", {
          workload: "asr",
          id: "flaky",
          maxAttempts: 2,
          input: { audio: "b.wav" },
        }) as never,
      );
      const job = await waitForPhase(api, stack.ns, "flaky", "Failed");
      // The record of the last submission may land just after the sidecar's Failed.
      const settled = await eventually(async () => {
        const j = await api.get<MediaJob>("mediajobs", stack.ns, "flaky");
        return j?.status?.attempts === 2 ? j : undefined;
      });
      expect(job.status?.failures).toBe(2);
      expect(settled.status).toMatchObject({ phase: "Failed", failures: 2, attempts: 2 });
      // One run per allowed attempt, as the provider counts them (per our job id).
      expect(stack.sim.executions("flaky")).toBe(2);
      await finalizerGone("flaky");
    } finally {
      stack.sim.setFaults({});
    }
  });
});
