// The in-flight window and fair share against the real control plane and the simulator over HTTP:
// a burst of one account waits in Kubernetes (Queued) while another account's job goes at the
// next free slot; the provider never holds more of our jobs than the window; a queued job costs
// one write more than one that went at once; a 429 shrinks the window; a new leader starts from
// the cache and the provider and submits nothing twice; idempotent workers get an unconfirmed
// submission again instead of a failed job.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { Watch } from "@kubernetes/client-node";
import { beforeAll, describe, expect, it } from "vitest";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import type { Manager } from "../../src/controller/manager.js";
import { KubeApi } from "../../src/k8s/api.js";
import { SUBMISSION_IDENTITY_KEY } from "../../src/mediajob/submission-identity.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { activeAccount } from "../support/accounts.js";
import { kubectlMedia } from "../support/cli.js";
import { eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import {
  condition,
  controllerStackForTests,
  mediaJob,
  startManager,
  waitForPhase,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const run = promisify(execFile);

/** Jobs of ours the provider holds (queued or running) at once, sampled until stopped. */
function sampleInFlight(sim: Simulator) {
  let max = 0;
  const timer = setInterval(() => {
    const n = sim.jobs().filter((j) => j.status === "IN_QUEUE" || j.status === "IN_PROGRESS").length;
    max = Math.max(max, n);
  }, 20);
  return { stop: () => (clearInterval(timer), max) };
}

/** MODIFIED watch events per MediaJob name from now on: the apiserver's count of writes. */
async function countWrites(ns: string) {
  const writes = new Map<string, number>();
  const rv = (await api.list("mediajobs", ns)).resourceVersion;
  const req = await new Watch(kc).watch(
    `/apis/media-orchestrator.io/v1alpha1/namespaces/${ns}/mediajobs`,
    { resourceVersion: rv },
    (type: string, obj: { metadata?: { name?: string } }) => {
      const name = obj.metadata?.name ?? "";
      if (type === "MODIFIED") writes.set(name, (writes.get(name) ?? 0) + 1);
    },
    () => undefined,
  );
  return { writes, stop: () => req.abort() };
}

/** kubectl-media's main, in this process: its stdout (exit 0 expected). */
async function media(argv: string[]): Promise<string> {
  const { code, stdout, stderr } = await kubectlMedia(argv);
  expect(code, stderr).toBe(0);
  return stdout;
}

const allPhase = async (ns: string, names: string[], phase: string, timeoutMs = 60_000) => {
  for (const n of names) await waitForPhase(api, ns, n, phase, timeoutMs);
};

describe("a window of 2 on an endpoint of 2 workers", () => {
  // 100 simulated seconds at 0.01: a real second per job.
  const s = controllerStackForTests(kc, {
    name: "fair-share",
    sidecar: true,
    sim: { executionMs: 100_000, coldStartMs: 0 },
    endpoints: [{ workload: "asr", maxWorkers: 2, maxInFlight: 2 }],
  });
  beforeAll(async () => {
    for (const a of ["A", "B"]) await activeAccount(api, s.ns, a);
  });

  it("a burst of account A does not hold back account B's job, and waits Queued (one write more)", async () => {
    const { ns, sim } = s;
    const writes = await countWrites(ns);
    const inFlight = sampleInFlight(sim);
    const burst = Array.from({ length: 12 }, (_, i) => `burst-a-${i}`);
    await Promise.all(
      burst.map((n) =>
        api.create("mediajobs", ns, mediaJob(n, { workload: "asr", account: "A", id: n }) as never),
      ),
    );
    // The burst waits in Kubernetes, saying why: all but the two that went at once.
    const queued = await eventually(async () => {
      const jobs = await Promise.all(burst.map((n) => api.get<MediaJob>("mediajobs", ns, n)));
      const q = jobs.filter((j) => condition(j, "Queued") !== undefined);
      return q.length === burst.length - 2 ? q : undefined;
    });
    const last = queued.at(-1)!;
    expect(last.status).toMatchObject({ phase: "Pending", reason: "WindowFull" });
    expect(condition(last, "Queued")?.message).toMatch(/in-flight window of endpoint .* is full/);
    const row = await run("kubectl", [
      "--kubeconfig",
      testKubeconfigPath(),
      "-n",
      ns,
      "get",
      "mj",
      last.metadata.name,
      "--no-headers",
    ]);
    expect(row.stdout.split(/\s+/).slice(2, 4)).toEqual(["Pending", "WindowFull"]);
    // `kubectl media queue` shows the endpoint's window, what is in flight and who waits.
    const shown = JSON.parse(await media(["queue", "asr", "-n", ns, "-o", "json"])) as {
      items: Array<{ name: string; window: number; inFlight: number; waiting: Record<string, number> }>;
    };
    expect(shown.items).toEqual([
      expect.objectContaining({ name: "asr", window: 2, waiting: { A: expect.any(Number) } }),
    ]);
    expect(shown.items[0]!.inFlight).toBeLessThanOrEqual(2);
    expect(shown.items[0]!.waiting.A).toBeGreaterThan(0);

    await api.create(
      "mediajobs",
      ns,
      mediaJob("small-b", { workload: "asr", account: "B", id: "small-b" }) as never,
    );
    const b = await waitForPhase(api, ns, "small-b", "Completed", 30_000);
    // Jobs of A that reached the provider before B's: those in flight when B came, and at most
    // one more that the fair share may give A at the first freed slot.
    const bSent = Date.parse(b.status!.submittedAt!);
    const aBefore = (await Promise.all(burst.map((n) => api.get<MediaJob>("mediajobs", ns, n)))).filter(
      (j) => j?.status?.submittedAt !== undefined && Date.parse(j.status.submittedAt) < bSent,
    );
    expect(aBefore.length).toBeLessThanOrEqual(4);

    await allPhase(ns, burst, "Completed");
    expect(inFlight.stop()).toBeLessThanOrEqual(2);
    for (const n of [...burst, "small-b"]) expect(sim.executions(n)).toBe(1);

    // Writes: a queued job costs at most one more than the jobs that went at once. A job the
    // provider held in its own queue meanwhile writes that wait too (its cause, then Started=True:
    // src/mediajob/provider-wait.ts), whether it waited in Kubernetes or not: those are not the
    // window's, and are left out of both sides.
    writes.stop();
    const final = new Map(
      (await Promise.all(burst.map((n) => api.get<MediaJob>("mediajobs", ns, n)))).map((j) => [
        j!.metadata.name,
        j!,
      ]),
    );
    const providerWaitWrites = (n: string) => {
      const conditions = final.get(n)?.status?.conditions ?? [];
      const started = conditions.some((c) => c.type === "Started" && c.status === "True") ? 1 : 0;
      const named = conditions.some((c) => c.type === "Queued" && c.reason === "Started") ? 1 : 0;
      return started + named;
    };
    const own = (n: string) => (writes.writes.get(n) ?? 0) - providerWaitWrites(n);
    const queuedNames = new Set(queued.map((j) => j!.metadata.name));
    const direct = burst.filter((n) => !queuedNames.has(n)).map(own);
    const waited = [...queuedNames].map(own);
    expect(direct.length).toBeGreaterThan(0);
    expect(Math.max(...waited)).toBeLessThanOrEqual(Math.max(...direct) + 1);
  });

  it("the GpuEndpoint status shows the window and the jobs in flight", async () => {
    const ep = await eventually(async () => {
      const e = await api.get<GpuEndpoint>("gpuendpoints", s.ns, "asr");
      return e?.status?.window === 2 && e.status.inFlight === 0 ? e : undefined;
    });
    expect(ep.status).toMatchObject({ window: 2, inFlight: 0 });
  });
});

describe("backpressure and leader changes", () => {
  const s = controllerStackForTests(kc, {
    name: "fair-share-429",
    sidecar: true,
    sim: { executionMs: 30_000, coldStartMs: 0 },
    endpoints: [{ workload: "asr", maxWorkers: 3, maxInFlight: 6 }],
  });
  beforeAll(async () => {
    for (const a of ["odd", "even"]) await activeAccount(api, s.ns, a);
  });

  it("a 429 from /run shrinks the window; the jobs wait out Retry-After in Kubernetes and each runs once", async () => {
    const { ns, sim, manager } = s;
    const endpointId = (await api.get<GpuEndpoint>("gpuendpoints", ns, "asr"))!.status!.endpointId!;
    sim.setFaults({ rateLimit: { requestsPerSecond: 3 } });
    const names = Array.from({ length: 12 }, (_, i) => `limited-${i}`);
    await Promise.all(
      // The namespace is bound to two accounts: each job names one.
      names.map((n, i) =>
        api.create(
          "mediajobs",
          ns,
          mediaJob(n, { workload: "asr", id: n, account: i % 2 ? "odd" : "even" }) as never,
        ),
      ),
    );
    let smallest = Infinity;
    const watch = setInterval(() => {
      smallest = Math.min(smallest, manager.dispatcher!.view(endpointId).window);
    }, 10);
    await eventually(async () => (smallest < 6 ? true : undefined), { timeoutMs: 20_000 });
    sim.setFaults(undefined);
    await allPhase(ns, names, "Completed");
    clearInterval(watch);
    for (const n of names) expect(sim.executions(n)).toBe(1);
  });

  it("a new leader rebuilds the windows from the cache: never over the window, nothing submitted twice", async () => {
    const { ns, sim, env } = s;
    const inFlight = sampleInFlight(sim);
    const names = Array.from({ length: 16 }, (_, i) => `handover-${i}`);
    await Promise.all(
      names.map((n) =>
        api.create("mediajobs", ns, mediaJob(n, { workload: "asr", account: i2a(n), id: n }) as never),
      ),
    );
    // Some went, some wait: the leader stops here.
    await eventually(async () =>
      sim.jobs().filter((j) => names.includes(j.key)).length >= 3 ? true : undefined,
    );
    await s.manager.stop();
    const next: Manager = startManager(kc, sim, env);
    s.manager = next;
    await next.start();
    await allPhase(ns, names, "Completed");
    expect(inFlight.stop()).toBeLessThanOrEqual(6);
    for (const n of names) expect(sim.executions(n)).toBe(1);
  });
});

const i2a = (name: string): string => (Number(name.split("-").at(-1)) % 2 ? "odd" : "even");

describe("spec.idempotentWorkers", () => {
  const s = controllerStackForTests(kc, {
    name: "fair-share-idem",
    sidecar: true,
    env: { CALLBACK_CONFIRMATION_SECONDS: "2" },
    endpoints: [{ workload: "asr", idempotentWorkers: true }],
  });

  it("an unconfirmed submission is submitted again (counted), with the same dedup key, instead of failing", async () => {
    const { ns, sim } = s;
    sim.setFaults({ lostRunAnswers: 1, dropCallback: 1 });
    await api.create(
      "mediajobs",
      ns,
      mediaJob("idem", { workload: "asr", id: "idem-1", timeoutSeconds: 1 }) as never,
    );
    await eventually(async () => (sim.stats().lostRunAnswers >= 1 ? true : undefined));
    sim.setFaults(undefined);
    const done = await waitForPhase(api, ns, "idem", "Completed", 60_000);
    expect(done.status?.unconfirmedResubmissions).toBe(1);
    const identities = sim
      .jobs()
      .filter((j) => j.key === "idem-1")
      .map(
        (j) =>
          j.input[SUBMISSION_IDENTITY_KEY] as { dedupKey: string; submissionId: string; attempt: number },
      );
    expect(identities).toHaveLength(2);
    expect(identities[0]!.dedupKey).toBe(identities[1]!.dedupKey);
    expect(identities[0]!.submissionId).not.toBe(identities[1]!.submissionId);
  });
});
