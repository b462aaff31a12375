// The usage loop reads only the jobs that may have usage to meter or count: a burst of job events
// (each a reconcile of its key) does not walk the whole informer cache at each reconcile, which
// made a burst's cost grow with the square of the cache. The cache is walked again at each
// interval tick (a resync), so a job whose event was missed is still found.
import pino from "pino";
import { describe, expect, it, vi } from "vitest";
import { makeMediaJob, meteredStatus } from "../support/builders.js";
import type { MediaJob, UsageAttempt } from "../../src/crds/mediajob.js";
import { keysWoken } from "../../src/controller/usage/outbox-index.js";
import type { KubeApi } from "../../src/k8s/api.js";
import type { EventSink } from "../../src/k8s/events.js";
import type { MeterEvent, MeterSender } from "../../src/controller/usage/meter-client.js";
import { usageLoop } from "../support/usage-loop.js";

const NOW = new Date("2026-01-02T00:00:00.000Z");

const plain = (i: number) =>
  makeMediaJob(`plain-${i}`).ns("ns").uid(`uid-p${i}`).status({ phase: "Completed" }).build();

function metered(name: string): MediaJob {
  return makeMediaJob(name)
    .ns("ns")
    .uid(`uid-${name}`)
    .resourceVersion("1")
    .status(
      meteredStatus(new Date(NOW.getTime() - 60_000).toISOString(), {
        providerJobId: `p-${name}`,
        billedSeconds: 3,
        identifier: `mj_${name}_1`,
        counted: true,
      }),
    )
    .build();
}

function setup(intervalMs: number) {
  const jobs = new Map<string, MediaJob>();
  for (let i = 0; i < 5_000; i++) jobs.set(`plain-${i}`, plain(i));
  let lists = 0;
  const sent: MeterEvent[] = [];
  const api = {
    updateStatusWithRetry: async (
      _plural: string,
      _ns: string,
      name: string,
      change: (c: MediaJob) => MediaJob | undefined,
    ) => {
      const next = change(jobs.get(name)!);
      if (next) jobs.set(name, next);
      return { object: next ?? jobs.get(name), written: next !== undefined, conflicts: 0 };
    },
  } as unknown as KubeApi;
  const meter: MeterSender = {
    send: async (e) => {
      sent.push(e);
      return { outcome: "recorded", duplicate: false };
    },
  };
  const loop = usageLoop(
    {
      api,
      jobs: {
        list: () => {
          lists++;
          return [...jobs.values()];
        },
        get: (_ns: string, name: string) => jobs.get(name),
      },
      accounts: { list: () => [], get: () => undefined },
      accountNamespace: "billing",
      meter,
      events: { record: async () => {} } as unknown as EventSink,
      log: pino({ level: "silent" }),
      synced: () => true,
      leading: () => true,
      now: () => NOW,
    },
    { tickMs: intervalMs },
  );
  /** A job's new state reaches the cache, and the informer tells the loop, which reconciles its key. */
  const arrive = (job: MediaJob) => {
    const old = jobs.get(job.metadata.name);
    jobs.set(job.metadata.name, job);
    loop.reporter.noteJob(old ? "update" : "add", job, old);
  };
  return { loop, arrive, sent, lists: () => lists, jobs };
}

describe("the usage loop over a large cache", () => {
  it("reads the cache once, then only the jobs its events name, through a burst of job ends", async () => {
    const { loop, arrive, sent, lists } = setup(3_600_000);
    loop.start();
    for (let i = 0; i < 30; i++) {
      arrive(metered(`m-${i}`));
      await vi.waitFor(() => expect(sent.length).toBe(i + 1));
    }
    await loop.stop();
    expect(sent.map((e) => e.identifier)).toEqual(Array.from({ length: 30 }, (_, i) => `mj_m-${i}_1`));
    // The resync at the start walks the 5,000 cached jobs; the reconciles of the 30 job ends do not.
    expect(lists()).toBe(1);
  });

  it("finds a job whose event it was not told of at the next interval tick", async () => {
    const { loop, sent, jobs, lists } = setup(50);
    loop.start();
    await vi.waitFor(() => expect(lists()).toBeGreaterThanOrEqual(1));
    jobs.set("missed", metered("missed")); // in the cache, no event told
    await vi.waitFor(() => expect(sent.map((e) => e.identifier)).toEqual(["mj_missed_1"]));
    await loop.stop();
  });
});

describe("which usage keys a job's change wakes", () => {
  const attempt = (a: Partial<UsageAttempt>): UsageAttempt => ({
    attempt: 1,
    providerJobId: "p-1",
    providerStatus: "COMPLETED",
    endedAt: "2026-01-01T00:00:00.000Z",
    billedSeconds: 4,
    meter: "Pending",
    eventName: "gpu_seconds",
    identifier: "mj_u_1",
    ...a,
  });
  const jobWith = (account: string | undefined, ...attempts: UsageAttempt[]): MediaJob =>
    makeMediaJob("clip")
      .ns("ns")
      .uid("u")
      .status({ phase: "Completed", usage: { account, workload: "asr", attempts } } as MediaJob["status"])
      .build();
  const key = (customer: string, eventName = "gpu_seconds") => `${customer}\u0000${eventName}`;
  it.each<[string, MediaJob | undefined, MediaJob, string[]]>([
    ["a new job with an attempt in the outbox", undefined, jobWith("cus_1", attempt({})), [key("cus_1")]],
    [
      "an attempt billed",
      jobWith("cus_1", attempt({ billedSeconds: undefined })),
      jobWith("cus_1", attempt({})),
      [key("cus_1")],
    ],
    [
      "a second attempt billed",
      jobWith("cus_1", attempt({ meter: "Reported", counted: true, countedReported: true })),
      jobWith(
        "cus_1",
        attempt({ meter: "Reported", counted: true, countedReported: true }),
        attempt({ attempt: 2, identifier: "mj_u_2" }),
      ),
      [key("cus_1")],
    ],
    [
      "an operator sends a refused attempt again",
      jobWith("cus_1", attempt({ meter: "Refused", counted: true, countedReported: true })),
      jobWith("cus_1", attempt({ meter: "Pending", counted: true, firstSentAt: "2026-01-02T00:00:00.000Z" })),
      [key("cus_1")],
    ],
    [
      "an attempt without a meter, to count",
      undefined,
      jobWith("cus_1", attempt({ eventName: undefined, meter: "NotMetered" })),
      [key("cus_1", "")],
    ],
    [
      "the loop's own count mark",
      jobWith("cus_1", attempt({})),
      jobWith("cus_1", attempt({ counted: true })),
      [],
    ],
    [
      "the loop's Reported with both counts",
      jobWith("cus_1", attempt({ counted: true })),
      jobWith("cus_1", attempt({ meter: "Reported", counted: true, countedReported: true })),
      [],
    ],
    [
      "a change outside usage",
      jobWith("cus_1", attempt({})),
      {
        ...jobWith("cus_1", attempt({})),
        metadata: { name: "clip", namespace: "ns", uid: "u", labels: { a: "b" } },
      },
      [],
    ],
    ["a job of no account", undefined, jobWith(undefined, attempt({})), []],
  ])("%s", (_name, old, job, woken) => {
    expect(keysWoken(old, job)).toEqual(woken);
  });
});
