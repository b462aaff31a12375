// Deleting a MediaJob cancels its job at the provider, but never hangs on a provider that fails:
// the cancel is tried for a bounded time, and an annotation skips it altogether.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { SKIP_CANCEL_ANNOTATION } from "../../src/mediajob/job.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { controllerStackForTests, mediaJob, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const stack = controllerStackForTests(kc, {
  name: "deletion",
  env: { DELETE_CANCEL_TIMEOUT_SECONDS: "3" },
  endpoints: ["asr"],
});

const gone = (name: string) =>
  eventually(async () => (await api.get<MediaJob>("mediajobs", stack.ns, name)) === undefined, {
    timeoutMs: 20_000,
    message: `MediaJob ${name} to be deleted`,
  });

describe("deleting a running job", () => {
  it("lets go after a bounded time when the provider keeps failing the cancel", async () => {
    stack.sim.holdJob("dead-1");
    await api.create("mediajobs", stack.ns, mediaJob("dead", { workload: "asr", id: "dead-1" }) as never);
    await waitForPhase(api, stack.ns, "dead", "Processing");
    await eventually(
      async () => (await api.get<MediaJob>("mediajobs", stack.ns, "dead"))?.status?.providerJobId,
    );
    stack.sim.setFaults({ serverErrors: 1 });
    try {
      await api.delete("mediajobs", stack.ns, "dead");
      await gone("dead");
    } finally {
      stack.sim.setFaults({});
    }
    expect(stack.sim.getJob("dead-1")?.status).toBe("IN_PROGRESS"); // never cancelled: the provider failed
    const reasons = (await eventsOf(kc, stack.ns, "dead")).map((e) => e.reason);
    expect(reasons).toContain("CancelAbandoned");
    stack.sim.releaseJob("dead-1");
  });

  it(`skips the cancel when annotated ${SKIP_CANCEL_ANNOTATION}=true`, async () => {
    stack.sim.holdJob("keep-1");
    await api.create("mediajobs", stack.ns, {
      ...mediaJob("keep", { workload: "asr", id: "keep-1" }),
      metadata: { name: "keep", annotations: { [SKIP_CANCEL_ANNOTATION]: "true" } },
    } as never);
    await waitForPhase(api, stack.ns, "keep", "Processing");
    await eventually(
      async () => (await api.get<MediaJob>("mediajobs", stack.ns, "keep"))?.status?.providerJobId,
    );
    await api.delete("mediajobs", stack.ns, "keep");
    await gone("keep");
    expect(stack.sim.getJob("keep-1")?.status).toBe("IN_PROGRESS");
    stack.sim.releaseJob("keep-1");
  });

  it("cancels at the provider when it answers", async () => {
    stack.sim.holdJob("live-1");
    await api.create("mediajobs", stack.ns, mediaJob("live", { workload: "asr", id: "live-1" }) as never);
    await waitForPhase(api, stack.ns, "live", "Processing");
    await eventually(
      async () => (await api.get<MediaJob>("mediajobs", stack.ns, "live"))?.status?.providerJobId,
    );
    await api.delete("mediajobs", stack.ns, "live");
    await gone("live");
    expect(stack.sim.getJob("live-1")?.status).toBe("CANCELLED");
  });
});
