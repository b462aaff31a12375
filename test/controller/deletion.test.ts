// Deleting a MediaJob cancels its job at the provider, but never hangs on a provider that fails:
// the cancel is tried for a bounded time, and an annotation skips it altogether.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { SKIP_CANCEL_ANNOTATION } from "../../src/mediajob/job.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { mediaJob, startControllerStack, waitForPhase, type ControllerStack } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let sim: Simulator;
let stack: ControllerStack;

beforeAll(async () => {
  stack = await startControllerStack(kc, {
    name: "deletion",
    env: { DELETE_CANCEL_TIMEOUT_SECONDS: "3" },
    endpoints: ["asr"],
  });
  ({ ns, sim } = stack);
});

afterAll(() => stack?.stop());

const gone = (name: string) =>
  eventually(async () => (await api.get<MediaJob>("mediajobs", ns, name)) === undefined, {
    timeoutMs: 20_000,
    message: `MediaJob ${name} to be deleted`,
  });

describe("deleting a running job", () => {
  it("lets go after a bounded time when the provider keeps failing the cancel", async () => {
    sim.holdJob("dead-1");
    await api.create("mediajobs", ns, mediaJob("dead", { workload: "asr", id: "dead-1" }) as never);
    await waitForPhase(api, ns, "dead", "Processing");
    await eventually(async () => (await api.get<MediaJob>("mediajobs", ns, "dead"))?.status?.providerJobId);
    sim.setFaults({ serverErrors: 1 });
    try {
      await api.delete("mediajobs", ns, "dead");
      await gone("dead");
    } finally {
      sim.setFaults({});
    }
    expect(sim.getJob("dead-1")?.status).toBe("IN_PROGRESS"); // never cancelled: the provider failed
    const reasons = (await eventsOf(kc, ns, "dead")).map((e) => e.reason);
    expect(reasons).toContain("CancelAbandoned");
    sim.releaseJob("dead-1");
  });

  it(`skips the cancel when annotated ${SKIP_CANCEL_ANNOTATION}=true`, async () => {
    sim.holdJob("keep-1");
    await api.create("mediajobs", ns, {
      ...mediaJob("keep", { workload: "asr", id: "keep-1" }),
      metadata: { name: "keep", annotations: { [SKIP_CANCEL_ANNOTATION]: "true" } },
    } as never);
    await waitForPhase(api, ns, "keep", "Processing");
    await eventually(async () => (await api.get<MediaJob>("mediajobs", ns, "keep"))?.status?.providerJobId);
    await api.delete("mediajobs", ns, "keep");
    await gone("keep");
    expect(sim.getJob("keep-1")?.status).toBe("IN_PROGRESS");
    sim.releaseJob("keep-1");
  });

  it("cancels at the provider when it answers", async () => {
    sim.holdJob("live-1");
    await api.create("mediajobs", ns, mediaJob("live", { workload: "asr", id: "live-1" }) as never);
    await waitForPhase(api, ns, "live", "Processing");
    await eventually(async () => (await api.get<MediaJob>("mediajobs", ns, "live"))?.status?.providerJobId);
    await api.delete("mediajobs", ns, "live");
    await gone("live");
    expect(sim.getJob("live-1")?.status).toBe("CANCELLED");
  });
});
