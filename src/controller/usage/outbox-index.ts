// Which cached jobs have usage still to meter or count, by the usage loop's key (a customer's
// meter) and by customer: a reconcile reads the jobs of its key, not the whole cache (a burst of
// job ends, each a reconcile, made every pass walk the cache: quadratic). Kept from the informer's
// events, as controller-runtime's field indexes are, and rebuilt from the cache at each interval
// tick, so an event missed is found within an interval.
import { keyOfAttempt, usageKeyString } from "../../billing/usage-plan.js";
import type { MediaJob, UsageAttempt } from "../../crds/mediajob.js";
import { awaitsCount } from "../../mediajob/usage-hold.js";

export class OutboxIndex {
  /** Usage key → keys (namespace/name) of the jobs with work under it. */
  private readonly byKey = new Map<string, Set<string>>();
  /** Customer → its usage keys with work. */
  private readonly byCustomer = new Map<string, Set<string>>();
  /** Job key → the usage keys it is listed under. */
  private readonly keysOf = new Map<string, string[]>();

  /** Lists (or unlists) the job; returns the usage keys it was or is now listed under. */
  note(event: "add" | "update" | "delete", job: MediaJob): string[] {
    const jobKey = `${job.metadata.namespace}/${job.metadata.name}`;
    const before = this.keysOf.get(jobKey) ?? [];
    const after = event === "delete" ? [] : usageKeysOf(job);
    for (const k of before) if (!after.includes(k)) this.unlist(k, jobKey);
    for (const k of after) if (!before.includes(k)) this.list(k, jobKey);
    if (after.length > 0) this.keysOf.set(jobKey, after);
    else this.keysOf.delete(jobKey);
    return [...new Set([...before, ...after])];
  }

  /** Forgets everything and lists the jobs again. */
  rebuild(jobs: Iterable<MediaJob>): void {
    this.byKey.clear();
    this.byCustomer.clear();
    this.keysOf.clear();
    for (const job of jobs) this.note("add", job);
  }

  jobsOf(usageKey: string): ReadonlySet<string> {
    return this.byKey.get(usageKey) ?? new Set();
  }

  keysOfCustomer(customer: string): ReadonlySet<string> {
    return this.byCustomer.get(customer) ?? new Set();
  }

  keys(): IterableIterator<string> {
    return this.byKey.keys();
  }

  private list(usageKey: string, jobKey: string): void {
    let jobs = this.byKey.get(usageKey);
    if (!jobs) this.byKey.set(usageKey, (jobs = new Set()));
    jobs.add(jobKey);
    const customer = usageKey.slice(0, usageKey.indexOf("\u0000"));
    let keys = this.byCustomer.get(customer);
    if (!keys) this.byCustomer.set(customer, (keys = new Set()));
    keys.add(usageKey);
  }

  private unlist(usageKey: string, jobKey: string): void {
    const jobs = this.byKey.get(usageKey);
    jobs?.delete(jobKey);
    if (jobs?.size !== 0) return;
    this.byKey.delete(usageKey);
    const customer = usageKey.slice(0, usageKey.indexOf("\u0000"));
    const keys = this.byCustomer.get(customer);
    keys?.delete(usageKey);
    if (keys?.size === 0) this.byCustomer.delete(customer);
  }
}

/** A job's billed attempts still to be metered or counted. */
export function outstandingAttempts(job: MediaJob): UsageAttempt[] {
  const usage = job.status?.usage;
  if (!usage?.account) return [];
  return usage.attempts.filter(
    (a) => a.billedSeconds !== undefined && (a.meter === "Pending" || awaitsCount(usage, a)),
  );
}

/**
 * The usage keys a job's change gives work to: those of its outstanding attempts that are new, or
 * changed in what a send or a count reads (meter state, seconds, identifier, firstSentAt). The
 * loop's own marks (counted, an attempt leaving the outbox) leave nothing to do: woken by them, a
 * key would run a pass per write it makes (and, failing, call the provider again at once).
 */
export function keysWoken(old: MediaJob | undefined, job: MediaJob): string[] {
  const before = new Set(Array.from(outboxFacts(old), ([fact]) => fact));
  const woken = new Set<string>();
  for (const [fact, key] of outboxFacts(job)) if (!before.has(fact)) woken.add(key);
  return [...woken];
}

function* outboxFacts(job: MediaJob | undefined): Generator<[fact: string, key: string]> {
  const customer = job?.status?.usage?.account;
  if (job === undefined || customer === undefined) return;
  for (const a of outstandingAttempts(job)) {
    const key = usageKeyString(keyOfAttempt(customer, a));
    yield [[key, a.attempt, a.meter, a.billedSeconds, a.identifier, a.firstSentAt].join("\u0001"), key];
  }
}

function usageKeysOf(job: MediaJob): string[] {
  const customer = job.status?.usage?.account;
  if (customer === undefined) return [];
  return [...new Set(outstandingAttempts(job).map((a) => usageKeyString(keyOfAttempt(customer, a))))];
}
