// The dispatcher's grant decision, pure: given one endpoint's window, the jobs that wait for it
// (per account, with priority and age), what it has in flight and the workers up, which jobs get a
// slot now and, when none may, when to look again. The Dispatcher (src/controller/dispatch) holds
// the state and the timers and applies the decision; nothing here reads a clock or the cache.
import { pickNext, type AccountWeights, type FairShareState, type WaitingJob } from "./fair-share.js";
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
  /**
   * The waiting jobs, one list per account, each in the order slots go to them: priority, then
   * age, then arrival (a WaitingQueue's order). Only the front of each is read.
   */
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
  // Within an account the pick takes at most `free` jobs, and its normal and high priority jobs
  // come first in its order: its first `free` of them are the only ones the pick can take.
  const normal: WaitingJob[] = [];
  const rest: Array<{ next: IteratorResult<WaitingJob>; more: Iterator<WaitingJob> }> = [];
  for (const q of i.waiting) {
    const more = q[Symbol.iterator]();
    let next = more.next();
    for (let taken = 0; !next.done && next.value.priority !== "low" && taken < free; taken++) {
      normal.push(next.value);
      next = more.next();
    }
    rest.push({ next, more });
  }
  const first = pick(normal, free, i.fair, i.weights);
  const lowFree = Math.min(
    free - first.picked.length,
    lowRoom({ ...i, used: { normal: i.used.normal + first.picked.length, low: i.used.low } }),
  );
  if (lowFree <= 0) return { granted: first.picked, fair: first.state };
  // Room is left only when no account offered `free` normal jobs (the pick takes as many as it is
  // offered, up to `free`), so each account's order was read up to its first low-priority job or
  // its end: what is left of it is its low-priority jobs, oldest first.
  const low: WaitingJob[] = [];
  for (const { more, ...from } of rest)
    for (let next = from.next, taken = 0; !next.done && taken < lowFree; next = more.next(), taken++)
      low.push(next.value);
  if (low.length === 0) return { granted: first.picked, fair: first.state };
  const second = pick(low, lowFree, first.state, i.weights);
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
