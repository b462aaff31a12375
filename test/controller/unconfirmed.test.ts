// A submission whose /run answer was lost and whose callback never came, at a provider that ignores
// client ids (the simulator's default RunPod mode). Past its confirmation deadline nothing can tell
// whether it ran: under UNCONFIRMED_SUBMISSION_POLICY=fail (the default) the job ends Failed
// (SubmissionUnconfirmed) and the provider runs it once; under `resubmit` it is submitted again,
// counted, and may run twice. An operator's reset resubmits a job failed this way on purpose.
import { describe, expect, it } from "vitest";
import { resetJob } from "../../src/cli/jobs.js";
import type { Manager } from "../../src/controller/manager.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { controllerStackForTests, mediaJob, waitForPhase, type ControllerStack } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);

/** A stack whose jobs' deadline is their timeout (1 s) plus 2 s: short, so no test waits a minute. */
const stackForTests = (name: string, policy?: "fail" | "resubmit"): ControllerStack =>
  controllerStackForTests(kc, {
    name,
    sidecar: true,
    endpoints: ["asr", "tts"],
    env: {
      CALLBACK_CONFIRMATION_SECONDS: "2",
      ...(policy && { UNCONFIRMED_SUBMISSION_POLICY: policy }),
    },
  });

async function submissions(manager: Manager, outcome: string): Promise<number> {
  const metric = await manager.metrics.submissions.get();
  return metric.values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
}

/** Every /run accepted and its answer lost; every callback dropped: nothing can confirm the job. */
const UNCONFIRMABLE = { lostRunAnswers: 1, dropCallback: 1 };

describe("UNCONFIRMED_SUBMISSION_POLICY=fail (the default): at most once", () => {
  const s = stackForTests("unconfirmed-fail");

  it("fails the job (SubmissionUnconfirmed) after one execution, and runs it again only on an operator's reset", async () => {
    const { ns, sim, manager } = s;
    sim.setFaults(UNCONFIRMABLE);
    await api.create(
      "mediajobs",
      ns,
      mediaJob("lost", {
        workload: "asr",
        id: "lost-1",
        timeoutSeconds: 1,
        then: [{ workload: "tts" }],
      }) as never,
    );
    const failed = await waitForPhase(api, ns, "lost", "Failed", 60_000);
    expect(sim.stats().lostRunAnswers).toBe(1);
    expect(sim.droppedCallbacks()).toContain("lost-1");
    expect(sim.executions("lost-1")).toBe(1);
    expect(failed.status).toMatchObject({
      attempts: 1,
      submission: { attempt: 1, state: "Unconfirmed" },
    });
    expect(failed.status?.providerJobId).toBeUndefined();
    expect(failed.status?.unconfirmedResubmissions ?? 0).toBe(0);
    expect(failed.status?.error).toMatch(/^SubmissionUnconfirmed: /);
    expect(failed.status?.error).toContain("may have run the job once and its result never arrived");
    expect(failed.status?.error).toContain(`kubectl media reset lost -n ${ns}`);
    const conditions = failed.status?.conditions ?? [];
    expect(conditions.find((c) => c.type === "Succeeded")).toMatchObject({
      status: "False",
      reason: "SubmissionUnconfirmed",
    });
    expect(conditions.find((c) => c.type === "Submitted")).toMatchObject({
      status: "False",
      reason: "SubmissionUnconfirmed",
    });
    // A failed step fails its pipeline: no next step.
    expect(failed.status?.nextJob).toBeUndefined();
    expect((await api.list<MediaJob>("mediajobs", ns)).items.map((j) => j.metadata.name)).toEqual(["lost"]);
    expect(await submissions(manager, "unconfirmed-failed")).toBe(1);
    expect(await submissions(manager, "unconfirmed-resubmission")).toBe(0);
    const warning = await eventually(async () =>
      (await eventsOf(kc, ns, "lost")).find(
        (e) => e.reason === "SubmissionUnconfirmed" && /never arrived/.test(e.message ?? ""),
      ),
    );
    expect(warning?.type).toBe("Warning");

    // The operator resubmits it deliberately; the provider answers normally now.
    sim.setFaults({});
    const reset = await resetJob(api, ns, "lost", new Date().toISOString(), { failedUnconfirmed: true });
    expect(reset.written).toBe(true);
    const completed = await waitForPhase(api, ns, "lost", "Completed", 60_000);
    expect(sim.executions("lost-1")).toBe(2);
    expect(completed.status).toMatchObject({ attempts: 2, replay: true });
    expect(completed.status?.unconfirmedResubmissions ?? 0).toBe(0);
    expect(await submissions(manager, "unconfirmed-resubmission")).toBe(0);
  }, 120_000);
});

describe("UNCONFIRMED_SUBMISSION_POLICY=resubmit: at least once", () => {
  const s = stackForTests("unconfirmed-resubmit", "resubmit");

  it("submits the job again past each deadline, counted, so it runs again each time, until the cap", async () => {
    const { ns, sim, manager } = s;
    sim.setFaults(UNCONFIRMABLE);
    await api.create(
      "mediajobs",
      ns,
      mediaJob("again", { workload: "asr", id: "again-1", timeoutSeconds: 1 }) as never,
    );
    // Every submission runs and none can be confirmed: resubmitted MAX_REPLAYS (3) times, then Failed.
    const failed = await waitForPhase(api, ns, "again", "Failed", 90_000);
    expect(failed.status?.unconfirmedResubmissions).toBe(3);
    expect(failed.status?.attempts).toBe(4);
    expect(sim.executions("again-1")).toBe(4);
    expect(failed.status?.error).toMatch(
      /^SubmissionUnconfirmed: 4 submissions of this job were never confirmed/,
    );
    expect(await submissions(manager, "unconfirmed-resubmission")).toBe(3);
    expect(await submissions(manager, "unconfirmed-failed")).toBe(1);
    const reasons = (await eventsOf(kc, ns, "again")).map((e) => e.reason);
    expect(reasons).toContain("UnconfirmedResubmission");
    expect(reasons).toContain("SubmissionUnconfirmed");
  }, 120_000);
});
