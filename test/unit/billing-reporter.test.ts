// The usage reporter as an executor over fakes that fail on any call not listed: one pass over a
// job whose attempt is in the outbox (meter Pending) writes and sends exactly what the billing
// domain decided, and nothing else (no account write when nothing awaits a count, no send for a
// refused attempt, one Event per refusal).
import pino from "pino";
import { describe, expect, it, vi } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import { FORGOTTEN_IDENTIFIER } from "../../src/billing/refusals.js";
import type { BillingAccount } from "../../src/crds/billingaccount.js";
import type { MediaJob, UsageAttempt } from "../../src/crds/mediajob.js";
import type { KubeApi } from "../../src/k8s/api.js";
import type { EventSink } from "../../src/k8s/events.js";
import type { MeterEvent, MeterSender, MeterSendResult } from "../../src/controller/usage/meter-client.js";
import { UsageReporter } from "../../src/controller/usage/reporter.js";

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

function setup(attempt: Partial<UsageAttempt>, answer?: MeterSendResult) {
  let job: MediaJob = makeMediaJob("clip")
    .ns("ns")
    .uid("uid-1")
    .resourceVersion("1")
    .status({
      phase: "Completed",
      usage: {
        account: "cus_1",
        workload: "asr",
        attempts: [
          {
            attempt: 1,
            providerJobId: "p-1",
            providerStatus: "COMPLETED",
            endedAt: ago(60),
            billedSeconds: 42,
            meter: "Pending",
            eventName: "gpu_seconds",
            identifier: "mj_uid-1_1",
            counted: true,
            ...attempt,
          },
        ],
      },
    } as MediaJob["status"])
    .build();
  const writes: UsageAttempt[] = [];
  const sent: MeterEvent[] = [];
  const events: Array<{ reason: string; message: string }> = [];
  const api = strict<KubeApi>("api", {
    updateStatusWithRetry: (async (
      plural: string,
      _ns: string,
      _name: string,
      change: (c: MediaJob) => MediaJob | undefined,
    ) => {
      expect(plural).toBe("mediajobs");
      const next = change(job);
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
  const reporter = new UsageReporter({
    api,
    jobs: strict("jobs", { list: () => [job], get: () => job }),
    accounts: strict("accounts", { list: (): BillingAccount[] => [], get: () => undefined }),
    accountNamespace: "billing",
    meter,
    events: sink,
    log: pino({ level: "silent" }),
    intervalMs: 60_000,
    synced: () => true,
    leading: () => true,
    now: () => NOW,
  });
  /** One pass of the started reporter, until `writes` were made; stop() awaits the pass under way. */
  const pass = async (writesMade: number) => {
    reporter.start();
    await vi.waitFor(() => expect(writes.length).toBeGreaterThanOrEqual(writesMade));
    await reporter.stop();
  };
  return { pass, writes, sent, events };
}

describe("the usage reporter's pass over one outbox attempt", () => {
  it("stamps the first send, sends the recorded identifier once, then marks it Reported", async () => {
    const { pass, writes, sent, events } = setup({}, { outcome: "recorded", duplicate: false });
    await pass(2);
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
      ["Pending", NOW.toISOString(), undefined],
      ["Reported", NOW.toISOString(), NOW.toISOString()],
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
    await pass(2);
    expect(sent).toHaveLength(1);
    expect(writes.map((a) => a.meter)).toEqual(["Pending", "Refused"]);
    expect(events).toEqual([
      {
        reason: "UsageNotReported",
        message: "attempt 1's 42 GPU seconds were not reported: no such customer",
      },
    ]);
  });
});
