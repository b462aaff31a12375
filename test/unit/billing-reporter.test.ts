// The usage reporter as an executor over fakes that fail on any call not listed: one pass over a
// job whose attempt is in the outbox (meter Pending) writes and sends exactly what the billing
// domain decided, and nothing else (no account write when nothing awaits a count, no send for a
// refused attempt, one Event per refusal).
import pino from "pino";
import { describe, expect, it, vi } from "vitest";
import { makeMediaJob, meteredStatus } from "../support/builders.js";
import { FORGOTTEN_IDENTIFIER } from "../../src/billing/refusals.js";
import {
  billingAccountName,
  type BillingAccount,
  type BillingAccountUsage,
} from "../../src/crds/billingaccount.js";
import type { MediaJob, UsageAttempt } from "../../src/crds/mediajob.js";
import type { KubeApi } from "../../src/k8s/api.js";
import type { EventSink } from "../../src/k8s/events.js";
import type { MeterEvent, MeterSender, MeterSendResult } from "../../src/controller/usage/meter-client.js";
import { usageLoop } from "../support/usage-loop.js";

const NOW = new Date("2026-01-02T00:00:00.000Z");
const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();

/** An object whose listed members work and whose every other member throws when read. */
function strict<T extends object>(name: string, members: Partial<T>): T {
  return new Proxy(members as T, {
    get(target, key) {
      if (key in target) return target[key as keyof T];
      if (key === "then") return undefined; // not a thenable
      throw new Error(`unlisted call: ${name}.${String(key)}`);
    },
  });
}

function setup(attempt: Partial<UsageAttempt>, answer?: MeterSendResult, accountUsage?: BillingAccountUsage) {
  let job: MediaJob = makeMediaJob("clip")
    .ns("ns")
    .uid("uid-1")
    .resourceVersion("1")
    .status(meteredStatus(ago(60), { counted: true, ...attempt }))
    .build();
  const writes: UsageAttempt[] = [];
  /** The BillingAccount of cus_1 when `accountUsage` is given, and its status.usage as written. */
  let account: BillingAccount | undefined = accountUsage && {
    apiVersion: "media-orchestrator.io/v1alpha1",
    kind: "BillingAccount",
    metadata: { name: billingAccountName("cus_1"), namespace: "billing", uid: "acct-1" },
    spec: { customerId: "cus_1" },
    status: { subscriptionStatus: "active", usage: accountUsage },
  };
  const accountWrites: BillingAccountUsage[] = [];
  const sent: MeterEvent[] = [];
  const events: Array<{ reason: string; message: string }> = [];
  const api = strict<KubeApi>("api", {
    updateStatusWithRetry: (async (
      plural: string,
      _ns: string,
      _name: string,
      change: (c: MediaJob | BillingAccount) => MediaJob | BillingAccount | undefined | false,
    ) => {
      if (plural === "billingaccounts") {
        expect(account).toBeDefined();
        const next = change(account!) as BillingAccount | false | undefined;
        if (!next) return { object: account, written: false, conflicts: 0 };
        account = next;
        accountWrites.push(next.status!.usage!);
        return { object: next, written: true, conflicts: 0 };
      }
      expect(plural).toBe("mediajobs");
      const next = change(job) as MediaJob | undefined;
      if (!next) return { object: job, written: false, conflicts: 0 };
      job = next;
      writes.push(next.status!.usage!.attempts[0]!);
      return { object: next, written: true, conflicts: 0 };
    }) as unknown as KubeApi["updateStatusWithRetry"],
  });
  const meter = strict<MeterSender>("meter", {
    send: async (event) => {
      sent.push(event);
      if (!answer) throw new Error("unexpected send");
      return answer;
    },
  });
  const sink = strict<EventSink>("events", {
    record: async (_t, _type, reason, message) => {
      events.push({ reason, message });
    },
  });
  const loop = usageLoop({
    api,
    jobs: strict("jobs", { list: () => [job], get: () => job }),
    accounts: strict("accounts", {
      list: (): BillingAccount[] => (account ? [account] : []),
      get: () => account,
    }),
    accountNamespace: "billing",
    meter,
    events: sink,
    log: pino({ level: "silent" }),
    synced: () => true,
    leading: () => true,
    now: () => NOW,
  });
  /** The loop started, until `writes` were made; stop() awaits the reconciles under way. */
  const pass = async (writesMade: number) => {
    loop.start();
    await vi.waitFor(() => expect(writes.length).toBeGreaterThanOrEqual(writesMade));
    await loop.stop();
  };
  return { pass, writes, accountWrites, sent, events };
}

const PERIOD = { periodStart: "2026-01-01T00:00:00.000Z", periodEnd: "2026-02-01T00:00:00.000Z" };

/** `n` finished jobs of cus_1, each one attempt of 2 s in the outbox (meter Pending, not counted). */
function pendingJobs(n: number): Map<string, MediaJob> {
  const jobs = new Map<string, MediaJob>();
  for (let i = 0; i < n; i++) {
    const job = makeMediaJob(`clip-${i}`)
      .ns("ns")
      .uid(`uid-${i}`)
      .resourceVersion("1")
      .status(
        meteredStatus(ago(60), { providerJobId: `p-${i}`, billedSeconds: 2, identifier: `mj_uid-${i}_1` }),
      )
      .build();
    jobs.set(job.metadata.name, job);
  }
  return jobs;
}

/** cus_1's BillingAccount, active, nothing counted yet this period. */
const freshAccount = (): BillingAccount => ({
  apiVersion: "media-orchestrator.io/v1alpha1",
  kind: "BillingAccount",
  metadata: { name: billingAccountName("cus_1"), namespace: "billing", uid: "acct-1" },
  spec: { customerId: "cus_1" },
  status: { subscriptionStatus: "active", usage: { ...PERIOD, usedSeconds: 0, reportedSeconds: 0 } },
});

describe("the usage reporter's pass over one outbox attempt", () => {
  it("sends the recorded identifier once, then marks it Reported: one job write, none before the call", async () => {
    const { pass, writes, sent, events } = setup({}, { outcome: "recorded", duplicate: false });
    await pass(1);
    expect(sent).toEqual([
      {
        eventName: "gpu_seconds",
        customer: "cus_1",
        value: 42,
        identifier: "mj_uid-1_1",
        timestamp: expect.any(Number),
      },
    ]);
    expect(writes.map((a) => [a.meter, a.firstSentAt, a.reportedAt])).toEqual([
      ["Reported", undefined, NOW.toISOString()],
    ]);
    expect(events).toEqual([]);
  });

  it("refuses, without sending, an attempt first sent past the deduplication window", async () => {
    const { pass, writes, sent, events } = setup({ firstSentAt: ago(24 * 3600) });
    await pass(1);
    expect(sent).toEqual([]);
    expect(writes.map((a) => [a.meter, a.message])).toEqual([["Refused", FORGOTTEN_IDENTIFIER]]);
    expect(events.map((e) => e.reason)).toEqual(["UsageNotReported"]);
  });

  it("keeps the provider's refusal on the attempt and tells it in one Event", async () => {
    const { pass, writes, sent, events } = setup({}, { outcome: "refused", reason: "no such customer" });
    await pass(1);
    expect(sent).toHaveLength(1);
    expect(writes.map((a) => a.meter)).toEqual(["Refused"]);
    expect(events).toEqual([
      {
        reason: "UsageNotReported",
        message: "attempt 1's 42 GPU seconds were not reported: no such customer",
      },
    ]);
  });

  it("with its account there, counts it once after the send: one account write, one job write for Reported and both counts", async () => {
    const period = { periodStart: "2026-01-01T00:00:00.000Z", periodEnd: "2026-02-01T00:00:00.000Z" };
    const { pass, writes, accountWrites, sent } = setup(
      { counted: undefined },
      { outcome: "recorded", duplicate: false },
      { ...period, usedSeconds: 0, reportedSeconds: 0 },
    );
    await pass(1);
    expect(sent.map((e) => e.identifier)).toEqual(["mj_uid-1_1"]);
    // The one write after the call: no count write of the job before the send.
    expect(writes.map((a) => [a.meter, a.firstSentAt, a.counted, a.countedReported])).toEqual([
      ["Reported", undefined, true, true],
    ]);
    expect(accountWrites).toEqual([
      { ...period, usedSeconds: 42, reportedSeconds: 42, counting: ["mj_uid-1_1", "mj_uid-1_1+reported"] },
    ]);
  });

  it.each([
    ["sent a minute ago", ago(60)],
    ["sent past the deduplication window (never refused: the account proves the acceptance)", ago(24 * 3600)],
  ])(
    "settles without a send an attempt whose reported count its account lists (the job's write was lost): %s",
    async (_name, firstSentAt) => {
      const counting = ["mj_uid-1_1", "mj_uid-1_1+reported"];
      const usage = {
        periodStart: "2026-01-01T00:00:00.000Z",
        periodEnd: "2026-02-01T00:00:00.000Z",
        usedSeconds: 42,
        reportedSeconds: 42,
        counting,
      };
      const { pass, writes, accountWrites, sent, events } = setup(
        { counted: undefined, firstSentAt },
        undefined,
        usage,
      );
      await pass(1);
      expect(sent).toEqual([]);
      expect(events).toEqual([]);
      expect(writes.map((a) => [a.meter, a.counted, a.countedReported])).toEqual([["Reported", true, true]]);
      // Nothing counted again: the account's figures are what they were.
      for (const u of accountWrites) expect(u).toMatchObject({ usedSeconds: 42, reportedSeconds: 42 });
    },
  );
});

describe("the usage reporter's pass over a customer's burst", () => {
  it("counts 600 attempts in batches, each job written once after its send, its account's counting within 1,000 ids", async () => {
    const jobs = pendingJobs(600);
    let account = freshAccount();
    const jobWrites = new Map<string, number>();
    let refusedAccountWrites = 0;
    const api = strict<KubeApi>("api", {
      updateStatusWithRetry: (async (
        plural: string,
        _ns: string,
        name: string,
        change: (c: MediaJob | BillingAccount) => MediaJob | BillingAccount | undefined | false,
      ) => {
        if (plural === "billingaccounts") {
          const next = change(account) as BillingAccount | false | undefined;
          if (!next) return { object: account, written: false, conflicts: 0 };
          // The CRD's limit: the apiserver refuses the write (422).
          if ((next.status?.usage?.counting?.length ?? 0) > 1000) {
            refusedAccountWrites++;
            throw new Error("422 Invalid: status.usage.counting: Too many");
          }
          account = next;
          return { object: next, written: true, conflicts: 0 };
        }
        const next = change(jobs.get(name)!) as MediaJob | undefined;
        if (!next) return { object: jobs.get(name), written: false, conflicts: 0 };
        jobs.set(name, next); // the cache shows each write at once
        jobWrites.set(name, (jobWrites.get(name) ?? 0) + 1);
        return { object: next, written: true, conflicts: 0 };
      }) as unknown as KubeApi["updateStatusWithRetry"],
    });
    const recorded: string[] = [];
    const loop = usageLoop({
      api,
      jobs: strict("jobs", { list: () => [...jobs.values()], get: (_ns: string, n: string) => jobs.get(n) }),
      accounts: strict("accounts", { list: () => [account], get: () => account }),
      accountNamespace: "billing",
      meter: strict<MeterSender>("meter", {
        send: async (e) => {
          recorded.push(e.identifier);
          return { outcome: "recorded", duplicate: false };
        },
        sendBatch: async (events) => {
          recorded.push(...events.map((e) => e.identifier));
          return { outcome: "recorded" };
        },
      }),
      events: strict<EventSink>("events", {}),
      log: pino({ level: "silent" }),
      synced: () => true,
      leading: () => true,
      now: () => NOW,
    });
    loop.start();
    await vi.waitFor(() =>
      expect([...jobs.values()].every((j) => j.status?.usage?.attempts[0]?.countedReported)).toBe(true),
    );
    await loop.stop();
    expect(refusedAccountWrites).toBe(0);
    expect(new Set(recorded).size).toBe(600);
    expect(recorded).toHaveLength(600);
    // Reported with both counts: one write per job.
    expect([...jobWrites.values()].every((n) => n === 1)).toBe(true);
    expect(account.status?.usage).toMatchObject({ usedSeconds: 1200, reportedSeconds: 1200 });
  });
});

describe("the usage reporter's key while the payment provider fails", () => {
  it("is tried again when its backoff ends, not at once when its own count writes wake it", async () => {
    const jobs = pendingJobs(3);
    let account = freshAccount();
    const failures: Array<{ at: number; delayMs: number }> = [];
    const BASE_DELAY_MS = 2_000;
    // eslint-disable-next-line prefer-const -- the informer's handler below needs the loop
    let loop: ReturnType<typeof usageLoop>;
    const api = strict<KubeApi>("api", {
      updateStatusWithRetry: (async (
        plural: string,
        _ns: string,
        name: string,
        change: (c: MediaJob | BillingAccount) => MediaJob | BillingAccount | undefined | false,
      ) => {
        if (plural === "billingaccounts") {
          const next = change(account) as BillingAccount | false | undefined;
          if (!next) return { object: account, written: false, conflicts: 0 };
          account = next;
          return { object: next, written: true, conflicts: 0 };
        }
        const old = jobs.get(name)!;
        const next = change(old) as MediaJob | undefined;
        if (!next) return { object: old, written: false, conflicts: 0 };
        jobs.set(name, next);
        // The informer tells the loop of each write, as setup.ts wires it.
        loop.reporter.noteJob("update", next, old);
        return { object: next, written: true, conflicts: 0 };
      }) as unknown as KubeApi["updateStatusWithRetry"],
    });
    loop = usageLoop(
      {
        api,
        jobs: strict("jobs", {
          list: () => [...jobs.values()],
          get: (_ns: string, n: string) => jobs.get(n),
        }),
        accounts: strict("accounts", { list: () => [account], get: () => account }),
        accountNamespace: "billing",
        // Down: every call is answered 5xx (retried at once twice, then the key backs off).
        meter: strict<MeterSender>("meter", { send: async () => ({ outcome: "retry", reason: "500" }) }),
        events: strict<EventSink>("events", {}),
        log: pino({ level: "silent" }),
        synced: () => true,
        leading: () => true,
        now: () => NOW,
      },
      {
        baseDelayMs: BASE_DELAY_MS,
        onError: (key, err) => {
          if (key.endsWith("gpu_seconds"))
            failures.push({ at: Date.now(), delayMs: BASE_DELAY_MS * 2 ** failures.length });
          void err;
        },
      },
    );
    loop.start();
    await vi.waitFor(() => expect(failures.length).toBeGreaterThanOrEqual(2), { timeout: 15_000 });
    await loop.stop();
    // The first failing pass counted the unsent attempts (account and job writes): still, the
    // second pass began only once the first backoff ended.
    expect(jobs.get("clip-0")?.status?.usage?.attempts[0]?.counted).toBe(true);
    expect(failures[1]!.at - failures[0]!.at).toBeGreaterThanOrEqual(BASE_DELAY_MS - 20);
  }, 20_000);
});
