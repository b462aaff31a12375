// A status write after an accepted submission that fails with anything (here a 500 and a 429 from
// the apiserver, as API priority and fairness answers) must never lead to a second submission:
// the job is Processing since its intent was written, and the provider's id is recorded later.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi, type KubeObject, type Plural } from "../../src/k8s/api.js";
import { testKubeConfig } from "../support/kube.js";
import { controllerStackForTests, mediaJob, waitForPhase } from "../support/stack.js";

/** What the flaky client is told to fail, and how often it did (kept apart: the client is wrapped). */
const plan = { failures: [] as Array<{ code: number }>, refused: 0 };

/** The controller's Kubernetes client, whose status writes that record a provider id fail at will. */
class FlakyStatusWrites extends KubeApi {
  override async replaceStatus<T extends KubeObject>(plural: Plural, obj: T): Promise<T> {
    const status = (obj as unknown as MediaJob).status;
    const recordsProviderId = plural === "mediajobs" && status?.submission?.state === "Accepted";
    const failure = recordsProviderId ? plan.failures.shift() : undefined;
    if (failure) {
      plan.refused++;
      throw Object.assign(new Error(`HTTP ${failure.code}`), { code: failure.code, body: "" });
    }
    return super.replaceStatus(plural, obj);
  }
}

const kc = testKubeConfig();
const api = new KubeApi(kc);
const flaky = new FlakyStatusWrites(kc);
const stack = controllerStackForTests(kc, {
  name: "record-write",
  sim: { faults: { dropCallback: 1 } },
  endpoints: ["asr"],
  manager: () => ({ api: flaky }),
});

describe("a failed status write after an accepted submission", () => {
  it.each([500, 429])(
    "HTTP %i: the job is not submitted again, and its provider id is recorded later",
    async (code) => {
      plan.failures = [{ code }, { code }];
      const refusedBefore = plan.refused;
      const name = `write-${code}`;
      await api.create(
        "mediajobs",
        stack.ns,
        mediaJob(name, { workload: "asr", id: name, timeoutSeconds: 1 }) as never,
      );
      // Callbacks are dropped: the job completes from the status API, with the id recorded late.
      const job = await waitForPhase(api, stack.ns, name, "Completed", 30_000);
      expect(plan.refused - refusedBefore).toBe(2);
      expect(stack.sim.executions(name)).toBe(1);
      expect(job.status?.providerJobId).toBe(stack.sim.getJob(name)!.id);
      expect(job.status?.attempts).toBe(1);
    },
  );
});
