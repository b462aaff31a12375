// At most once against the provider as it really is: the simulator in its default RunPod mode
// (client ids ignored, provider ids made up), with provider faults combined. Every job must end
// Completed and have run exactly once, as the provider counts executions (per our job id, which
// the webhook URL carries). A 5xx before acceptance leaves a job that never ran unconfirmed too, so
// these run with UNCONFIRMED_SUBMISSION_POLICY=resubmit; test/controller/unconfirmed.test.ts covers
// the default. Without the write-ahead submission protocol, 20 % of 5xx runs about one
// job in ten twice.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import { controllerStackForTests, mediaJob } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const stack = controllerStackForTests(kc, {
  name: "at-most-once",
  sidecar: true,
  endpoints: ["asr", "tts", "render"],
  env: {
    // A submission refused with a 5xx looks exactly like one accepted whose answer was lost: both
    // wait out their confirmation deadline. Short here, so the test does not wait a minute.
    CALLBACK_CONFIRMATION_SECONDS: "3",
    // Callbacks are never dropped here, so a submission still unconfirmed at its deadline was
    // never accepted (a 5xx before acceptance): this test is about every job completing exactly
    // once, so such jobs are submitted again (at least once) instead of failing as the default
    // policy does.
    UNCONFIRMED_SUBMISSION_POLICY: "resubmit",
    MAX_CONCURRENT_RECONCILES: "8",
  },
});

async function runAll(prefix: string, count: number): Promise<MediaJob[]> {
  const names = Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
  await Promise.all(
    names.map((n, i) =>
      api.create(
        "mediajobs",
        stack.ns,
        mediaJob(n, { workload: ["asr", "tts", "render"][i % 3]!, id: n, timeoutSeconds: 2 }) as never,
      ),
    ),
  );
  let unfinished: string[] = [];
  return eventually(
    async () => {
      const jobs = (await api.list<MediaJob>("mediajobs", stack.ns)).items.filter((j) =>
        j.metadata.name.startsWith(`${prefix}-`),
      );
      unfinished = jobs
        .filter((j) => j.status?.phase !== "Completed")
        .map((j) => `${j.metadata.name}: ${j.status?.phase}/${j.status?.submission?.state ?? "-"}`);
      return jobs.length === count && unfinished.length === 0 ? jobs : undefined;
    },
    {
      timeoutMs: 240_000,
      message: () => `all ${prefix} jobs Completed; not yet: ${unfinished.slice(0, 10).join(", ")}`,
    },
  );
}

describe("each job runs exactly once at a provider that ignores client ids", () => {
  it("with 20 % of provider answers failing with 5xx (half of them after the job was accepted)", async () => {
    stack.sim.setFaults({ serverErrors: 0.2 });
    try {
      const jobs = await runAll("five", 100);
      for (const j of jobs) expect(stack.sim.executions(j.status!.jobId!), j.metadata.name).toBe(1);
      expect(stack.sim.stats().serverErrors).toBeGreaterThan(0);
    } finally {
      stack.sim.setFaults({});
    }
  }, 300_000);

  it("with 5 % of /run answers lost after acceptance, adopted from their callbacks", async () => {
    stack.sim.setFaults({ lostRunAnswers: 0.05, serverErrors: 0.05 });
    try {
      const jobs = await runAll("lost", 100);
      for (const j of jobs) expect(stack.sim.executions(j.status!.jobId!), j.metadata.name).toBe(1);
      expect(stack.sim.stats().lostRunAnswers).toBeGreaterThan(0);
      // A lost answer is recovered from its callback; only submissions the provider may not have
      // taken (a 5xx) can need an unconfirmed resubmission.
      const resubmitted = jobs.reduce((n, j) => n + (j.status?.unconfirmedResubmissions ?? 0), 0);
      expect(resubmitted).toBeLessThanOrEqual(stack.sim.stats().serverErrors);
    } finally {
      stack.sim.setFaults({});
    }
  }, 300_000);
});
