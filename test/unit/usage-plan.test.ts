// The usage loop's decisions for one key (src/billing/usage-plan.ts), as tables: which outbox
// attempts are settled without a send, refused, sent in which batches, or counted now; whether the
// account is written with nothing to count; and what a meter's answer makes of a batch.
import { describe, expect, it } from "vitest";
import { FORGOTTEN_IDENTIFIER } from "../../src/billing/refusals.js";
import {
  afterSend,
  countOnBackOff,
  parseUsageKey,
  planUsageKey,
  sendWindowStart,
  usageKeyString,
  type OutboxEntry,
  type UsageKeyFacts,
} from "../../src/billing/usage-plan.js";
import type { UsageAttempt } from "../../src/crds/mediajob.js";

const NOW_S = Date.parse("2026-03-10T12:00:00Z") / 1000;
const ago = (s: number) => new Date((NOW_S - s) * 1000).toISOString();

function entry(n: number, a: Partial<UsageAttempt> = {}, awaitsCount = false): OutboxEntry {
  return {
    job: { namespace: "ns", name: `job-${n}`, uid: `uid-${n}` },
    id: `mj_uid-${n}_1`,
    awaitsCount,
    attempt: {
      attempt: 1,
      providerJobId: `p-${n}`,
      providerStatus: "COMPLETED",
      endedAt: ago(600 - n),
      billedSeconds: 10,
      meter: "Pending",
      eventName: "gpu_seconds",
      ...a,
    } as UsageAttempt,
  };
}

function facts(over: Partial<UsageKeyFacts> = {}): UsageKeyFacts {
  return {
    key: { customer: "cus_1", eventName: "gpu_seconds" },
    entries: [],
    account: { counting: new Set(), periodEnded: false },
    live: new Set(),
    metering: true,
    held: undefined,
    batchMax: 100,
    // This process has led for a day: an attempt that ended in the last day is its own.
    leadingSinceS: NOW_S - 24 * 3600,
    nowS: NOW_S,
    ...over,
  };
}

const ids = (list: readonly OutboxEntry[]) => list.map((e) => e.job.name);

describe("planUsageKey: what becomes of each outbox attempt of a key", () => {
  const pending = entry(1, {}, true);
  const listed = entry(2, { counted: true });
  const forgotten = entry(3, { firstSentAt: ago(24 * 3600) });
  const tooOld = entry(4, { endedAt: ago(36 * 24 * 3600) });
  const reportedUncounted = entry(5, { meter: "Reported", counted: true }, true);
  const refusedUncounted = entry(6, { meter: "Refused" }, true);
  const withListed = { counting: new Set(["mj_uid-2_1+reported"]), periodEnded: false };

  it.each<
    [
      string,
      Partial<UsageKeyFacts>,
      { send: string[]; found: string[]; refuse: string[]; count: string[]; missing: string[] },
    ]
  >([
    [
      "a Pending attempt is sent; its count waits for the answer (one job write for both)",
      { entries: [pending] },
      { send: ["job-1"], found: [], refuse: [], count: [], missing: [] },
    ],
    [
      "an attempt whose reported count its account lists was accepted: settled, not sent",
      { entries: [listed], account: withListed },
      { send: [], found: ["job-2"], refuse: [], count: [], missing: [] },
    ],
    [
      "first sent past the deduplication window: refused, never sent blindly",
      { entries: [forgotten] },
      { send: [], found: [], refuse: ["job-3"], count: [], missing: [] },
    ],
    [
      "ended too long ago for the provider: refused",
      { entries: [tooOld] },
      { send: [], found: [], refuse: ["job-4"], count: [], missing: [] },
    ],
    [
      "Reported or Refused and not counted: counted now",
      { entries: [reportedUncounted, refusedUncounted] },
      { send: [], found: [], refuse: [], count: ["job-5", "job-6"], missing: [] },
    ],
    [
      "the meter held as misconfigured: nothing sent, the used seconds counted",
      { entries: [pending, forgotten], held: "the meter does not sum" },
      { send: [], found: [], refuse: [], count: ["job-1"], missing: [] },
    ],
    [
      "metering off: nothing sent, counted",
      { entries: [pending], metering: false },
      { send: [], found: [], refuse: [], count: ["job-1"], missing: [] },
    ],
    [
      "the account's own key never sends",
      { key: { customer: "cus_1", eventName: "" }, entries: [pending] },
      { send: [], found: [], refuse: [], count: ["job-1"], missing: [] },
    ],
    [
      "no BillingAccount: sent all the same, the counts wait for it (told)",
      { entries: [pending, reportedUncounted], account: undefined },
      { send: ["job-1"], found: [], refuse: [], count: [], missing: ["job-5"] },
    ],
  ])("%s", (_name, over, want) => {
    const plan = planUsageKey(facts(over));
    expect({
      send: plan.batches.flat().map((s) => s.entry.job.name),
      found: ids(plan.found),
      refuse: ids(plan.refuse.map((r) => r.entry)),
      count: ids(plan.count),
      missing: ids(plan.accountMissing),
    }).toEqual(want);
  });

  it.each<[string, OutboxEntry, number, number | undefined]>([
    [
      "an operator's firstSentAt",
      entry(1, { firstSentAt: ago(3600), endedAt: ago(7200) }),
      NOW_S,
      NOW_S - 3600,
    ],
    [
      "this process's own first call",
      { ...entry(1, { endedAt: ago(60) }), triedAt: NOW_S - 30 },
      NOW_S - 600,
      NOW_S - 30,
    ],
    [
      "ended before this process led: an earlier leader may have sent it since its end",
      entry(1, { endedAt: ago(7200) }),
      NOW_S - 600,
      NOW_S - 7200,
    ],
    [
      "ended within the clocks' margin after it began to lead: the same",
      entry(1, { endedAt: ago(500) }),
      NOW_S - 600,
      NOW_S - 500,
    ],
    [
      "ended well after it began to lead and never tried: no send can have happened",
      entry(1, { endedAt: ago(60) }),
      NOW_S - 3600,
      undefined,
    ],
  ])("the deduplication window's start: %s", (_name, e, leadingSinceS, start) => {
    expect(sendWindowStart(e, leadingSinceS)).toBe(start);
  });

  it.each<[string, OutboxEntry, number, "send" | "refuse"]>([
    [
      "an earlier leader's attempt that ended 24 hours ago is held for the operator",
      entry(1, { endedAt: ago(24 * 3600) }),
      NOW_S - 600,
      "refuse",
    ],
    [
      "its own attempt never tried, ended 24 hours ago (its meter was held), is sent",
      entry(1, { endedAt: ago(24 * 3600) }),
      NOW_S - 48 * 3600,
      "send",
    ],
    [
      "its own attempt first tried 24 hours ago is held",
      { ...entry(1, { endedAt: ago(25 * 3600) }), triedAt: NOW_S - 24 * 3600 },
      NOW_S - 48 * 3600,
      "refuse",
    ],
    [
      "an operator's fresh firstSentAt sends it again",
      entry(1, { endedAt: ago(30 * 3600), firstSentAt: ago(60) }),
      NOW_S - 600,
      "send",
    ],
  ])("%s", (_name, e, leadingSinceS, want) => {
    const plan = planUsageKey(facts({ entries: [e], leadingSinceS }));
    expect(plan.batches.length > 0 ? "send" : plan.refuse.length > 0 ? "refuse" : "none").toBe(want);
  });

  it("keeps each refusal's reason for the user", () => {
    const plan = planUsageKey(facts({ entries: [forgotten, tooOld] }));
    expect(plan.refuse.map((r) => r.reason)).toEqual([
      FORGOTTEN_IDENTIFIER,
      "the job ended too long ago for the payment provider to accept its usage",
    ]);
  });

  it("sends in batches of the meter's size, oldest first, each event timestamped when its job ended", () => {
    const entries = Array.from({ length: 250 }, (_, i) => entry(249 - i));
    const plan = planUsageKey(facts({ entries }));
    expect(plan.batches.map((b) => b.length)).toEqual([100, 100, 50]);
    const sent = plan.batches.flat();
    expect(sent.map((s) => s.entry.job.name)).toEqual(Array.from({ length: 250 }, (_, i) => `job-${i}`));
    for (const s of sent) expect(s.timestamp).toBe(Date.parse(s.entry.attempt.endedAt) / 1000);
  });

  it("one event per call without the stream", () => {
    const plan = planUsageKey(facts({ entries: [entry(1), entry(2), entry(3)], batchMax: 1 }));
    expect(plan.batches.map((b) => b.length)).toEqual([1, 1, 1]);
  });

  it.each<[string, Partial<UsageKeyFacts>, boolean]>([
    [
      "ids no job owes any more are dropped",
      { account: { counting: new Set(["gone"]), periodEnded: false } },
      true,
    ],
    ["a period that ended starts over", { account: { counting: new Set(), periodEnded: true } }, true],
    [
      "every listed id still owed: nothing to write",
      { account: { counting: new Set(["a"]), periodEnded: false }, live: new Set(["a"]) },
      false,
    ],
    [
      "counting now writes anyway",
      { entries: [reportedUncounted], account: { counting: new Set(["gone"]), periodEnded: true } },
      false,
    ],
    ["no account: nothing to write", { account: undefined }, false],
  ])("the account written with nothing to count: %s", (_name, over, touch) => {
    expect(planUsageKey(facts(over)).touchAccount).toBe(touch);
  });
});

describe("afterSend: what a meter's answer makes of a batch", () => {
  const batch = [1, 2, 3].map((n) => ({ entry: entry(n), timestamp: NOW_S - 60 }));
  it.each([
    [
      "recorded: each accepted, fresh",
      { outcome: "recorded" as const },
      { accepted: 3, fresh: true, refuse: 0, oneByOne: 0, backOff: false },
    ],
    [
      "recorded as a duplicate: accepted, not fresh",
      { outcome: "recorded" as const, duplicate: true },
      { accepted: 3, fresh: false, refuse: 0, oneByOne: 0, backOff: false },
    ],
    [
      "refused: each refused with the reason",
      { outcome: "refused" as const, reason: "no such customer" },
      { accepted: 0, fresh: false, refuse: 3, oneByOne: 0, backOff: false },
    ],
    [
      "not for the stream: each sent alone",
      { outcome: "unstreamable" as const, reason: "bad batch" },
      { accepted: 0, fresh: false, refuse: 0, oneByOne: 3, backOff: false },
    ],
    [
      "not recorded now: the key backs off",
      { outcome: "retry" as const, reason: "503" },
      { accepted: 0, fresh: false, refuse: 0, oneByOne: 0, backOff: true },
    ],
  ])("%s", (_name, answer, want) => {
    const next = afterSend(batch, answer);
    expect({
      accepted: next.accepted.length,
      fresh: next.accepted.length > 0 && next.accepted.every((a) => a.fresh),
      refuse: next.refuse.length,
      oneByOne: next.oneByOne.length,
      backOff: next.backOff !== undefined,
    }).toEqual(want);
  });

  it("a single event the stream will not take backs off (it was already sent alone)", () => {
    expect(afterSend(batch.slice(0, 1), { outcome: "unstreamable", reason: "x" })).toMatchObject({
      oneByOne: [],
      backOff: "x",
    });
  });
});

describe("countOnBackOff", () => {
  it("counts the unsent batches' attempts that await a count, from the failed one on", () => {
    const plan = planUsageKey(
      facts({ entries: [entry(1, {}, true), entry(2), entry(3, {}, true)], batchMax: 1 }),
    );
    expect(ids(countOnBackOff(plan, 1))).toEqual(["job-3"]);
    expect(ids(countOnBackOff(plan, 0))).toEqual(["job-1", "job-3"]);
  });
});

describe("the usage key", () => {
  it.each([
    { customer: "cus_1", eventName: "gpu_seconds" },
    { customer: "cus_1", eventName: "" },
  ])("reads back what it was made of: %o", (k) => {
    expect(parseUsageKey(usageKeyString(k))).toEqual(k);
  });
});
