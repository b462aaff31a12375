// Plans and the in-flight window together, against the real control plane and the simulator over
// HTTP: a job its plan holds back (the account's concurrency cap) neither asks for nor waits for a
// slot of the endpoint's window, so it never keeps another account's job from the free slot and
// is not counted as waiting for one.
import { beforeAll, expect, it } from "vitest";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { activeAccount } from "../support/accounts.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import { condition, controllerStackForTests, mediaJob, waitForPhase } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);

const PLANS = {
  // One job at a time, however many wait.
  price_one: { gpuSecondsPerPeriod: 1_000_000, maxConcurrentJobs: 1, maxExecutionTimeoutMs: 604_800_000 },
  price_roomy: { gpuSecondsPerPeriod: 1_000_000, maxExecutionTimeoutMs: 604_800_000 },
};

// 3,000 simulated seconds at 0.01: 30 real seconds per job, longer than the test.
const s = controllerStackForTests(kc, {
  name: "plans-fair",
  sim: { executionMs: 3_000_000, coldStartMs: 0 },
  env: { MEDIA_PLANS: JSON.stringify(PLANS) },
  endpoints: [{ workload: "asr", maxWorkers: 2, maxInFlight: 2 }],
});

beforeAll(async () => {
  await activeAccount(api, s.ns, "cus_one", { priceIds: ["price_one"] });
  await activeAccount(api, s.ns, "cus_other", { priceIds: ["price_roomy"] });
});

it("a job its plan holds back takes no slot: another account's job goes to the free one at once", async () => {
  const { ns } = s;
  const job = (name: string, acct: string) =>
    api.create("mediajobs", ns, mediaJob(name, { workload: "asr", account: acct, id: name }) as never);
  await job("one-1", "cus_one");
  await waitForPhase(api, ns, "one-1", "Processing", 30_000);
  // The window has one free slot; cus_one's next jobs may not take it (its plan runs one at a time).
  await job("one-2", "cus_one");
  await job("one-3", "cus_one");
  for (const n of ["one-2", "one-3"])
    await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", ns, n);
      return condition(j!, "Admitted")?.reason === "ConcurrencyLimitReached" || undefined;
    });
  const created = Date.now();
  await job("other-1", "cus_other");
  await waitForPhase(api, ns, "other-1", "Processing", 10_000);
  const waited = Date.now() - created;
  // one-1 still runs (30 s): the slot other-1 took was free, not given back by one-1.
  expect((await api.get<MediaJob>("mediajobs", ns, "one-1"))?.status?.phase).toBe("Processing");
  expect(waited).toBeLessThan(10_000);
  for (const n of ["one-2", "one-3"]) {
    const j = await api.get<MediaJob>("mediajobs", ns, n);
    expect(j?.status?.phase).toBe("Pending");
    expect(condition(j!, "Queued")).toBeUndefined();
  }
  // Nor are they counted as waiting for a slot (the dispatch_waiting_jobs metric, the dashboard's
  // "Jobs waiting for a slot"), and none is held for them: the window's other slot is other-1's.
  const id = (await api.get<GpuEndpoint>("gpuendpoints", ns, "asr"))!.status!.endpointId!;
  const view = s.manager.dispatcher!.view(id);
  expect(view.waiting["cus_one"] ?? 0).toBe(0);
  expect(view.inFlight).toBe(2);
}, 90_000);
