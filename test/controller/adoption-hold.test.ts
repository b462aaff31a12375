// A pipeline step whose /run answer was lost completes from its callback alone: nothing but the
// callback ties the provider job it names to this MediaJob, and whoever holds the callback URL
// chooses that job. Such a result is marked AdoptedByCallback and its next step is not created
// until an operator vouches for it with `kubectl media accept` (or the /run answer confirms it).
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { nextStepName } from "../../src/mediajob/pipeline.js";
import { kubectlMedia } from "../support/cli.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { controllerStackForTests, mediaJob, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const s = controllerStackForTests(kc, { name: "adoption-hold", sidecar: true, endpoints: ["asr", "tts"] });

describe("a result adopted from a callback", () => {
  it("holds its next pipeline step until an operator accepts it", async () => {
    const { ns, sim } = s;
    sim.setFaults({ lostRunAnswers: 1 });
    await api.create(
      "mediajobs",
      ns,
      mediaJob("steer", { workload: "asr", input: { audio: "a.wav" }, then: [{ workload: "tts" }] }) as never,
    );
    const done = await waitForPhase(api, ns, "steer", "Completed", 60_000);
    sim.setFaults({});
    expect(sim.stats().lostRunAnswers).toBeGreaterThan(0);
    expect(done.status?.conditions?.find((c) => c.type === "Submitted")?.reason).toBe("AdoptedByCallback");
    const warned = await eventually(async () =>
      (await eventsOf(kc, ns, "steer")).find((e) => e.reason === "AdoptedByCallback" && e.type === "Warning"),
    );
    expect(warned.message).toContain("kubectl media accept steer");
    // Several reconcile ticks (RESYNC_INTERVAL_SECONDS=1) later, still no next step.
    await new Promise((r) => setTimeout(r, 3_000));
    const held = await api.get<MediaJob>("mediajobs", ns, "steer");
    expect(held?.status?.nextJob).toBeUndefined();
    expect(await api.get("mediajobs", ns, nextStepName(held!))).toBeUndefined();

    // Refused for a job that needs no acceptance.
    expect((await kubectlMedia(["accept", "no-such-job", "-n", ns])).code).toBe(1);
    const res = await kubectlMedia(["accept", "steer", "-n", ns]);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain(`accepted: provider job ${done.status!.providerJobId}`);
    const next = await eventually(
      async () => (await api.get<MediaJob>("mediajobs", ns, "steer"))?.status?.nextJob,
    );
    expect(next).toBe(nextStepName(held!));
    expect(await api.get("mediajobs", ns, next)).toBeDefined();
    // Accepting twice is refused: there is nothing left to accept.
    expect((await kubectlMedia(["accept", "steer", "-n", ns])).code).toBe(1);
  }, 120_000);
});
