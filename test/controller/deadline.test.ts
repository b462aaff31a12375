// spec.activeDeadlineSeconds as a customer is billed for it: the job is cancelled by the controller
// at its deadline, never forgotten by the provider first (policy.ttl covers the queue and the
// whole run), and the GPU time it ran is read from the provider's status, recorded on the job and
// metered before the job ends DeadlineExceeded. The controller, the sidecar and the simulator's
// GPU and payment sides over HTTP, against the real control plane.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import { controllerStackForTests, mediaJob, meteredStackOptions, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const CUSTOMER = "cus_deadline";
const stack = controllerStackForTests(kc, meteredStackOptions("deadline", { accounts: [CUSTOMER] }));

describe("a job that reaches its deadline", () => {
  it("is cancelled by the controller at the deadline, and the time it ran is recorded and metered", async () => {
    // The job runs longer than its deadline allows.
    stack.sim.holdJob("slow-render");
    try {
      await api.create(
        "mediajobs",
        stack.ns,
        mediaJob("slow-render", {
          workload: "asr",
          id: "slow-render",
          account: CUSTOMER,
          activeDeadlineSeconds: 10,
        }) as never,
      );
      const failed = await waitForPhase(api, stack.ns, "slow-render", "Failed", 40_000);
      expect(failed.status?.error).toMatch(/^DeadlineExceeded: /);
      const providerJobId = failed.status!.providerJobId!;
      // The provider still knows the job (its ttl outlives the deadline): the controller cancelled it.
      const atProvider = stack.sim.getJob(providerJobId);
      expect(atProvider?.status).toBe("CANCELLED");
      expect(atProvider?.executionTime).toBeGreaterThan(0);
      // Its times are the attempt's usage, recorded in the same write as its end.
      expect(failed.status?.usage?.attempts).toEqual([
        expect.objectContaining({
          providerJobId,
          providerStatus: "CANCELLED",
          executionTimeMs: atProvider!.executionTime,
        }),
      ]);
      // And metered once, like any ended attempt.
      const reported = await eventually(
        async () => {
          const j = await api.get<MediaJob>("mediajobs", stack.ns, "slow-render");
          const a = j?.status?.usage?.attempts[0];
          return a?.meter === "Reported" ? a : undefined;
        },
        { timeoutMs: 30_000, message: "the deadline's attempt reported to the payment provider" },
      );
      const events = stack.sim.meterEvents().filter((e) => e.identifier === reported.identifier);
      expect(events).toHaveLength(1);
      expect([events[0]!.customer, events[0]!.value]).toEqual([CUSTOMER, reported.billedSeconds]);
    } finally {
      stack.sim.releaseJob("slow-render");
    }
  }, 60_000);
});
