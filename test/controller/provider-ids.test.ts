// Provider job ids never cross between MediaJobs. Two tenants' namespaces (each user holding the
// chart's `edit` rules in their own, impersonated) share one provider account and endpoint, on a provider that honours client ids (the simulator's honourClientId: the
// design allows such a provider): tenant A naming B's spec.id gets a provider job of its own, never
// B's job or output. And a /run answer naming a provider job another MediaJob holds is not recorded
// for the job that asked, as a callback naming one is not adopted.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { GpuProviderClient } from "../../src/provider/index.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { chartEditUser } from "../support/tenants.js";
import {
  SIM_KEY,
  condition,
  mediaJob,
  startControllerStack,
  startTestSimulator,
  waitForPhase,
  type ControllerStack,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);

/** The /run answer for a job whose name is here: the provider job id given instead of the real one. */
const answerInstead = new Map<string, string>();

/** A provider that answers /run for the jobs in `answerInstead` with another job's id. */
class MisansweringProvider extends GpuProviderClient {
  override async submit(...args: Parameters<GpuProviderClient["submit"]>) {
    const answer = await super.submit(...args);
    const webhook = args[1].webhook;
    const name = webhook === undefined ? null : new URL(webhook).searchParams.get("name");
    const instead = name === null ? undefined : answerInstead.get(name);
    return instead === undefined ? answer : { ...answer, id: instead };
  }
}

let sim: Simulator;
let alice: ControllerStack;
let bob: ControllerStack;
/** The tenants' users, each with the chart's `edit` in their namespace. */
let asAlice: KubeApi;
let asBob: KubeApi;

beforeAll(async () => {
  sim = await startTestSimulator({ faults: { honourClientId: true } });
  bob = await startControllerStack(kc, {
    name: "tenant-bob",
    simulator: sim,
    sidecar: true,
    endpoints: ["asr"],
  });
  alice = await startControllerStack(kc, {
    name: "tenant-alice",
    simulator: sim,
    sidecar: true,
    endpoints: ["asr"],
    manager: (env) => ({
      provider: new MisansweringProvider({
        apiUrl: sim.url,
        apiKey: env.GPU_PROVIDER_API_KEY ?? SIM_KEY,
        timeoutMs: 5_000,
        retryBudgetMs: 5_000,
      }),
    }),
  });
  asAlice = await chartEditUser(kc, alice.ns, "alice");
  asBob = await chartEditUser(kc, bob.ns, "bob");
}, 60_000);

afterAll(async () => {
  await alice?.stop();
  await bob?.stop();
  await sim?.close();
});

describe("provider job ids across tenants", () => {
  it("tenant A naming tenant B's spec.id gets a provider job of its own, not B's job or output", async () => {
    await asBob.create(
      "mediajobs",
      bob.ns,
      mediaJob("minutes", {
        workload: "asr",
        id: "order-1",
        input: { audio: "s3://bob-private/board-meeting.wav" },
      }) as never,
    );
    const bobs = await waitForPhase(api, bob.ns, "minutes", "Completed", 60_000);

    await asAlice.create(
      "mediajobs",
      alice.ns,
      mediaJob("copycat", {
        workload: "asr",
        id: "order-1",
        input: { audio: "s3://alice/hello.wav" },
      }) as never,
    );
    const recorded = await eventually(
      async () => (await api.get<MediaJob>("mediajobs", alice.ns, "copycat"))?.status?.providerJobId,
    );
    expect(recorded).not.toBe(bobs.status?.providerJobId);
    const alices = await waitForPhase(api, alice.ns, "copycat", "Completed", 60_000);

    // spec.id stays each job's own key.
    expect(alices.status?.jobId).toBe("order-1");
    expect(bobs.status?.jobId).toBe("order-1");
    // Two provider jobs, each the job's own, each with the output of its own input.
    expect(alices.status?.providerJobId).not.toBe(bobs.status?.providerJobId);
    expect(alices.status?.providerJobId).toMatch(/\.order-1$/);
    expect(alices.status?.output).not.toEqual(bobs.status?.output);
    expect(JSON.stringify(alices.status?.output)).not.toContain("bob-private");
    expect(sim.stats().duplicateSubmissions).toBe(0);
  }, 120_000);

  it("a /run answer naming a provider job another MediaJob holds is not recorded", async () => {
    await asAlice.create(
      "mediajobs",
      alice.ns,
      mediaJob("first", { workload: "asr", input: { audio: "s3://alice/first.wav" } }) as never,
    );
    const first = await waitForPhase(api, alice.ns, "first", "Completed", 60_000);
    const taken = first.status!.providerJobId!;

    answerInstead.set("second", taken);
    await asAlice.create(
      "mediajobs",
      alice.ns,
      mediaJob("second", { workload: "asr", input: { audio: "s3://alice/second.wav" } }) as never,
    );
    const warned = await eventually(async () =>
      (await eventsOf(kc, alice.ns, "second")).find((e) => e.reason === "ProviderJobHeldElsewhere"),
    );
    expect(warned.type).toBe("Warning");
    expect(warned.message).toContain(taken);
    expect(warned.message).not.toContain("first"); // the holder is not named to the job's readers

    // Its own provider job's callback brings its own id and result (marked: no /run answer confirms it).
    const second = await waitForPhase(api, alice.ns, "second", "Completed", 60_000);
    expect(second.status?.providerJobId).not.toBe(taken);
    expect(second.status?.output).not.toEqual(first.status?.output);
    expect(condition(second, "Submitted")?.reason).toBe("AdoptedByCallback");
    const after = await api.get<MediaJob>("mediajobs", alice.ns, "first");
    expect(after?.status?.providerJobId).toBe(taken);
    expect(after?.status?.output).toEqual(first.status?.output);
  }, 120_000);
});
