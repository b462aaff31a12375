// Fair share under chaos: two more accounts, each creating a burst of jobs at once at a random
// point of the run, beside the run's own jobs (which have no account: the default account). The
// invariant: no job waits past the bound of docs/design.md ("Fair share", the bound on a waiting
// job's age), from its creation to its first submission, computed with the run's own numbers
// and lengthened by the outages the run injected while the job waited. The customers on plans
// (plans.ts) compete too, but their jobs wait on their plan's limits by design, so their own waits
// are not checked against the bound.
//
// Two more patterns join the bursts (docs/reliability.md, "Chaos"):
//  - low priority: a burst of `priority: low` jobs of one account, followed at once by normal jobs
//    of another, on the endpoint that keeps a worker warm (minWorkers 1). Low jobs take only
//    workers /health shows up and free, so the normal jobs must not wait behind them: they are
//    checked against the same bound as every job. The low jobs' own waits are not (they wait for
//    a free worker by design), but they must all end, as every job of the run must;
//  - leader start with a backlog: a burst created right after a leader is killed, while no
//    replica leads (the lease has not expired), so the next leader starts with it waiting. Its jobs
//    are checked against the bound, lengthened by the outage like every job that waited through one.
import type { MediaJob } from "../../src/crds/mediajob.js";
import type { KubeApi } from "../../src/k8s/api.js";
import { fairShareBound, waitBoundSeconds } from "../../src/mediajob/fair-share.js";
import { activateAccount, burstJobs, type BurstJob } from "../bursts.js";
import type { Rng } from "./rng.js";

/** The accounts with bursts; the run's other jobs share the default account. */
const BURST_ACCOUNTS = ["chaos-burst-b", "chaos-burst-c"] as const;
/** The low-priority pattern's accounts: one sends low jobs, the other normal jobs right after. */
export const LOW_PRIORITY_ACCOUNT = "chaos-low";
const AFTER_LOW_ACCOUNT = "chaos-after-low";
/** The account whose burst a new leader finds waiting. */
export const BACKLOG_ACCOUNT = "chaos-backlog";
/** The endpoint the low-priority pattern uses: the run keeps one worker of it warm (minWorkers 1). */
export const LOW_PRIORITY_WORKLOAD = "render" as const;
const PATTERN_ACCOUNTS = [LOW_PRIORITY_ACCOUNT, AFTER_LOW_ACCOUNT, BACKLOG_ACCOUNT] as const;

export interface PlannedBurst {
  account: string;
  /** When to create it: the share of the run's jobs terminal by then. */
  atProgress: number;
  jobs: BurstJob[];
}

/** One burst per account, of `size` single jobs each, at a random point of the first half. */
export function planBursts(rng: Rng, size: number): PlannedBurst[] {
  return BURST_ACCOUNTS.map((account, a) => ({
    account,
    atProgress: rng.between(0.05, 0.5),
    jobs: burstJobs(account, size, (i) => ({
      name: `burst-${"bc"[a]}-${String(i).padStart(5, "0")}`,
      spec: { workload: rng.pick(["asr", "tts", "render"] as const), maxAttempts: 2, input: { n: i } },
    })),
  }));
}

/**
 * The low-priority pattern: `size` low jobs of one account, then a fifth as many normal jobs of
 * another, both at one random point of the first 40 % (created in that order).
 */
export function planLowPriorityBursts(rng: Rng, size: number): PlannedBurst[] {
  const atProgress = rng.between(0.05, 0.4);
  const job = (prefix: string, low: boolean) => (i: number) => ({
    name: `${prefix}-${String(i).padStart(5, "0")}`,
    spec: {
      workload: LOW_PRIORITY_WORKLOAD,
      maxAttempts: 2,
      input: { n: i },
      ...(low && { priority: "low" as const }),
    },
  });
  return [
    {
      account: LOW_PRIORITY_ACCOUNT,
      atProgress,
      jobs: burstJobs(LOW_PRIORITY_ACCOUNT, size, job("low", true)),
    },
    {
      account: AFTER_LOW_ACCOUNT,
      atProgress,
      jobs: burstJobs(AFTER_LOW_ACCOUNT, Math.max(5, Math.round(size / 5)), job("after-low", false)),
    },
  ];
}

/** The burst a new leader finds waiting: created when a leader is killed (no point of the run). */
export function planBacklogBurst(rng: Rng, size: number): PlannedBurst {
  return {
    account: BACKLOG_ACCOUNT,
    atProgress: Infinity,
    jobs: burstJobs(BACKLOG_ACCOUNT, size, (i) => ({
      name: `backlog-${String(i).padStart(5, "0")}`,
      spec: { workload: rng.pick(["asr", "tts", "render"] as const), maxAttempts: 2, input: { n: i } },
    })),
  };
}

/** The burst accounts, active on these prices (as a subscription event would have made them). */
export async function createBurstAccounts(
  api: KubeApi,
  namespace: string,
  priceIds: readonly string[],
): Promise<void> {
  for (const customerId of [...BURST_ACCOUNTS, ...PATTERN_ACCOUNTS])
    await activateAccount(api, namespace, customerId, priceIds);
}

/** An outage the run injected, real ms since the epoch, and how long the stack may need after it. */
export interface Outage {
  from: number;
  to: number;
  /** Time to recover after it (a new leader's lease wait, a relist), ms. */
  recoveryMs: number;
}

export interface WaitBoundSettings {
  /** The fewest slots an endpoint's window has (1: a 429 halves it to 1, workersMax may be lowered to 1). */
  slots: number;
  /** The most an account can have in flight when a new leader rebuilds the tags: the largest window. */
  maxInFlight: number;
  /** The longest a job holds a slot, s: a dropped callback's timeout plus the confirmation window. */
  slotSeconds: number;
  tickSeconds: number;
  outages: Outage[];
  /**
   * Accounts whose jobs wait on their plan's limits by design (held at the cap until an upgrade):
   * counted among the accounts that compete, their own waits not checked.
   */
  heldAccounts?: ReadonlySet<string>;
  /**
   * Accounts of low-priority jobs, which wait for a worker up and free by design: counted among the
   * accounts that compete, their own waits not checked.
   */
  lowPriorityAccounts?: ReadonlySet<string>;
}

export interface WaitCheck {
  checked: number;
  /** Jobs that waited past their bound (or never left Pending). */
  overBound: Array<{ name: string; account: string; waitedSeconds: number; boundSeconds: number }>;
  /** The largest wait over its bound, for the report (under 1 when every job kept it). */
  worstRatio: number;
}

const createdAt = (j: MediaJob) => Date.parse(String(j.metadata.creationTimestamp ?? ""));
/** The first submission (status.startedAt: the first since the last resumption, none here). */
const firstSubmission = (j: MediaJob) => Date.parse(j.status?.startedAt ?? "");

/**
 * Every top-level job's wait against the bound: fairShareBound (its account's jobs still waiting
 * when it came are ahead of it; every account of the run has work; the debt of a rebuilt state
 * is at most the window) turned into seconds by waitBoundSeconds, plus the outages it waited
 * through. Jobs of a pipeline's later steps are left out: their wait starts with their creation
 * by the controller, which is what the run's other invariants check.
 */
export function checkWaitBound(
  jobs: MediaJob[],
  s: WaitBoundSettings,
  isFirstStep: (j: MediaJob) => boolean,
): WaitCheck {
  const top = jobs.filter(isFirstStep);
  const accounts = new Set(top.map((j) => j.spec.account ?? ""));
  const byAccount = new Map<string, MediaJob[]>();
  for (const j of top) {
    const a = j.spec.account ?? "";
    byAccount.set(a, [...(byAccount.get(a) ?? []), j]);
  }
  const overBound: WaitCheck["overBound"] = [];
  let worstRatio = 0;
  let checked = 0;
  const end = Date.now();
  for (const [account, list] of byAccount) {
    if (s.heldAccounts?.has(account) || s.lowPriorityAccounts?.has(account)) continue;
    for (const j of list) {
      const created = createdAt(j);
      if (!Number.isFinite(created)) continue;
      const submitted = firstSubmission(j);
      // Never submitted: a job that ended without running (deleted, failed before) is not a wait.
      if (!Number.isFinite(submitted) && j.status?.phase !== "Pending" && j.status?.phase !== undefined)
        continue;
      const waitedMs = (Number.isFinite(submitted) ? submitted : end) - created;
      const ahead = list.filter((o) => {
        if (o === j) return false;
        const oc = createdAt(o);
        const os = firstSubmission(o);
        return (oc < created || (oc === created && o.metadata.name < j.metadata.name)) && !(os < created);
      }).length;
      const picks = fairShareBound({
        ahead,
        weight: 1,
        totalWeight: accounts.size,
        accounts: accounts.size,
        debt: s.maxInFlight,
      });
      let boundMs = 1000 * waitBoundSeconds(picks, s.slots, s.slotSeconds, s.tickSeconds);
      for (const o of s.outages)
        if (o.from < created + waitedMs && o.to + o.recoveryMs > created)
          boundMs += o.to - o.from + o.recoveryMs;
      checked++;
      worstRatio = Math.max(worstRatio, waitedMs / boundMs);
      if (waitedMs > boundMs)
        overBound.push({
          name: j.metadata.name,
          account: account || "(none)",
          waitedSeconds: Math.round(waitedMs / 1000),
          boundSeconds: Math.round(boundMs / 1000),
        });
    }
  }
  return { checked, overBound, worstRatio: Math.round(worstRatio * 1000) / 1000 };
}
