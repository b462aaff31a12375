// Which waiting MediaJobs to submit next when slots of an endpoint's in-flight window free:
// weighted fair share between accounts, then priority, then age within an account.
//
// Between accounts this is start-time fair queueing (Goyal, Vin and Cheng, SIGCOMM 1996) with
// every job counted as one unit: each account has a finish tag F, the scheduler a virtual time V.
// The next slot goes to the account with waiting jobs whose start tag max(F, V) is smallest; then
// V becomes that start tag and F grows by 1 / weight. An account with weight 2 therefore gets two
// slots for every one of an account with weight 1 while both have work, an account that had no
// work cannot bank credit (its tag is raised to V), and no account starves (fairShareBound).
//
// Pure: the caller keeps the FairShareState per endpoint in memory. After a restart or a leader
// change it is rebuilt from the jobs in flight (fairShareState), which the informer cache holds.

export type Priority = "high" | "normal" | "low";

/** The account of jobs without spec.account: they share it. Not a valid account name. */
export const DEFAULT_ACCOUNT = "";

export interface WaitingJob {
  id: string;
  /** spec.account; absent or empty: the default account. */
  account?: string;
  /** spec.priority; absent: normal. */
  priority?: Priority;
  /** Creation time, ms since the epoch. */
  createdAt: number;
}

export interface FairShareState {
  virtualTime: number;
  /** Finish tag per account; accounts whose tag is at or below virtualTime are left out. */
  finish: ReadonlyMap<string, number>;
}

/** Which priority goes first: the lower rank. */
export const PRIORITY_RANK: Record<Priority, number> = { high: 0, normal: 1, low: 2 };

const accountOf = (job: WaitingJob): string => job.account ?? DEFAULT_ACCOUNT;

/** Per-account weights, read one account at a time (a map, or weights looked up as they are asked for). */
export type AccountWeights = Pick<ReadonlyMap<string, number>, "get">;

/**
 * Weights from the per-account overrides first, then `fallback` (the weight of the account's
 * plan), else 1. Read when asked: a plan that changes changes the weight at the next pick.
 */
export function accountWeights(
  overrides: ReadonlyMap<string, number>,
  fallback: (account: string) => number | undefined,
): AccountWeights {
  return {
    get: (account) => overrides.get(account) ?? (account === DEFAULT_ACCOUNT ? undefined : fallback(account)),
  };
}

/** An account's weight: its entry in `weights`, else 1. Weights that are not positive count as 1. */
export function weightOf(weights: AccountWeights | undefined, account: string): number {
  const w = weights?.get(account);
  return w !== undefined && Number.isFinite(w) && w > 0 ? w : 1;
}

/**
 * A state rebuilt from the jobs in flight per account: an account holding c slots starts c / weight
 * ahead, so one that had many jobs in flight when the previous leader stopped does not get more
 * slots right after.
 */
export function fairShareState(
  inFlight: ReadonlyMap<string, number> = new Map(),
  weights?: AccountWeights,
): FairShareState {
  const finish = new Map<string, number>();
  for (const [account, n] of inFlight) if (n > 0) finish.set(account, n / weightOf(weights, account));
  return { virtualTime: 0, finish };
}

/** Within an account: high before normal before low, then oldest first, then by id. */
function compareWithinAccount(a: WaitingJob, b: WaitingJob): number {
  return (
    PRIORITY_RANK[a.priority ?? "normal"] - PRIORITY_RANK[b.priority ?? "normal"] ||
    a.createdAt - b.createdAt ||
    (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  );
}

export interface PickInput {
  waiting: readonly WaitingJob[];
  /** How many to pick: the free slots of the window. */
  n: number;
  weights?: AccountWeights;
  /** The state carried from the previous pick; absent: rebuilt from `inFlight`. */
  state?: FairShareState;
  /** Our jobs in flight per account, for a rebuilt state. */
  inFlight?: ReadonlyMap<string, number>;
}

export interface PickResult {
  /** In the order to submit them. */
  picked: WaitingJob[];
  state: FairShareState;
}

export function pickNext(input: PickInput): PickResult {
  const state = input.state ?? fairShareState(input.inFlight, input.weights);
  const queues = new Map<string, WaitingJob[]>();
  for (const job of input.waiting) {
    const q = queues.get(accountOf(job));
    if (q === undefined) queues.set(accountOf(job), [job]);
    else q.push(job);
  }
  for (const q of queues.values()) q.sort(compareWithinAccount);
  const heads = new Map<string, number>([...queues.keys()].map((a) => [a, 0]));
  const finish = new Map(state.finish);
  let virtualTime = state.virtualTime;
  const picked: WaitingJob[] = [];
  while (picked.length < input.n) {
    let best: { account: string; start: number; head: WaitingJob } | undefined;
    for (const [account, q] of queues) {
      const head = q[heads.get(account) as number];
      if (head === undefined) continue;
      const start = Math.max(finish.get(account) ?? virtualTime, virtualTime);
      // Ties: the account whose next job is older, then by name, so the order is reproducible.
      if (
        best === undefined ||
        start < best.start ||
        (start === best.start &&
          (head.createdAt < best.head.createdAt ||
            (head.createdAt === best.head.createdAt && account < best.account)))
      )
        best = { account, start, head };
    }
    if (best === undefined) break;
    picked.push(best.head);
    heads.set(best.account, (heads.get(best.account) as number) + 1);
    virtualTime = best.start;
    finish.set(best.account, best.start + 1 / weightOf(input.weights, best.account));
  }
  // Tags at or below the virtual time say nothing max(F, V) does not: drop them, so the state
  // holds only accounts that were served ahead of the others.
  for (const [account, f] of finish) if (f <= virtualTime) finish.delete(account);
  return { picked, state: { virtualTime, finish } };
}

/** How far ahead of the others an account was served, in its own slots, when a job arrives. */
export function debtOf(state: FairShareState, account: string, weight: number): number {
  return Math.max(0, ((state.finish.get(account) ?? state.virtualTime) - state.virtualTime) * weight);
}

export interface BoundInput {
  /** Jobs of the same account picked before this one (older or higher priority, or later high ones). */
  ahead: number;
  /** The account's weight. */
  weight: number;
  /** Sum of the weights of every account with waiting jobs meanwhile, this one included. */
  totalWeight: number;
  /** How many such accounts, this one included. */
  accounts: number;
  /** debtOf the account when the job arrived: at most 1 once the state is carried, up to its
   * in-flight count right after a rebuild. */
  debt?: number;
}

/**
 * The most picks (slots freed) from a job's arrival until it is picked, itself included:
 * ahead + 1 + (ahead + debt) × (totalWeight − weight) / weight + (accounts − 1).
 *
 * Why: picks are made in order of start tags, which never decrease. The account's start tags from
 * the arrival on are at most V0 + debt / weight, then grow by 1 / weight, so the job's tag is at
 * most V0 + (ahead + debt) / weight. Another account b's tags from then on are at least V0 and
 * 1 / weight_b apart, so at most (ahead + debt) × weight_b / weight + 1 of its jobs come first.
 * With debt ≤ 1 this is at most (ahead + 1) × totalWeight / weight + accounts − 1.
 */
export function fairShareBound(b: BoundInput): number {
  const debt = b.debt ?? 1;
  return b.ahead + 1 + ((b.ahead + debt) * (b.totalWeight - b.weight)) / b.weight + (b.accounts - 1);
}

/**
 * The longest a job waits in Kubernetes before it is submitted, seconds, while the window holds
 * `slots` jobs and waiting jobs keep it full: the controller sees a job's arrival and a freed slot
 * within one tick, and a slot frees within `jobSeconds` (the longest job) of being filled. So from
 * the first tick after the arrival every slot is filled again at least once every
 * jobSeconds + tickSeconds, and the `picks`-th pick (fairShareBound's answer) comes within
 * tick + ceil(picks / slots) × (jobSeconds + tick).
 */
export function waitBoundSeconds(
  picks: number,
  slots: number,
  jobSeconds: number,
  tickSeconds: number,
): number {
  return tickSeconds + Math.ceil(picks / Math.max(1, slots)) * (jobSeconds + tickSeconds);
}
