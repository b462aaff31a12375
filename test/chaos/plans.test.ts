// The chaos run's plan invariants (bench/chaos/plans.ts): seconds billed past a plan's cap by jobs
// submitted after the account reached it or started at the provider after it (the provider's own
// record), and jobs running at once beyond the plan's cap.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import type { EndedProviderJob } from "../../bench/chaos/metering.js";
import { checkPlans, type ProviderRecord } from "../../bench/chaos/plans.js";

const T0 = Date.parse("2026-01-01T00:00:00Z");
const at = (s: number) => new Date(T0 + s * 1000).toISOString();

type Run = [from: number, to: number, seconds: number];
/** Each job's runs, as the provider recorded them (provider() below). */
const runsOf = new WeakMap<MediaJob, Run[]>();

/**
 * A job of `account` whose attempts ran over [from, to] seconds, each billed `seconds`: submitted
 * at `from` and started by a worker `queued` seconds later (its run then ends at `to`).
 */
function job(name: string, account: string, runs: Run[], queued = 0): MediaJob {
  const j = jobOf(name, account, runs);
  runsOf.set(
    j,
    runs.map(([from, to, seconds]) => [from + queued, to, seconds]),
  );
  return j;
}

/** The provider's record of the jobs' runs (the simulator's ended jobs), a 2 s reaction, no outage. */
function provider(jobs: MediaJob[], o: Partial<ProviderRecord> = {}): ProviderRecord {
  const ended: EndedProviderJob[] = jobs.flatMap((j) =>
    (runsOf.get(j) ?? []).map(([started, to, seconds], i) => ({
      id: `p-${j.metadata.name}-${i + 1}`,
      key: i === 0 ? j.metadata.name : `${j.metadata.name}-retry-${i}`,
      status: "COMPLETED",
      executionTime: seconds * 1000,
      delayTime: 0,
      startedAt: T0 + started * 1000,
      endedAt: T0 + to * 1000,
    })),
  );
  return { ended, reactionMs: 2_000, watchSkewMs: 0, outages: [], ...o };
}

function jobOf(name: string, account: string, runs: Run[]): MediaJob {
  return {
    apiVersion: "media-orchestrator.io/v1alpha1",
    kind: "MediaJob",
    metadata: { name },
    spec: { workload: "asr", account, maxAttempts: 2 },
    status: {
      phase: "Completed",
      jobId: name,
      attempts: runs.length,
      startedAt: at(runs[0]![0]),
      submittedAt: at(runs[runs.length - 1]![0]),
      completedAt: at(runs[runs.length - 1]![1]),
      usage: {
        workload: "asr",
        account,
        attempts: runs.map(([, to, seconds], i) => ({
          attempt: i + 1,
          providerJobId: `p-${name}-${i + 1}`,
          providerStatus: i + 1 < runs.length ? ("FAILED" as const) : ("COMPLETED" as const),
          endedAt: at(to),
          billedSeconds: seconds,
        })),
      },
    },
  };
}

const limits = (reached?: number, upgraded?: number) => ({
  reachedAt: new Map(reached === undefined ? [] : [["A", T0 + reached * 1000]]),
  upgradedAt: new Map(upgraded === undefined ? [] : [["A", T0 + upgraded * 1000]]),
  waitingSeen: 0,
});

describe("the plan invariants under chaos", () => {
  it("lets the jobs running when the cap was reached take the account past it, and no job after", () => {
    // Cap 10: a, b and c (3 s each) end by 11 s; d, running then, reaches the cap when it ends at
    // 14 s, and takes the account 2 s past it.
    const jobs = [
      job("a", "A", [[0, 4, 3]]),
      job("b", "A", [[4, 8, 3]]),
      job("c", "A", [[8, 11, 3]]),
      job("d", "A", [[9, 14, 3]]),
      // Submitted after the upgrade: the larger plan's.
      job("e", "A", [[40, 42, 3]]),
    ];
    const ok = checkPlans(jobs, ["A"], 10, limits(15, 35), provider(jobs));
    expect(ok.usageLimitOvershootRawSeconds).toBe(2);
    expect(ok.usageLimitOvershootSeconds).toBe(0);
    // One more job submitted during the hold is past the limit: its seconds count.
    const late = checkPlans(
      [...jobs, job("f", "A", [[20, 22, 3]])],
      ["A"],
      10,
      limits(15, 35),
      provider([...jobs, job("f", "A", [[20, 22, 3]])]),
    );
    expect(late.usageLimitOvershootRawSeconds).toBe(5);
    expect(late.usageLimitOvershootSeconds).toBe(3);
    expect(late.perCustomer[0]!.lateAttempts).toEqual(["f#1"]);
  });

  it("counts a job submitted once the usage reached the cap, before the account's count showed it", () => {
    const jobs = [
      job("a", "A", [[0, 4, 3]]),
      job("b", "A", [[4, 8, 3]]),
      job("c", "A", [[8, 11, 3]]),
      job("d", "A", [[9, 14, 3]]),
      job("f", "A", [[20, 22, 3]]),
    ];
    // The ended attempts reach the cap at 14 s; the account is seen at it only at 30 s.
    const check = checkPlans(jobs, ["A"], 10, limits(30, 55), provider(jobs));
    expect(check.usageLimitOvershootSeconds).toBe(3);
    expect(check.usageLimitCountLagSeconds).toBe(16);
    expect(check.perCustomer[0]).toMatchObject({ limitReachedAt: at(14), lateAttempts: ["f#1"] });
  });

  it("counts a retry submitted after the cap was reached, from its own submission", () => {
    // The first attempt FAILED before the cap was reached; the retry came after it.
    const jobs = [
      job("a", "A", [[0, 9, 9]]),
      job("r", "A", [
        [1, 3, 2],
        [20, 24, 2],
      ]),
    ];
    const check = checkPlans(jobs, ["A"], 10, limits(10), provider(jobs));
    expect(check.usageLimitOvershootRawSeconds).toBe(3);
    expect(check.usageLimitOvershootSeconds).toBe(2);
  });

  it("a customer that never reached its cap overshoots nothing", () => {
    const check = checkPlans(
      [job("a", "A", [[0, 4, 3]])],
      ["A"],
      10,
      limits(),
      provider([job("a", "A", [[0, 4, 3]])]),
    );
    expect(check).toMatchObject({ usageLimitOvershootSeconds: 0, usageLimitOvershootRawSeconds: 0 });
  });

  it("counts the jobs running at once, an end and a start at the same instant not overlapping", () => {
    const two = [job("a", "A", [[0, 10, 1]]), job("b", "A", [[5, 15, 1]]), job("c", "A", [[10, 20, 1]])];
    expect(checkPlans(two, ["A"], 100, limits(), provider(two))).toMatchObject({
      maxRunning: 2,
      concurrencyOverPlan: 0,
    });
    const three = [...two, job("d", "A", [[6, 8, 1]])];
    expect(checkPlans(three, ["A"], 100, limits(), provider(three))).toMatchObject({
      maxRunning: 3,
      concurrencyOverPlan: 1,
    });
    expect(checkPlans(three, ["A"], 100, limits(), provider(three)).perCustomer[0]!.runningAtOnce).toEqual([
      expect.objectContaining({ job: "a" }),
      expect.objectContaining({ job: "b" }),
      expect.objectContaining({ job: "d", submitted: at(6), ended: at(8) }),
    ]);
    // Between a failed attempt and its retry the job does not run.
    const retried = [
      job("a", "A", [[0, 10, 1]]),
      job("r", "A", [
        [0, 4, 1],
        [12, 14, 1],
      ]),
      job("b", "A", [[5, 9, 1]]),
    ];
    expect(checkPlans(retried, ["A"], 100, limits(), provider(retried))).toMatchObject({ maxRunning: 2 });
  });

  it("ends an attempt no later than the next one's submission, nor than the job's end", () => {
    // Attempt 1's record says it ended at 30 s, but attempt 2 was submitted at 12 s: the job never
    // ran two attempts at once, so with b it ran at most two jobs.
    const late = job("r", "A", [
      [0, 30, 1],
      [12, 40, 1],
    ]);
    const other = job("b", "A", [[13, 20, 1]]);
    expect(checkPlans([late, other], ["A"], 100, limits(), provider([late, other]))).toMatchObject({
      maxRunning: 2,
    });
  });

  it("counts a job left queued at the provider that a worker started after the limit and the reaction", () => {
    // Cap 10, reached at 11 s (a, b, c). q was submitted at 5 s, before it, and sat in the
    // provider's queue: a worker starting it at 12 s (within the 2 s reaction) is the allowance;
    // one starting it at 20 s means it was not cancelled there.
    const base = [job("a", "A", [[0, 4, 4]]), job("b", "A", [[4, 8, 3]]), job("c", "A", [[8, 11, 3]])];
    const inTime = [...base, job("q", "A", [[5, 15, 3]], 7)];
    expect(checkPlans(inTime, ["A"], 10, limits(12), provider(inTime)).usageLimitOvershootSeconds).toBe(0);
    const left = [...base, job("q", "A", [[5, 23, 3]], 15)];
    const check = checkPlans(left, ["A"], 10, limits(12), provider(left));
    // The product's view alone (submitted before the limit) would call it allowed.
    expect(check.perCustomer[0]!.lateSeconds).toBe(0);
    expect(check.usageLimitOvershootSeconds).toBe(3);
    expect(check.perCustomer[0]!.lateStartedRuns).toEqual([expect.stringMatching(/^q \(p-q-1/)]);
    // A leader outage at the limit lengthens the reaction by itself and its recovery.
    const outage = { from: T0 + 10_000, to: T0 + 12_000, recoveryMs: 10_000 };
    expect(
      checkPlans(left, ["A"], 10, limits(12), provider(left, { outages: [outage] }))
        .usageLimitOvershootSeconds,
    ).toBe(0);
  });

  it("reaches the limit when the end that reaches it could be seen, not when its pass began", () => {
    // Cap 10: a, b and c end at 4, 8 and 11 s; c's end is dated 11 s (its pass began then) but
    // only reached the apiserver, and the watches, at 12.5 s (the provider read, the write). d was
    // submitted at 12 s, before anyone could know: not late. e, submitted at 14 s, is.
    const base = [job("a", "A", [[0, 4, 4]]), job("b", "A", [[4, 8, 3]]), job("c", "A", [[8, 11, 3]])];
    const d = job("d", "A", [[12, 16, 2]]);
    const endsSeen = new Map([
      ["a#1", T0 + 4_000],
      ["b#1", T0 + 8_000],
      ["c#1", T0 + 12_500],
    ]);
    const early = [...base, d];
    expect(checkPlans(early, ["A"], 10, limits(), provider(early)).usageLimitOvershootSeconds).toBe(2);
    expect(
      checkPlans(early, ["A"], 10, { ...limits(), endsSeen }, provider(early)).usageLimitOvershootSeconds,
    ).toBe(0);
    // The controller's watch may read the event a moment after the run's: the skew is allowed.
    const e = job("e", "A", [[13, 16, 2]]);
    const skewed = [...base, e];
    const record = provider(skewed, { watchSkewMs: 1_000 });
    expect(checkPlans(skewed, ["A"], 10, { ...limits(), endsSeen }, record).usageLimitOvershootSeconds).toBe(
      0,
    );
    const late = [...base, job("e", "A", [[14, 17, 2]])];
    const check = checkPlans(
      late,
      ["A"],
      10,
      { ...limits(), endsSeen },
      provider(late, { watchSkewMs: 1_000 }),
    );
    expect(check.usageLimitOvershootSeconds).toBe(2);
    expect(check.perCustomer[0]!.lateAttempts).toEqual(["e#1"]);
  });

  it("bills what the provider ran, not what the jobs recorded", () => {
    // The job's record says 3 s; the provider billed 6 s for its run.
    const a = job("a", "A", [[0, 9, 9]]);
    const b = job("b", "A", [[1, 12, 3]]);
    const record = provider([a, b]);
    record.ended = record.ended.map((e) => (e.key === "b" ? { ...e, executionTime: 6_000 } : e));
    expect(checkPlans([a, b], ["A"], 10, limits(), record).usageLimitOvershootRawSeconds).toBe(5);
  });
});
