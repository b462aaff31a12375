// A plan's GPU-seconds cap holds at the provider too, against the real control plane, the
// controller, the sidecar and the simulator over HTTP: when the account reaches its cap, its job
// still queued at the provider is cancelled there (it never runs) and waits in Kubernetes
// (Admitted=False, UsageLimitReached); its job a worker already runs is left to end.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { activeAccount } from "../support/accounts.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import { condition, controllerStackForTests, mediaJob, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const PLANS = { price_capped: { gpuSecondsPerPeriod: 1_000, maxExecutionTimeoutMs: 600_000 } };
const CUSTOMER = "cus_capped";

describe("an account that reaches its plan's GPU seconds", () => {
  const s = controllerStackForTests(kc, {
    name: "usage-cap",
    sidecar: true,
    sim: { coldStartMs: 0 },
    env: { MEDIA_PLANS: JSON.stringify(PLANS) },
    // One worker: the second job waits in the provider's queue behind the first.
    endpoints: [{ workload: "asr", minWorkers: 0, maxWorkers: 1, maxInFlight: 2 }],
  });

  it("has its queued job cancelled at the provider and held; its running job ends", async () => {
    const period = () => ({
      periodStart: new Date(Date.now() - 3_600_000).toISOString(),
      periodEnd: new Date(Date.now() + 3_600_000).toISOString(),
    });
    await activeAccount(api, s.ns, CUSTOMER, {
      priceIds: ["price_capped"],
      usage: { ...period(), usedSeconds: 0, reportedSeconds: 0 },
    });
    s.sim.holdJob("running-job");
    try {
      // The first job takes the one worker (held there), then the second waits in the queue.
      await api.create(
        "mediajobs",
        s.ns,
        mediaJob("running-job", { workload: "asr", id: "running-job", account: CUSTOMER }) as never,
      );
      await eventually(async () => {
        const id = (await api.get<MediaJob>("mediajobs", s.ns, "running-job"))?.status?.providerJobId;
        return id !== undefined && s.sim.getJob(id)?.status === "IN_PROGRESS";
      });
      await api.create(
        "mediajobs",
        s.ns,
        mediaJob("queued-job", { workload: "asr", id: "queued-job", account: CUSTOMER }) as never,
      );
      await eventually(async () => {
        const id = (await api.get<MediaJob>("mediajobs", s.ns, "queued-job"))?.status?.providerJobId;
        return id !== undefined && s.sim.getJob(id)?.status === "IN_QUEUE";
      });
      const queuedAt = (await api.get<MediaJob>("mediajobs", s.ns, "queued-job"))!.status!.providerJobId!;
      // The account's period usage reaches its cap (other jobs of it ended meanwhile).
      await activeAccount(api, s.ns, CUSTOMER, {
        usage: { ...period(), usedSeconds: 1_000, reportedSeconds: 1_000 },
      });
      const held = await eventually(async () => {
        const j = await api.get<MediaJob>("mediajobs", s.ns, "queued-job");
        return j?.status?.phase === "Pending" && condition(j, "Admitted")?.reason === "UsageLimitReached"
          ? j
          : undefined;
      });
      expect(condition(held, "Admitted")?.status).toBe("False");
      expect(s.sim.getJob(queuedAt)?.status).toBe("CANCELLED");
      expect(s.sim.executions("queued-job")).toBe(0);
      // The running job is left to run.
      expect((await api.get<MediaJob>("mediajobs", s.ns, "running-job"))?.status?.phase).toBe("Processing");
    } finally {
      s.sim.releaseJob("running-job");
    }
    await waitForPhase(api, s.ns, "running-job", "Completed", 30_000);
    // The held job stays held while the cap holds.
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await api.get<MediaJob>("mediajobs", s.ns, "queued-job"))?.status?.phase).toBe("Pending");
    expect(s.sim.executions("queued-job")).toBe(0);
  }, 90_000);
});
