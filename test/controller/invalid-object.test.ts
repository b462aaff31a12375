// An object that the apiserver accepts but the controller's schema refuses must not leave its older,
// valid copy in the cache for the controller to act on. The CRD types status counters as int64
// (as Kubernetes does), so a Go client or kubectl can store a number that JavaScript cannot hold
// exactly (2^53 and above); the controller's schema takes only safe integers. Such a MediaJob is
// evicted from the cache, counted (media_orchestrator_invalid_objects_total) and reported (an
// InvalidObject Warning Event), and nothing is done with it until a valid version arrives. Status
// writes from a stale copy are refused by their resourceVersion anyway; what the stale copy would
// still do is call the provider: an overdue job's status is asked on every tick. Those calls are
// counted per job.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Manager } from "../../src/controller/manager.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { GpuProviderClient, type ProviderJob } from "../../src/provider/index.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { eventsOf, eventually, testKubeConfig } from "../support/kube.js";
import { mediaJob, startControllerStack, waitForPhase, type ControllerStack } from "../support/stack.js";

/** The provider client the controller uses, counting status calls per provider job id. */
class CountingClient extends GpuProviderClient {
  readonly statusCalls = new Map<string, number>();
  override status(endpointId: string, jobId: string): Promise<ProviderJob> {
    this.statusCalls.set(jobId, (this.statusCalls.get(jobId) ?? 0) + 1);
    return super.status(endpointId, jobId);
  }
}

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let sim: Simulator;
let manager: Manager;
let provider: CountingClient;
let stack: ControllerStack;

beforeAll(async () => {
  stack = await startControllerStack(kc, {
    name: "invalid-object",
    sidecar: true,
    endpoints: ["asr"],
    manager: (env, simulator) => {
      provider = new CountingClient({
        apiUrl: simulator.url,
        apiKey: env.GPU_PROVIDER_API_KEY!,
        timeoutMs: 5_000,
      });
      return { provider };
    },
  });
  ({ ns, sim, manager } = stack);
});

afterAll(() => stack?.stop());

async function invalidCount(): Promise<number> {
  const metric = await manager.metrics.invalidObjects.get();
  return metric.values.find((v) => v.labels.resource === "mediajobs")?.value ?? 0;
}

/** A Processing job past its timeout, held running at the provider: polled on every tick. */
async function overdue(name: string): Promise<string> {
  sim.holdJob(`${name}-1`);
  await api.create(
    "mediajobs",
    ns,
    mediaJob(name, { workload: "asr", id: `${name}-1`, timeoutSeconds: 1 }) as never,
  );
  const job = await eventually(
    async () => {
      const j = await api.get<MediaJob>("mediajobs", ns, name);
      return j?.status?.conditions?.some((c) => c.type === "Overdue" && c.status === "True") ? j : undefined;
    },
    { timeoutMs: 30_000, message: `${name} to be overdue` },
  );
  return job.status!.providerJobId!;
}

const polls = (providerJobId: string) => provider.statusCalls.get(providerJobId) ?? 0;

/** Waits until the witness has been polled `ticks` more times: the controller kept working. */
async function ticks(witness: string, count: number): Promise<void> {
  const from = polls(witness);
  await eventually(() => polls(witness) >= from + count, {
    timeoutMs: 30_000,
    message: `${count} more polls of the witness job`,
  });
}

describe("a MediaJob that turns invalid for the controller's schema", () => {
  it("is evicted, counted and reported, not acted on while invalid, and acted on again once valid", async () => {
    const odd = await overdue("odd");
    const witness = await overdue("witness");
    expect(polls(odd)).toBeGreaterThan(0);
    expect(await invalidCount()).toBe(0);

    // 2^53: a valid int64 for the apiserver, not a safe integer for the controller.
    const invalid = await api.jsonPatchStatus<MediaJob>("mediajobs", ns, "odd", [
      { op: "replace", path: "/status/attempts", value: 2 ** 53 },
    ]);
    await eventually(async () => (await invalidCount()) >= 1, { message: "the invalid object counted" });
    expect(manager.jobs.getByKey(`${ns}/odd`)).toBeUndefined();
    const told = await eventually(async () =>
      (await eventsOf(kc, ns, "odd")).find((e) => e.reason === "InvalidObject"),
    );
    expect(told?.type).toBe("Warning");

    // A poll already under way when the object changed may still finish; after one full tick of
    // the witness, none of the invalid job may follow.
    await ticks(witness, 1);
    const before = polls(odd);
    await ticks(witness, 3);
    expect(polls(odd)).toBe(before);
    const untouched = await api.get<MediaJob>("mediajobs", ns, "odd");
    expect(untouched?.metadata.resourceVersion).toBe(invalid.metadata.resourceVersion);

    // Fixed: valid again, so the controller takes it up again, and it completes, run once.
    await api.jsonPatchStatus<MediaJob>("mediajobs", ns, "odd", [
      { op: "replace", path: "/status/attempts", value: 1 },
    ]);
    await eventually(() => polls(odd) > before, { timeoutMs: 30_000, message: "odd polled again" });
    sim.releaseJob("odd-1");
    sim.releaseJob("witness-1");
    await waitForPhase(api, ns, "odd", "Completed", 30_000);
    expect(sim.executions("odd-1")).toBe(1);
  }, 120_000);
});
