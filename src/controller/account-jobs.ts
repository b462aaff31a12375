// How many jobs of each billing account run now, for the plans' concurrency cap: kept from the
// MediaJob informer's events (no list per pass), plus the submissions this controller has decided
// on and the cache does not show yet. Without those, two passes of one account that run at the
// same time would both see the count below the cap and both submit.
//
// Also, for the plans' seconds: the billed seconds of each account's ended attempts that the
// usage reporter has not yet counted into its BillingAccount. The account's usedSeconds lags its
// jobs' ends by a reporter pass (longer while the pass waits on the payment provider, or a new
// leader starts); admission adds these, so a job ending at the cap stops the next one at once.
import type { BillingAccountUsage } from "../crds/billingaccount.js";
import type { MediaJob } from "../crds/mediajob.js";
import { attemptIdentifier } from "../billing/identifier.js";
import { objectKey } from "../runtime/informer.js";
import { isCurrentUsage, periodAt, type SubscriptionPeriod } from "../billing/period.js";
import { jobAccount } from "../mediajob/tenancy.js";
import { isPending } from "../mediajob/job.js";

/** One ended attempt's billed seconds, not yet marked counted on its job. */
interface UncountedUse {
  /** Its count id (the reporter's: the meter identifier), as the account's `counting` lists it. */
  id: string;
  seconds: number;
  endedAtMs: number;
}

/** Submitted and not ended: what the provider may be billing. */
const running = (job: MediaJob): boolean => job.status?.phase === "Processing";

export class AccountJobs {
  /** Keys of running jobs by account (jobAccount), from the cache. */
  private readonly byAccount = new Map<string, Set<string>>();
  /** Keys whose submission a pass has planned, by account, until the cache shows the job running. */
  private readonly reserved = new Map<string, Set<string>>();
  /** Ended attempts not yet counted into their account, by account (status.usage.account) and key. */
  private readonly uncounted = new Map<string, Map<string, UncountedUse[]>>();

  /** An informer event: the job's key counted where its current state puts it, its uncounted seconds kept. */
  observe(event: "add" | "update" | "delete", job: MediaJob, old?: MediaJob): void {
    this.noteUsage(event, job, old);
    const key = objectKey(job);
    const before = old && jobAccount(old);
    if (before !== undefined) this.drop(this.byAccount, before, key);
    const account = jobAccount(job);
    if (account === undefined) return;
    this.drop(this.byAccount, account, key);
    if (event !== "delete" && running(job)) add(this.byAccount, account, key);
    // The cache caught up with the submission (or the job went elsewhere): no longer reserved. A
    // job with no phase yet is Pending: a new job's first writes (its finalizer) keep its place.
    if (event === "delete" || !isPending(job.status)) this.drop(this.reserved, account, key);
  }

  /** The job's ended attempts its account has not counted yet, kept under the account. */
  private noteUsage(event: "add" | "update" | "delete", job: MediaJob, old?: MediaJob): void {
    const key = objectKey(job);
    for (const account of new Set([old?.status?.usage?.account, job.status?.usage?.account]))
      if (account !== undefined) {
        const byKey = this.uncounted.get(account);
        if (byKey?.delete(key) && byKey.size === 0) this.uncounted.delete(account);
      }
    const account = job.status?.usage?.account;
    if (event === "delete" || account === undefined) return;
    const uses = uncountedUses(job);
    if (uses.length === 0) return;
    let byKey = this.uncounted.get(account);
    if (!byKey) this.uncounted.set(account, (byKey = new Map()));
    byKey.set(key, uses);
  }

  /**
   * The billed seconds of the account's ended attempts that its usage (as the cache has it) does
   * not hold yet: not marked counted on their jobs, not listed in its `counting`, and ended in its
   * current period (the one the reporter counts into next: periodAt, src/billing/period.ts).
   */
  uncountedSeconds(
    account: string,
    usage: BillingAccountUsage | undefined,
    nowMs: number,
    subscriptionPeriod?: SubscriptionPeriod,
  ): number {
    const byKey = this.uncounted.get(account);
    if (!byKey) return 0;
    const now = new Date(nowMs);
    const current = usage && isCurrentUsage(usage, now, subscriptionPeriod) ? usage : undefined;
    const period = current ?? periodAt(now, subscriptionPeriod);
    const start = Date.parse(period.periodStart);
    const end = period.periodEnd === undefined ? Infinity : Date.parse(period.periodEnd);
    const listed = new Set(current?.counting ?? []);
    let seconds = 0;
    for (const uses of byKey.values())
      for (const u of uses)
        if (!listed.has(u.id) && u.endedAtMs >= start && u.endedAtMs < end) seconds += u.seconds;
    return seconds;
  }

  /** The account's running jobs, `except` this one. Synchronous, so a pass counts and reserves at once. */
  count(account: string, except: string): number {
    let n = 0;
    for (const set of [this.byAccount.get(account), this.reserved.get(account)])
      if (set) n += set.size - (set.has(except) ? 1 : 0);
    // A key both running in the cache and reserved is counted once.
    const r = this.reserved.get(account);
    const b = this.byAccount.get(account);
    if (r && b) for (const k of r) if (k !== except && b.has(k)) n--;
    return n;
  }

  /** A pass planned this job's submission: it counts until the cache shows where it went. */
  reserve(account: string, key: string): void {
    add(this.reserved, account, key);
  }

  /** The pass ended without the job running (its submission was withdrawn or failed before /run). */
  release(account: string, key: string): void {
    this.drop(this.reserved, account, key);
  }

  private drop(map: Map<string, Set<string>>, account: string, key: string): void {
    const set = map.get(account);
    if (!set?.delete(key)) return;
    if (set.size === 0) map.delete(account);
  }
}

function add(map: Map<string, Set<string>>, account: string, key: string): void {
  let set = map.get(account);
  if (!set) map.set(account, (set = new Set()));
  set.add(key);
}

/** The job's ended attempts with billed seconds not yet marked counted. */
function uncountedUses(job: MediaJob): UncountedUse[] {
  return (job.status?.usage?.attempts ?? []).flatMap((a): UncountedUse[] => {
    const seconds = a.billedSeconds ?? 0;
    if (a.counted === true || seconds <= 0) return [];
    try {
      // The reporter's count id for the attempt.
      const id = attemptIdentifier(job.metadata.uid, a);
      return [{ id, seconds, endedAtMs: Date.parse(a.endedAt) }];
    } catch {
      return []; // no object uid: not a job from the API server
    }
  });
}
