// How many jobs of each billing account run now, for the plans' concurrency cap: kept from the
// MediaJob informer's events (no list per pass), plus the submissions this controller has decided
// on and the cache does not show yet. Without those, two passes of one account that run at the
// same time would both see the count below the cap and both submit.
import type { MediaJob } from "../crds/mediajob.js";
import { objectKey } from "./informer.js";

/** Submitted and not ended: what the provider may be billing. */
const running = (job: MediaJob): boolean => job.status?.phase === "Processing";

export class AccountJobs {
  /** Keys of running jobs by account (spec.account), from the cache. */
  private readonly byAccount = new Map<string, Set<string>>();
  /** Keys whose submission a pass has planned, by account, until the cache shows the job running. */
  private readonly reserved = new Map<string, Set<string>>();

  /** An informer event: the job's key counted where its current state puts it. */
  observe(event: "add" | "update" | "delete", job: MediaJob, old?: MediaJob): void {
    const key = objectKey(job);
    const before = old?.spec.account;
    if (before !== undefined) this.drop(this.byAccount, before, key);
    const account = job.spec.account;
    if (account === undefined) return;
    this.drop(this.byAccount, account, key);
    if (event !== "delete" && running(job)) add(this.byAccount, account, key);
    // The cache caught up with the submission (or the job went elsewhere): no longer reserved.
    if (event === "delete" || job.status?.phase !== "Pending") this.drop(this.reserved, account, key);
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
