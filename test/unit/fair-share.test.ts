import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  accountWeights,
  DEFAULT_ACCOUNT,
  debtOf,
  fairShareBound,
  fairShareState,
  pickNext,
  waitBoundSeconds,
  weightOf,
  type FairShareState,
  type Priority,
  type WaitingJob,
} from "../../src/mediajob/fair-share.js";

// Weighted fair share between accounts, priority then age within one, and the bound on how long
// a waiting job can be passed over.

const job = (
  id: string,
  account: string | undefined,
  createdAt: number,
  priority?: Priority,
): WaitingJob => ({
  id,
  ...(account !== undefined && { account }),
  ...(priority !== undefined && { priority }),
  createdAt,
});
const ids = (jobs: WaitingJob[]) => jobs.map((j) => j.id);

describe("accountWeights", () => {
  it("takes an account's override first, then its plan's weight, then 1", () => {
    const plan = new Map([
      ["cus_gold", 3],
      ["cus_silver", 2],
    ]);
    const w = accountWeights(new Map([["cus_gold", 0.5]]), (a) => plan.get(a));
    expect(weightOf(w, "cus_gold")).toBe(0.5);
    expect(weightOf(w, "cus_silver")).toBe(2);
    expect(weightOf(w, "cus_plain")).toBe(1);
    expect(weightOf(w, DEFAULT_ACCOUNT)).toBe(1);
  });
  it("shares slots by the plans' weights: an account on a weight-2 plan gets two for one", () => {
    const w = accountWeights(new Map(), (a) => (a === "gold" ? 2 : undefined));
    const waiting = [
      ...Array.from({ length: 6 }, (_, i) => job(`g${i}`, "gold", i)),
      ...Array.from({ length: 6 }, (_, i) => job(`p${i}`, "plain", i)),
    ];
    const picked = pickNext({ waiting, n: 6, weights: w }).picked;
    expect(picked.filter((j) => j.account === "gold")).toHaveLength(4);
  });
});

describe("pickNext", () => {
  it.each<[string, WaitingJob[], number, Map<string, number> | undefined, string[]]>([
    [
      "one account: high before normal before low, then oldest first",
      [job("n2", "a", 2), job("l1", "a", 1, "low"), job("h3", "a", 3, "high"), job("n1", "a", 1)],
      4,
      undefined,
      ["h3", "n1", "n2", "l1"],
    ],
    [
      "two accounts of equal weight alternate, whoever created first",
      [job("a1", "a", 1), job("a2", "a", 2), job("a3", "a", 3), job("b1", "b", 10), job("b2", "b", 11)],
      5,
      undefined,
      ["a1", "b1", "a2", "b2", "a3"],
    ],
    [
      "weight 2 gets two slots for every one of weight 1",
      [
        ...Array.from({ length: 4 }, (_, i) => job(`a${i}`, "a", i)),
        ...Array.from({ length: 4 }, (_, i) => job(`c${i}`, "c", 100 + i)),
      ],
      6,
      new Map([["c", 2]]),
      ["a0", "c0", "c1", "a1", "c2", "c3"],
    ],
    [
      "jobs without an account share the default account",
      [job("x1", undefined, 1), job("x2", undefined, 2), job("b1", "b", 3)],
      3,
      undefined,
      ["x1", "b1", "x2"],
    ],
    ["fewer waiting than slots: all of them", [job("a1", "a", 1)], 5, undefined, ["a1"]],
    ["no slots: none", [job("a1", "a", 1)], 0, undefined, []],
  ])("%s", (_name, waiting, n, weights, expected) => {
    expect(ids(pickNext({ waiting, n, ...(weights && { weights }) }).picked)).toEqual(expected);
  });

  it("a burst of one account does not hold back another's later job: it gets the next slot", () => {
    const burst = Array.from({ length: 10_000 }, (_, i) => job(`a${i}`, "a", i));
    let state = pickNext({ waiting: burst, n: 10 }).state; // the window filled with A's jobs
    const late = job("b1", "b", 20_000);
    const next = pickNext({ waiting: [...burst.slice(10), late], n: 1, state });
    expect(ids(next.picked)).toEqual(["b1"]);
    state = next.state;
    expect(ids(pickNext({ waiting: burst.slice(10), n: 1, state }).picked)).toEqual(["a10"]);
  });

  it("an account that had nothing to do banks no credit", () => {
    // A alone for 100 slots, then B arrives: they alternate from there, B does not get 100 in a row.
    let { state } = pickNext({
      waiting: Array.from({ length: 100 }, (_, i) => job(`a${i}`, "a", i)),
      n: 100,
    });
    const more = Array.from({ length: 10 }, (_, i) => job(`a${100 + i}`, "a", 100 + i));
    const bs = Array.from({ length: 10 }, (_, i) => job(`b${i}`, "b", 200 + i));
    const r = pickNext({ waiting: [...more, ...bs], n: 6, state });
    expect(ids(r.picked)).toEqual(["b0", "a100", "b1", "a101", "b2", "a102"]);
    state = r.state;
    expect(state.finish.size).toBeLessThanOrEqual(2);
  });

  it("a rebuilt state counts the jobs each account has in flight", () => {
    // After a leader change A holds 4 slots and B none: B gets the next ones until it caught up.
    const waiting = [
      ...Array.from({ length: 5 }, (_, i) => job(`a${i}`, "a", i)),
      ...Array.from({ length: 5 }, (_, i) => job(`b${i}`, "b", 10 + i)),
    ];
    const r = pickNext({ waiting, n: 6, inFlight: new Map([["a", 4]]) });
    expect(ids(r.picked)).toEqual(["b0", "b1", "b2", "b3", "a0", "b4"]);
  });

  it("weights that are not positive numbers count as 1", () => {
    expect(weightOf(new Map([["a", 0]]), "a")).toBe(1);
    expect(weightOf(new Map([["a", Number.NaN]]), "a")).toBe(1);
    expect(weightOf(new Map([["a", 3]]), "a")).toBe(3);
    expect(weightOf(undefined, DEFAULT_ACCOUNT)).toBe(1);
  });

  it("while every account has work, each gets slots in proportion to its weight: |got_a / w_a - got_b / w_b| <= 1 / w_a + 1 / w_b", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 1, max: 400 }),
        (weightList, n) => {
          const weights = new Map(weightList.map((w, i) => [`acct${i}`, w]));
          const waiting = weightList.flatMap((_, i) =>
            Array.from({ length: n }, (__, k) => job(`acct${i}-${k}`, `acct${i}`, k * 7 + i)),
          );
          const { picked } = pickNext({ waiting, n, weights });
          const got = (a: string) => picked.filter((j) => j.account === a).length;
          for (const [a, wa] of weights)
            for (const [b, wb] of weights)
              expect(Math.abs(got(a) / wa - got(b) / wb)).toBeLessThanOrEqual(1 / wa + 1 / wb + 1e-9);
        },
      ),
    );
  });
});

// A run of arrivals and picks, with the state carried between picks as the controller would.
type Step = { arrive: { account: number; priority: Priority } } | { pick: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      arrive: fc.record({
        account: fc.integer({ min: 0, max: 4 }),
        priority: fc.constantFrom<Priority>("high", "normal", "low"),
      }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ pick: fc.integer({ min: 0, max: 4 }) }) },
);

describe("the bound on being passed over (fairShareBound)", () => {
  it("no job waits more picks than the bound, for any arrivals, priorities, weights and batch sizes", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 5, maxLength: 5 }),
        fc.array(fc.integer({ min: 0, max: 6 }), { minLength: 5, maxLength: 5 }),
        fc.array(stepArb, { maxLength: 250 }),
        (weightList, inFlightList, steps) => {
          const weights = new Map(weightList.map((w, i) => [`acct${i}`, w]));
          const inFlight = new Map(inFlightList.map((n, i) => [`acct${i}`, n]));
          let state: FairShareState = fairShareState(inFlight, weights);
          let waiting: WaitingJob[] = [];
          let picks = 0;
          let clock = 0;
          const arrived = new Map<string, { at: number; debt: number }>();
          const pickedAt = new Map<string, number>();
          const order: WaitingJob[] = [];
          for (const step of [...steps, { pick: 10_000 }]) {
            if ("arrive" in step) {
              const account = `acct${step.arrive.account}`;
              const j = job(`j${clock}`, account, clock++, step.arrive.priority);
              waiting.push(j);
              arrived.set(j.id, { at: picks, debt: debtOf(state, account, weightOf(weights, account)) });
            } else {
              const r = pickNext({ waiting, n: step.pick, weights, state });
              state = r.state;
              for (const p of r.picked) {
                pickedAt.set(p.id, ++picks);
                order.push(p);
              }
              const gone = new Set(r.picked.map((p) => p.id));
              waiting = waiting.filter((w) => !gone.has(w.id));
            }
          }
          for (const j of order) {
            const { at, debt } = arrived.get(j.id)!;
            const pickedIndex = pickedAt.get(j.id)!;
            // What happened meanwhile, counted after the fact.
            const between = order.slice(at, pickedIndex - 1);
            const accounts = new Set([j.account!, ...between.map((p) => p.account!)]);
            const totalWeight = [...accounts].reduce((s, a) => s + weightOf(weights, a), 0);
            const bound = fairShareBound({
              ahead: between.filter((p) => p.account === j.account).length,
              weight: weightOf(weights, j.account!),
              totalWeight,
              accounts: accounts.size,
              debt,
            });
            expect(pickedIndex - at).toBeLessThanOrEqual(bound + 1e-9);
          }
          // The debt is at most 1 once an account has been served since the rebuild.
          for (const account of new Set(order.map((j) => j.account!)))
            expect(debtOf(state, account, weightOf(weights, account))).toBeLessThanOrEqual(1 + 1e-9);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("as time: a job behind another account's 10,000-job burst waits about one job, not the burst", () => {
    // 10 slots, 30 s jobs, a 1 s tick: B's job is next in line (ahead 0), A and B have weight 1.
    const picks = fairShareBound({ ahead: 0, weight: 1, totalWeight: 2, accounts: 2 });
    expect(picks).toBe(3);
    expect(waitBoundSeconds(picks, 10, 30, 1)).toBe(32);
    // With C (weight 2) also busy, B's 5th job: (4 + 1) x 4 / 1 + 2 = 22 picks, 3 rounds of 31 s.
    const fifth = fairShareBound({ ahead: 4, weight: 1, totalWeight: 4, accounts: 3 });
    expect(fifth).toBe(22);
    expect(waitBoundSeconds(fifth, 10, 30, 1)).toBe(94);
  });

  it("as time, simulated: no job waits longer than waitBoundSeconds of its fairShareBound", () => {
    // A controller that ticks every `tick` seconds and fills the free slots of a window of `slots`
    // jobs, each running 1..jobSeconds seconds; jobs arrive at random times, accounts, priorities.
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 3, maxLength: 3 }),
        fc.array(
          fc.record({
            at: fc.integer({ min: 0, max: 200 }),
            account: fc.integer({ min: 0, max: 2 }),
            priority: fc.constantFrom<Priority>("high", "normal", "low"),
            seconds: fc.integer({ min: 1, max: 20 }),
          }),
          { maxLength: 150 },
        ),
        fc.integer({ min: 0, max: 200 }),
        (slots, jobSeconds, tick, weightList, later, burst) => {
          // Account 0 starts with a burst; the others' jobs come later.
          const arrivals = [
            ...Array.from({ length: burst }, () => ({
              at: 0,
              account: 0,
              priority: "normal" as Priority,
              seconds: jobSeconds,
            })),
            ...later,
          ];
          const weights = new Map(weightList.map((w, i) => [`acct${i}`, w]));
          const runFor = new Map<string, number>();
          const jobs = arrivals
            .map((a, i) => {
              const j = job(`j${i}`, `acct${a.account}`, a.at * 1000 + i, a.priority);
              runFor.set(j.id, Math.min(a.seconds, jobSeconds));
              return j;
            })
            .sort((a, b) => a.createdAt - b.createdAt);
          let state = fairShareState();
          let waiting: WaitingJob[] = [];
          let running: number[] = []; // end times
          let picks = 0;
          let next = 0;
          const arrivedAt = new Map<string, { t: number; picks: number; debt: number }>();
          const submitted = new Map<string, { t: number; index: number }>();
          const order: WaitingJob[] = [];
          for (let t = 0; next < jobs.length || waiting.length > 0; t++) {
            running = running.filter((end) => end > t);
            while (next < jobs.length && Math.floor(jobs[next]!.createdAt / 1000) <= t) {
              const j = jobs[next++]!;
              waiting.push(j);
              const w = weightOf(weights, j.account!);
              arrivedAt.set(j.id, { t, picks, debt: debtOf(state, j.account!, w) });
            }
            if (t % tick !== 0) continue;
            const r = pickNext({ waiting, n: slots - running.length, weights, state });
            state = r.state;
            for (const p of r.picked) {
              submitted.set(p.id, { t, index: ++picks });
              order.push(p);
              running.push(t + runFor.get(p.id)!);
            }
            const gone = new Set(r.picked.map((p) => p.id));
            waiting = waiting.filter((w) => !gone.has(w.id));
          }
          for (const j of order) {
            const arrival = arrivedAt.get(j.id)!;
            const { t, index } = submitted.get(j.id)!;
            const between = order.slice(arrival.picks, index - 1);
            const accounts = new Set([j.account!, ...between.map((p) => p.account!)]);
            const bound = fairShareBound({
              ahead: between.filter((p) => p.account === j.account).length,
              weight: weightOf(weights, j.account!),
              totalWeight: [...accounts].reduce((s, a) => s + weightOf(weights, a), 0),
              accounts: accounts.size,
              debt: arrival.debt,
            });
            expect(t - arrival.t).toBeLessThanOrEqual(waitBoundSeconds(bound, slots, jobSeconds, tick));
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
