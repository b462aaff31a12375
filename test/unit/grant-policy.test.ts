// decideGrants as a table: each row one endpoint's window, what it has in flight, the workers up
// and the jobs that wait; the jobs given a slot, in order, and when to look again if none may go.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fairShareState, pickNext, type Priority, type WaitingJob } from "../../src/mediajob/fair-share.js";
import { decideGrants, lowRoom, RUN_LIMIT, type GrantInput } from "../../src/mediajob/grant-policy.js";
import { WaitingQueue } from "../../src/mediajob/waiting-queue.js";
import { freeSlots, initialWindow } from "../../src/mediajob/window.js";

const NOW = Date.parse("2026-01-01T01:00:00.000Z");

/** Job `id` of `account`, created `age` seconds before NOW. */
const job = (id: string, account: string, age: number, priority: Priority = "normal"): WaitingJob => ({
  id,
  account,
  priority,
  createdAt: NOW - age * 1000,
});

/** The jobs of one account queued as the dispatcher queues them, whatever order they are listed in. */
const queueOf = (jobs: WaitingJob[]): WaitingQueue => {
  const q = new WaitingQueue();
  for (const j of jobs) q.add(j);
  return q;
};

/**
 * An endpoint with room for 2 more of ours, nothing in flight, no worker up, nobody waiting; the
 * waiting jobs listed per account in any order.
 */
const endpoint = (
  o: Partial<Omit<GrantInput, "waiting">> & { waiting?: WaitingJob[][] } = {},
): GrantInput => ({
  nowMs: NOW,
  window: initialWindow(),
  ceiling: 2,
  used: { normal: 0, low: 0 },
  recentGrants: [],
  workersIdle: 0,
  workersRunning: 0,
  foreign: 0,
  fair: fairShareState(),
  ...o,
  waiting: (o.waiting ?? []).map(queueOf),
});

interface Row {
  name: string;
  input: GrantInput;
  granted: string[];
  recheckInMs?: number;
}

const rows: Row[] = [
  {
    name: "free slots go to the oldest jobs of one account",
    input: endpoint({ waiting: [[job("a2", "a", 5), job("a1", "a", 10), job("a3", "a", 1)]] }),
    granted: ["a1", "a2"],
  },
  {
    name: "a full window grants nothing, and nothing needs a timer (a finished job pumps)",
    input: endpoint({ used: { normal: 2, low: 0 }, waiting: [[job("a1", "a", 10)]] }),
    granted: [],
  },
  {
    name: "two accounts share the slots even when one has the older backlog",
    input: endpoint({
      waiting: [[job("a1", "a", 30), job("a2", "a", 20)], [job("b1", "b", 1)]],
    }),
    granted: ["a1", "b1"],
  },
  {
    name: "an account already in flight waits behind one that has nothing running",
    input: endpoint({
      ceiling: 3,
      used: { normal: 2, low: 0 },
      fair: fairShareState(new Map([["a", 2]])),
      waiting: [[job("a3", "a", 30)], [job("b1", "b", 1)]],
    }),
    granted: ["b1"],
  },
  {
    name: "high priority goes before an older normal job of the same account",
    input: endpoint({ ceiling: 1, waiting: [[job("old", "a", 60), job("urgent", "a", 1, "high")]] }),
    granted: ["urgent"],
  },
  {
    name: "a low-priority job never holds a normal one back, even when it is older",
    input: endpoint({
      ceiling: 1,
      workersIdle: 5,
      waiting: [[job("batch", "a", 600, "low"), job("n1", "a", 1)]],
    }),
    granted: ["n1"],
  },
  {
    name: "low-priority jobs take only the workers already up (they never scale the endpoint)",
    input: endpoint({
      ceiling: 10,
      workersIdle: 1,
      waiting: [[job("l1", "a", 3, "low"), job("l2", "a", 2, "low")]],
    }),
    granted: ["l1"],
  },
  {
    name: "no worker up: low-priority jobs wait however wide the window",
    input: endpoint({ ceiling: 10, waiting: [[job("l1", "a", 3, "low")]] }),
    granted: [],
  },
  {
    name: "the normal jobs granted in the same pick take the workers first",
    input: endpoint({
      ceiling: 10,
      workersIdle: 2,
      waiting: [[job("n1", "a", 1), job("l1", "a", 9, "low"), job("l2", "a", 8, "low")]],
    }),
    granted: ["n1", "l1"],
  },
  {
    name: "work at the endpoint that is not ours takes the workers from low-priority jobs",
    input: endpoint({ ceiling: 10, workersRunning: 2, foreign: 2, waiting: [[job("l1", "a", 3, "low")]] }),
    granted: [],
  },
  {
    name: "a 429's Retry-After holds every grant and says when to look again",
    input: endpoint({
      window: { limit: 1, notBefore: NOW + 4_000, throttledAt: NOW - 1_000 },
      waiting: [[job("a1", "a", 10)]],
    }),
    granted: [],
    recheckInMs: 4_000,
  },
  {
    name: "RunPod's /run limit: 900 grants in the last 10 s hold the next until the oldest leaves",
    input: endpoint({
      ceiling: 5000,
      recentGrants: Array.from({ length: RUN_LIMIT }, (_, k) => NOW - 7_000 + k),
      waiting: [[job("a1", "a", 10)]],
    }),
    granted: [],
    recheckInMs: 3_000,
  },
  {
    name: "near the /run limit only what is left of it is granted",
    input: endpoint({
      ceiling: 5000,
      recentGrants: Array.from({ length: RUN_LIMIT - 1 }, () => NOW - 1_000),
      waiting: [[job("a1", "a", 10), job("a2", "a", 5)]],
    }),
    granted: ["a1"],
  },
];

describe("decideGrants", () => {
  for (const row of rows)
    it(row.name, () => {
      const d = decideGrants(row.input);
      expect(d.granted.map((j) => j.id)).toEqual(row.granted);
      expect(d.recheckInMs).toBe(row.recheckInMs);
    });

  it("carries the fair-share tags to the next pick: the account served waits its turn", () => {
    const first = decideGrants(
      endpoint({ ceiling: 1, waiting: [[job("a1", "a", 9), job("a2", "a", 8)], [job("b1", "b", 1)]] }),
    );
    const next = decideGrants(
      endpoint({
        ceiling: 2,
        used: { normal: 1, low: 0 },
        fair: first.fair,
        waiting: [[job("a2", "a", 8)], [job("b1", "b", 1)]],
      }),
    );
    expect([...first.granted, ...next.granted].map((j) => j.id)).toEqual(["a1", "b1"]);
  });
});

describe("lowRoom", () => {
  it("is the workers up less the normal jobs, the foreign work and the low-priority jobs there", () => {
    expect(lowRoom({ used: { normal: 1, low: 1 }, workersIdle: 2, workersRunning: 2, foreign: 1 })).toBe(1);
    expect(lowRoom({ used: { normal: 5, low: 0 }, workersIdle: 2, workersRunning: 0, foreign: 0 })).toBe(0);
  });
});

/**
 * The decision as it was made before queues kept their order: every account's whole list
 * partitioned, sorted and cut (first `free` normal jobs, first `lowFree` low ones). The policy
 * reading only the front of ordered queues must decide the same for any waiting jobs.
 */
function scanningDecision(i: GrantInput, lists: WaitingJob[][]): string[] {
  const RANK = { high: 0, normal: 1, low: 2 } as const;
  const order = (a: WaitingJob, b: WaitingJob) =>
    RANK[a.priority ?? "normal"] - RANK[b.priority ?? "normal"] || a.createdAt - b.createdAt;
  const firstOf = (jobs: WaitingJob[], n: number) => [...jobs].sort(order).slice(0, n);
  const byQueues = decideGrants({ ...i, waiting: [] });
  if (byQueues.recheckInMs !== undefined) return [];
  const free = Math.min(
    freeSlots(i.window, i.ceiling, i.used.normal + i.used.low, i.nowMs),
    RUN_LIMIT - i.recentGrants.length,
  );
  if (free <= 0) return [];
  const normal = lists.flatMap((l) =>
    firstOf(
      l.filter((j) => j.priority !== "low"),
      free,
    ),
  );
  const first = normal.length
    ? pickNext({ waiting: normal, n: free, state: i.fair })
    : { picked: [], state: i.fair };
  const lowFree = Math.min(
    free - first.picked.length,
    lowRoom({ ...i, used: { normal: i.used.normal + first.picked.length, low: i.used.low } }),
  );
  const low =
    lowFree > 0
      ? lists.flatMap((l) =>
          firstOf(
            l.filter((j) => j.priority === "low"),
            lowFree,
          ),
        )
      : [];
  const second = low.length ? pickNext({ waiting: low, n: lowFree, state: first.state }).picked : [];
  return [...first.picked, ...second].map((j) => j.id);
}

describe("decideGrants on ordered queues", () => {
  it("grants what a scan of every waiting job would, for any jobs, priorities, ties and room", () => {
    const waitingJob = fc.record({
      account: fc.constantFrom("a", "b", "c"),
      priority: fc.constantFrom<Priority>("high", "normal", "low"),
      // Few distinct ages: jobs created in the same second tie, as creationTimestamps do.
      age: fc.integer({ min: 0, max: 4 }),
    });
    fc.assert(
      fc.property(
        fc.array(waitingJob, { maxLength: 40 }),
        fc.integer({ min: 0, max: 12 }),
        fc.integer({ min: 0, max: 6 }),
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 0, max: 8 }),
        (specs, ceiling, normalUsed, lowUsed, workersIdle) => {
          const jobs = specs.map((s, k) => job(`j${k}`, s.account, s.age, s.priority));
          const lists = ["a", "b", "c"]
            .map((a) => jobs.filter((j) => j.account === a))
            .filter((l) => l.length > 0);
          const input = endpoint({
            ceiling,
            used: { normal: normalUsed, low: lowUsed },
            workersIdle,
            waiting: lists,
          });
          expect(decideGrants(input).granted.map((j) => j.id)).toEqual(scanningDecision(input, lists));
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("decideGrants on a backlog", () => {
  it("reads only the front of each account's queue: a slot freed does not cost a pass over the backlog", () => {
    let read = 0;
    const counted = (q: WaitingQueue): Iterable<WaitingJob> => ({
      *[Symbol.iterator]() {
        for (const j of q) {
          read++;
          yield j;
        }
      },
    });
    const backlog = (account: string) =>
      queueOf(Array.from({ length: 10_000 }, (_, k) => job(`${account}${k}`, account, k % 60)));
    const d = decideGrants({ ...endpoint(), waiting: [counted(backlog("a")), counted(backlog("b"))] });
    expect(d.granted).toHaveLength(2);
    // Each account's first two (the free slots) and the one after them, which says there are more.
    expect(read).toBeLessThanOrEqual(2 * 3);
  });
});
