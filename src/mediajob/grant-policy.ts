// The dispatcher's grant decision, pure: given one endpoint's window, the jobs that wait for it
// (per account, with priority and age), what it has in flight and the workers up, which jobs get a
// slot now and, when none may, when to look again. The Dispatcher (src/controller/dispatch) holds
// the state and the timers and applies the decision; nothing here reads a clock or the cache.
import {
  pickNext,
  type AccountWeights,
  type FairShareState,
  type Priority,
  type WaitingJob,
} from "./fair-share.js";
import { freeSlots, lowPriorityRoom, type WindowState } from "./window.js";

/** RunPod allows 1,000 /run per 10 s per endpoint; the dispatcher grants at most 900, for retries. */
export const RUN_LIMIT = 900;
export const RUN_LIMIT_WINDOW_MS = 10_000;

/** Our jobs in flight or granted at an endpoint, normal/high and low priority. */
export interface GrantUse {
  normal: number;
  low: number;
}

export interface GrantInput {
  nowMs: number;
  window: WindowState;
  /** The most jobs the endpoint may have in flight (window.ts, ceiling). */
  ceiling: number;
  used: GrantUse;
  /** When each grant of the last RUN_LIMIT_WINDOW_MS was made, oldest first. */
  recentGrants: readonly number[];
  /** The waiting jobs, one list per account (any order within it). */
  waiting: Iterable<Iterable<WaitingJob>>;
  /** The workers up at the last /health look and the work there that is not ours. */
  workersIdle: number;
  workersRunning: number;
  foreign: number;
  fair: FairShareState;
  weights?: AccountWeights;
}

export interface GrantDecision {
  /** The jobs given a slot, in the order they were picked. */
  granted: WaitingJob[];
  fair: FairShareState;
  /** No slot may go now, but one may then (Retry-After, or the /run limit's window moving on). */
  recheckInMs?: number;
}

/**
 * Normal and high priority jobs of every account first, by weighted fair share: a low-priority
 * job never holds one back. Then low-priority jobs, only into the room the workers already up
 * leave them (they never make the endpoint scale up). At most RUN_LIMIT grants per window.
 */
export function decideGrants(i: GrantInput): GrantDecision {
  const paced = RUN_LIMIT - i.recentGrants.length;
  const free = Math.min(freeSlots(i.window, i.ceiling, i.used.normal + i.used.low, i.nowMs), paced);
  if (free <= 0) {
    if (i.nowMs < i.window.notBefore)
      return { granted: [], fair: i.fair, recheckInMs: i.window.notBefore - i.nowMs };
    if (paced <= 0)
      return { granted: [], fair: i.fair, recheckInMs: i.recentGrants[0]! + RUN_LIMIT_WINDOW_MS - i.nowMs };
    return { granted: [], fair: i.fair };
  }
  const normal: WaitingJob[] = [];
  const low: WaitingJob[][] = [];
  for (const q of i.waiting) {
    const [n, l] = partition(q, (j) => j.priority !== "low");
    // Within an account the pick takes at most `free` jobs: only those can come first.
    normal.push(...firstOf(n, free));
    if (l.length) low.push(l);
  }
  const first = pick(normal, free, i.fair, i.weights);
  const lowFree = Math.min(
    free - first.picked.length,
    lowRoom({ ...i, used: { normal: i.used.normal + first.picked.length, low: i.used.low } }),
  );
  if (lowFree <= 0 || low.length === 0) return { granted: first.picked, fair: first.state };
  const second = pick(
    low.flatMap((l) => firstOf(l, lowFree)),
    lowFree,
    first.state,
    i.weights,
  );
  return { granted: [...first.picked, ...second.picked], fair: second.state };
}

/** How many more low-priority jobs the endpoint may take now (window.ts, lowPriorityRoom). */
export function lowRoom(i: Pick<GrantInput, "used" | "workersIdle" | "workersRunning" | "foreign">): number {
  const room = lowPriorityRoom({
    workersIdle: i.workersIdle,
    workersRunning: i.workersRunning,
    normalInFlight: i.used.normal,
    foreign: i.foreign,
  });
  return room - i.used.low;
}

function pick(
  candidates: WaitingJob[],
  n: number,
  fair: FairShareState,
  weights?: AccountWeights,
): { picked: WaitingJob[]; state: FairShareState } {
  if (candidates.length === 0 || n <= 0) return { picked: [], state: fair };
  return pickNext({ waiting: candidates, n, ...(weights && { weights }), state: fair });
}

const RANK: Record<Priority, number> = { high: 0, normal: 1, low: 2 };
const byPriorityThenAge = (a: WaitingJob, b: WaitingJob): number =>
  RANK[a.priority ?? "normal"] - RANK[b.priority ?? "normal"] || a.createdAt - b.createdAt;

/** The first `n` jobs by priority then age: a scan for the usual one or few slots, else a sort. */
function firstOf(jobs: Iterable<WaitingJob>, n: number): WaitingJob[] {
  const all = [...jobs];
  if (n >= 8 || n >= all.length) return all.sort(byPriorityThenAge).slice(0, n);
  const best: WaitingJob[] = [];
  for (const job of all) {
    if (best.length < n) {
      best.push(job);
      best.sort(byPriorityThenAge);
    } else if (byPriorityThenAge(job, best[n - 1]!) < 0) {
      best[n - 1] = job;
      best.sort(byPriorityThenAge);
    }
  }
  return best;
}

/** The jobs that pass `test`, and the others. */
function partition<T>(items: Iterable<T>, test: (item: T) => boolean): [T[], T[]] {
  const yes: T[] = [];
  const no: T[] = [];
  for (const item of items) (test(item) ? yes : no).push(item);
  return [yes, no];
}
