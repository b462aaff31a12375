// One endpoint's dispatch state as the Dispatcher (dispatcher.ts) keeps it, and the values its gate
// step is worked out in before anything is put in place: the endpoint's numbers, a grant round
// on copies of the grants, and the waiting list a job asking for a slot would join.
import type { FairShareState, WaitingJob } from "../../mediajob/fair-share.js";
import type { GrantUse } from "../../mediajob/grant-policy.js";
import type { SlotFact } from "../../mediajob/queued.js";
import type { WaitingQueue } from "../../mediajob/waiting-queue.js";
import type { EndpointCapacity, WindowState } from "../../mediajob/window.js";

/** The endpoint's numbers a window and a grant are sized from (the GpuEndpoint's spec and status). */
export interface EndpointNumbers {
  /** The endpoint's capacity at the last look (GpuEndpoint reconcile), and our own count then. */
  capacity?: EndpointCapacity;
  ownAtHealth: number;
  maxInFlight?: number;
  /** The workers /health showed up at the last look: what low-priority jobs may take. */
  workersUp: { idle: number; running: number };
}

/** What a grant round changes of an endpoint: worked out on copies (round()), then put in place. */
export interface Round {
  /** Jobs given a slot whose submission the cache does not show yet, with when. */
  granted: Map<string, number>;
  low: Set<string>;
  recentGrants: number[];
  fair: FairShareState;
  /** The jobs the round gave a slot, in the order they were picked. */
  picked: WaitingJob[];
  recheckInMs?: number;
}

/** What gate() does for one job, worked out from the state without changing it (consider()). */
export interface GateStep {
  id: string;
  key: string;
  /** The endpoint's state: a new one, not yet kept, when the dispatcher has none. */
  d: EndpointDispatch;
  numbers: EndpointNumbers;
  /** The job is in flight or granted already: nothing but the numbers changes. */
  holds: boolean;
  /** The job joins the endpoint's waiting jobs (absent: it waits there already). */
  join?: { job: WaitingJob; position: number };
  /** The grant round that follows (absent: not leading). */
  round?: Round;
  fact: SlotFact;
}

export class EndpointDispatch implements EndpointNumbers {
  /** Jobs Processing at this endpoint in the cache: submitted and not finished. */
  readonly inFlight = new Set<string>();
  /** Jobs given a slot whose submission the cache does not show yet, with when. */
  granted = new Map<string, number>();
  /** Jobs that asked and wait, by account, each account's in the order slots go to them. */
  readonly waiting = new Map<string, WaitingQueue>();
  window?: WindowState;
  fair?: FairShareState;
  capacity?: EndpointCapacity;
  ownAtHealth = 0;
  /**
   * The most jobs we had in flight since the look before last, and since the last one: the
   * /health report a look uses was fetched in that time (it is shared for up to a tick), so our
   * count when it was read is at most this, and what it counts beyond this is surely not ours.
   */
  ownMaxBefore = 0;
  ownMax = 0;
  maxInFlight?: number;
  /** When each grant of the last RUN_LIMIT_WINDOW_MS was made, oldest first. */
  recentGrants: number[] = [];
  /** Account of each in-flight job, for a fair-share state rebuilt from them. */
  readonly accountOf = new Map<string, string>();
  /** Jobs in flight or granted that are low priority (policy.lowPriority: they never scale the endpoint). */
  low = new Set<string>();
  workersUp = { idle: 0, running: 0 };
  holdTimer?: NodeJS.Timeout;
}

/** Our jobs in flight or granted at an endpoint, normal/high and low priority. */
export function usedOf(
  inFlight: ReadonlySet<string>,
  granted: ReadonlyMap<string, number>,
  low: ReadonlySet<string>,
): GrantUse {
  let all = inFlight.size;
  for (const key of granted.keys()) if (!inFlight.has(key)) all++;
  let lowUsed = 0;
  for (const key of low) if (inFlight.has(key) || granted.has(key)) lowUsed++;
  return { normal: all - lowUsed, low: lowUsed };
}

/** The waiting jobs, one list per account in its order, with `joining` arrived in its account's. */
export function waitingWith(
  waiting: ReadonlyMap<string, WaitingQueue>,
  joining?: WaitingJob,
): Iterable<WaitingJob>[] {
  const lists: Iterable<WaitingJob>[] = [];
  let joined = joining === undefined;
  for (const [account, q] of waiting) {
    if (!joined && account === joining!.account) {
      lists.push(q.withArriving(joining!));
      joined = true;
    } else lists.push(q);
  }
  if (!joined) lists.push([joining!]);
  return lists;
}

/** The workers up at the last look, and the work there that is not ours. */
export function roomInputs(n: EndpointNumbers): {
  workersIdle: number;
  workersRunning: number;
  foreign: number;
} {
  const foreign = n.capacity ? Math.max(0, n.capacity.inQueue + n.capacity.inProgress - n.ownAtHealth) : 0;
  return { workersIdle: n.workersUp.idle, workersRunning: n.workersUp.running, foreign };
}
