// kubectl media cancel, in process through main(), against the real control plane, a controller
// and the simulator: a running job is cancelled at the provider and ends Cancelled; the command is
// idempotent, and says so for a job that ended already.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { kubectlMedia } from "../support/cli.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { controllerStackForTests, mediaJob, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const stack = controllerStackForTests(kc, { name: "cli-cancel", endpoints: ["asr"] });

const media = (args: string[]) => kubectlMedia(args, { PATH: process.env.PATH, MEDIA_ENV: "test" });

describe("kubectl media cancel", () => {
  it("cancels a running job at the provider; again, and on a finished job, it changes nothing", async () => {
    const { ns, sim } = stack;
    sim.holdJob("cli-run-1");
    await api.create("mediajobs", ns, mediaJob("render-7", { workload: "asr", id: "cli-run-1" }) as never);
    await waitForPhase(api, ns, "render-7", "Processing");
    await eventually(() => sim.getJob("cli-run-1")?.status === "IN_PROGRESS");
    const providerId = sim.getJob("cli-run-1")!.id;

    const res = await media(["cancel", "render-7", "-n", ns]);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain(
      `mediajob.media-orchestrator.io/render-7 cancel requested (provider job ${providerId})`,
    );
    const job = await waitForPhase(api, ns, "render-7", "Cancelled");
    expect(job.spec.cancel).toBe(true);
    expect(sim.getJob("cli-run-1")?.status).toBe("CANCELLED");
    expect((await eventsOf(kc, ns, "render-7")).map((e) => e.reason)).toContain("CancelRequested");
    // The end it was asked for is a Normal Event, not a failure.
    const ended = await eventually(async () => {
      const events = await eventsOf(kc, ns, "render-7");
      return events.find((e) => e.reason === "Cancelled") ? events : undefined;
    });
    expect(ended.find((e) => e.reason === "Cancelled")).toMatchObject({ type: "Normal" });
    expect(ended.find((e) => e.reason === "Cancelled")?.message).toContain("spec.cancel is true");
    expect(ended.filter((e) => e.type === "Warning").map((e) => e.reason)).not.toContain("Failed");

    const rv = (await api.get<MediaJob>("mediajobs", ns, "render-7"))!.metadata.resourceVersion;
    const again = await media(["cancel", "render-7", "-n", ns]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("is Cancelled already: nothing to cancel");
    expect((await api.get<MediaJob>("mediajobs", ns, "render-7"))!.metadata.resourceVersion).toBe(rv);

    const missing = await media(["cancel", "ghost", "-n", ns]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('MediaJob "ghost" not found');
    sim.releaseJob("cli-run-1");
  });
});
