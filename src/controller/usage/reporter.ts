// The usage loop's executor: one reconcile per key, a customer's meter, on the shared runtime's
// work queue (setup.ts). It gathers the key's outbox attempts from the cache, asks the billing
// domain what to do (src/billing/usage-plan.ts) and does it: account writes, job writes, meter
// calls. The job's status.usage is the outbox: an attempt with meter=Pending is sent, then marked
// Reported, so a crash, a lost answer or a leader change sends the same identifier again (the
// payment provider keeps one event per identifier), never a second event. The work queue runs
// one reconcile per key at a time (one meter call at a time per customer and meter, as Stripe
// asks) and backs a failing key off. docs/design.md, "Usage and plans", states the guarantees.
// One piece: the reconcile's steps share the Events already told and the writes' helpers.
import type { Logger } from "pino";
import { billingAccountName, customerAccount, type BillingAccount } from "../../crds/billingaccount.js";
import type { MediaJob, MediaJobStatus, UsageAttempt } from "../../crds/mediajob.js";
import type { KubeApi } from "../../k8s/api.js";
import { describeError } from "../../k8s/errors.js";
import type { EventSink } from "../../k8s/events.js";
import { attemptIdentifier } from "../../billing/identifier.js";
import {
  acceptedCounts,
  countEntries,
  liveCountIds,
  markCounted,
  markRefused,
  markReported,
  markReportedCounted,
  type AttemptChange,
} from "../../billing/outbox.js";
import { countedUsage, periodAt, type UncountedAttempt } from "../../billing/period.js";
import {
  acceptedAfterInvoice,
  DEFAULT_INVOICE_GRACE_SECONDS,
  usageAfterInvoice,
} from "../../billing/invoice-grace.js";
import { usageNotReported } from "../../billing/refusals.js";
import {
  afterSend,
  countOnBackOff,
  parseUsageKey,
  planUsageKey,
  usageKeyString,
  type MeterAnswer,
  type OutboxEntry,
  type Send,
  type UsageKey,
  type UsageKeyPlan,
} from "../../billing/usage-plan.js";
import { awaitsCount } from "../../mediajob/usage-hold.js";
import type { Reconciler } from "../../runtime/workqueue.js";
import type { MeterEvent, MeterSender } from "./meter-client.js";
import { keysWoken, OutboxIndex, outstandingAttempts } from "./outbox-index.js";
import { STREAM_BATCH_MAX } from "./stream-batch.js";
import type { UsageMetrics } from "./metrics.js";

/** What the reporter reads jobs and accounts from: the manager's caches. */
interface Cache<T> {
  list(namespace?: string): T[];
  get(namespace: string, name: string): T | undefined;
}

/** The part of the runtime's work queue the loop adds its keys with. */
interface UsageQueue {
  add(key: string): void;
  addAfter(key: string, delayMs: number): void;
  addUnlessBackingOff(key: string): void;
  isBackingOff(key: string): boolean;
  failuresOf(key: string): number;
  forget(key: string): void;
}

export interface UsageReporterDeps {
  api: KubeApi;
  jobs: Cache<MediaJob>;
  accounts: Cache<BillingAccount>;
  accountNamespace: string;
  /** Undefined: metering is off (accounts' period usage is still kept). */
  meter?: MeterSender | undefined;
  events: EventSink;
  log: Logger;
  metrics?: UsageMetrics;
  /** The loop's work queue (the runtime controller's, made with this reporter's reconcile). */
  queue: () => UsageQueue;
  /** Whether the caches have synced: counting before then could count an attempt twice. */
  synced: () => boolean;
  /** Whether this process still leads and holds its Lease: checked before every side effect. */
  leading: () => boolean;
  now?: () => Date;
  /** Why an event name's usage is held (its meter misconfigured, meter-check.ts); undefined: send. */
  held?: (eventName: string) => string | undefined;
  /** The payment provider's invoice finalization grace period (USAGE_INVOICE_GRACE_SECONDS). */
  invoiceGraceSeconds?: number;
}

/** Calls tried again at once after a passing fault, and the pause before each (as Stripe's clients do). */
const QUICK_RETRIES = 2;
const QUICK_RETRY_MS = 250;
/** Job status writes made at once for one batch (its firstSentAt stamps, its Reported marks). */
const WRITE_CONCURRENCY = 16;
/** Attempts counted into one account per write (its `counting` list holds at most 1,000 ids). */
const COUNT_BATCH = 500;
/** After a write that listed ids in `counting`, the account's own key drops them once the jobs show their marks. */
const DRAIN_AFTER_MS = 2_000;

export class UsageReporter {
  private readonly index = new OutboxIndex();
  /** Identifiers whose refusal was already told as an Event. */
  private readonly told = new Set<string>();
  /** Jobs (uid and customer) already told their BillingAccount is missing. */
  private readonly toldMissing = new Set<string>();
  /**
   * When this process first called the meter with each identifier still outstanding, unix seconds:
   * the start of its deduplication window as far as this process knows (usage-plan.ts,
   * sendWindowStart). Kept in memory: a successor bounds it by the attempt's end instead.
   */
  private readonly tried = new Map<string, number>();
  /** When this process began to lead, unix seconds; until then every attempt may be an earlier leader's. */
  private leadingSinceS = Number.POSITIVE_INFINITY;
  /** Keys in a pass now. */
  private readonly inPass = new Set<string>();
  /**
   * Keys woken during their pass or their backoff: added then, a key would call the payment
   * provider again right after a failing pass (its own count writes wake it) or before its backoff
   * ends. Its next pass gathers what woke it; after a pass that succeeds it runs again at once.
   */
  private readonly wokenLate = new Set<string>();
  /** Per customer, the last account write queued (writeCounts: one at a time). */
  private readonly accountWrites = new Map<string, Promise<void>>();

  constructor(private readonly d: UsageReporterDeps) {}

  private now(): Date {
    return this.d.now?.() ?? new Date();
  }

  /**
   * Told of each job event (setup.ts) with the job as it was: the job is listed under its keys, and
   * the keys its change gives work to are reconciled (keysWoken; a key backing off is left to
   * wait, its customer's own key counting the new attempt meanwhile).
   */
  noteJob(event: "add" | "update" | "delete", job: MediaJob, old?: MediaJob): void {
    const keys = this.index.note(event, job);
    if (!this.d.leading()) return;
    for (const key of event === "delete" ? keys : keysWoken(old, job)) this.enqueue(key);
  }

  /** An account appeared or changed: its keys are reconciled (usage waiting for it is counted). */
  noteAccount(customer: string): void {
    if (!this.d.leading()) return;
    for (const key of this.index.keysOfCustomer(customer)) this.enqueue(key);
    this.enqueue(usageKeyString({ customer, eventName: "" }));
  }

  /** This process leads from now on: a resync, and the attempts written from now on are its own. */
  lead(): void {
    this.leadingSinceS = Math.floor(this.now().getTime() / 1000);
    this.resync();
  }

  /**
   * The interval tick (a resync): the index is rebuilt from the cache and every key with work is
   * reconciled, with the account keys that have ids to drop or a period to start.
   */
  resync(): void {
    this.index.rebuild(this.d.jobs.list());
    // Identifiers no longer outstanding (reported, refused, their jobs gone) are forgotten.
    const outstanding = new Set<string>();
    for (const key of this.index.keys())
      for (const { entry } of this.entriesOf(key, parseUsageKey(key).customer)) outstanding.add(entry.id);
    for (const id of this.tried.keys()) if (!outstanding.has(id)) this.tried.delete(id);
    if (!this.d.leading()) return;
    for (const key of this.index.keys()) this.enqueue(key);
    const nowMs = this.now().getTime();
    for (const acct of this.d.accounts.list(this.d.accountNamespace)) {
      const u = acct.status?.usage;
      if (u?.counting?.length || (u?.periodEnd !== undefined && nowMs >= Date.parse(u.periodEnd)))
        this.d.queue().addUnlessBackingOff(usageKeyString({ customer: acct.spec.customerId, eventName: "" }));
    }
    this.observeBacklog();
  }

  private enqueue(key: string): void {
    const q = this.d.queue();
    if (!this.inPass.has(key) && q.failuresOf(key) === 0) return q.add(key);
    this.wokenLate.add(key);
    q.addUnlessBackingOff(usageKeyString({ customer: parseUsageKey(key).customer, eventName: "" }));
  }

  // ---- the reconcile: gather, plan, act

  readonly reconcile: Reconciler = async (key) => {
    if (!this.d.synced()) return { result: { requeueAfterMs: 1_000 } };
    if (!this.d.leading()) return;
    const k = parseUsageKey(key);
    this.wokenLate.delete(key); // this pass gathers what woke it
    this.inPass.add(key);
    const { facts, jobs } = this.gather(k);
    const plan = planUsageKey(facts);
    try {
      const outcome = await this.act(k, plan, jobs);
      if (!outcome?.error && this.wokenLate.delete(key)) this.d.queue().add(key);
      return outcome;
    } finally {
      this.inPass.delete(key);
      this.observeBacklog();
    }
  };

  private gather(k: UsageKey) {
    const customer = k.customer;
    const keys = [usageKeyString(k)];
    // The account's own key also counts the attempts of its meters backing off.
    if (k.eventName === "")
      for (const other of this.index.keysOfCustomer(customer))
        if (other !== keys[0] && this.d.queue().isBackingOff(other)) keys.push(other);
    const jobs = new Map<string, MediaJob>();
    const entries: OutboxEntry[] = [];
    for (const key of keys)
      for (const e of this.entriesOf(key, customer)) {
        entries.push(e.entry);
        jobs.set(e.entry.id, e.job);
      }
    const account = this.account(customer);
    const nowMs = this.now().getTime();
    const periodEnd = account?.status?.usage?.periodEnd;
    const meter = this.d.meter;
    const facts = {
      key: k,
      entries,
      account: account && {
        counting: new Set(account.status?.usage?.counting),
        periodEnded: periodEnd !== undefined && nowMs >= Date.parse(periodEnd),
      },
      live: this.liveIds(customer),
      metering: meter !== undefined,
      held: k.eventName === "" ? undefined : this.d.held?.(k.eventName),
      batchMax: meter && streams(meter) ? STREAM_BATCH_MAX : 1,
      leadingSinceS: this.leadingSinceS,
      nowS: Math.floor(nowMs / 1000),
    };
    return { facts, jobs };
  }

  private entriesOf(key: string, customer: string): Array<{ entry: OutboxEntry; job: MediaJob }> {
    const out: Array<{ entry: OutboxEntry; job: MediaJob }> = [];
    const { eventName } = parseUsageKey(key);
    for (const jobKey of this.index.jobsOf(key)) {
      const slash = jobKey.indexOf("/");
      const job = this.d.jobs.get(jobKey.slice(0, slash), jobKey.slice(slash + 1));
      const usage = job?.status?.usage;
      if (!job || usage?.account !== customer) continue;
      for (const attempt of outstandingAttempts(job)) {
        if ((attempt.eventName ?? "") !== eventName) continue;
        const id = attemptIdentifier(job.metadata.uid, attempt);
        const { namespace = "", name, uid = "" } = job.metadata;
        out.push({
          entry: {
            job: { namespace, name, uid },
            attempt,
            id,
            awaitsCount: awaitsCount(usage, attempt),
            triedAt: this.tried.get(id),
          },
          job,
        });
      }
    }
    return out;
  }

  /**
   * Every count id the customer's outstanding attempts may have listed in its `counting` without
   * the mark on the job yet (liveCountIds), as the cache shows them: what an account write may
   * keep listed. An id leaves only once the cache shows its job marked (or gone), so no later
   * reconcile, which reads the same cache, finds the attempt uncounted while its id is unlisted.
   */
  private liveIds(customer: string): Set<string> {
    const live = new Set<string>();
    for (const key of this.index.keysOfCustomer(customer))
      for (const { entry } of this.entriesOf(key, customer))
        for (const id of liveCountIds(entry.id, entry.attempt)) live.add(id);
    return live;
  }

  private account(customer: string): BillingAccount | undefined {
    return customerAccount(
      this.d.accounts.get(this.d.accountNamespace, billingAccountName(customer)),
      customer,
    );
  }

  private async act(k: UsageKey, plan: UsageKeyPlan, jobs: Map<string, MediaJob>): ReturnType<Reconciler> {
    const customer = k.customer;
    const jobOf = (e: OutboxEntry) => jobs.get(e.id)!;
    let listed = false;
    if (plan.accountMissing.length > 0) await this.tellAccountMissing(customer, plan.accountMissing, jobOf);
    if (plan.count.length > 0 || plan.touchAccount) {
      listed = (await this.count(customer, plan.count, jobOf)) || listed;
    }
    if (plan.found.length > 0)
      listed =
        (await this.settleAccepted(
          customer,
          plan.found.map((entry) => ({
            send: { entry, timestamp: seconds(entry.attempt.endedAt) },
            fresh: false,
          })),
          jobOf,
        )) || listed;
    for (const { entry, reason } of plan.refuse) await this.refuse(jobOf(entry), entry.attempt, reason);
    try {
      for (const [i, planned] of plan.batches.entries()) {
        if (!this.d.leading()) return;
        const backOff = await this.sendBatch(customer, planned, jobOf);
        if (backOff === undefined) {
          listed ||= planned.length > 0;
          continue;
        }
        // Not taken now: the unsent attempts' used seconds are counted all the same (they hold
        // the customer's plan), and the key backs off (the runtime's exponential backoff).
        const unsent = countOnBackOff(plan, i);
        if (unsent.length > 0 && this.account(customer))
          listed = (await this.count(customer, unsent, jobOf)) || listed;
        // A batch taken before this one: the meter is back, and the backoff starts over.
        if (i > 0) this.d.queue().forget(usageKeyString(k));
        return {
          error: { message: `meter ${k.eventName} of customer ${customer}: ${backOff}`, terminal: false },
        };
      }
    } finally {
      if (listed) this.d.queue().addAfter(usageKeyString({ customer, eventName: "" }), DRAIN_AFTER_MS);
    }
  }

  // ---- accounts

  /**
   * One write of the account's period usage with the entries counted (in batches), then their
   * jobs marked counted; whether a write listed ids. An account missing waits (told).
   */
  private async count(
    customer: string,
    entries: readonly OutboxEntry[],
    jobOf: (e: OutboxEntry) => MediaJob,
  ): Promise<boolean> {
    // Back (or never gone): should it go again, its jobs are told again.
    for (const e of entries) this.toldMissing.delete(`${e.job.uid}\u0000${customer}`);
    let listed = false;
    for (let i = 0; i === 0 || i < entries.length; i += COUNT_BATCH) {
      const batch = entries.slice(i, i + COUNT_BATCH);
      const write = await this.writeCounts(customer, batch, countEntries);
      if (!write.written) return listed;
      listed ||= write.listed;
      await eachLimited(write.seen, WRITE_CONCURRENCY, async ({ entry, attempt }) => {
        await this.writeAttempt(jobOf(entry), attempt.attempt, markCounted(attempt));
      });
    }
    return listed;
  }

  /**
   * One write of the account's period usage with what the entries owe counted (`owes`, from each
   * attempt as the cache shows it when the write is made). What stays listed in `counting`: the
   * ids the jobs do not show marked in the cache (liveIds: the marks of earlier batches that it
   * shows leave, so a burst of many batches does not fill it), and the ones this write adds.
   *
   * One write at a time per customer: an id leaves `counting` once the cache shows its job marked,
   * so what a write owes must be read after any such drop, never before it (a settle that read an
   * attempt uncounted, then wrote after a drop of its id, would count it twice).
   */
  private async writeCounts(
    customer: string,
    entries: readonly OutboxEntry[],
    owes: (id: string, a: UsageAttempt) => UncountedAttempt[],
  ): Promise<{
    written: boolean;
    listed: boolean;
    seen: Array<{ entry: OutboxEntry; attempt: UsageAttempt }>;
  }> {
    const prior = this.accountWrites.get(customer) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const chain = prior.then(() => mine);
    this.accountWrites.set(customer, chain);
    await prior;
    try {
      const seen = entries.map((entry) => ({ entry, attempt: this.cachedAttempt(entry) ?? entry.attempt }));
      const uncounted = seen.flatMap(({ entry, attempt }) => owes(entry.id, attempt));
      if (!this.d.leading()) return { written: false, listed: false, seen };
      const written = await this.writeUsage(customer, uncounted);
      return { written, listed: uncounted.length > 0, seen };
    } finally {
      release();
      if (this.accountWrites.get(customer) === chain) this.accountWrites.delete(customer);
    }
  }

  /** The attempt as the cache shows it now (the same object), or undefined when its job is gone. */
  private cachedAttempt(entry: OutboxEntry): UsageAttempt | undefined {
    const job = this.d.jobs.get(entry.job.namespace, entry.job.name);
    if (job?.metadata.uid !== entry.job.uid) return undefined;
    return job.status?.usage?.attempts.find((a) => a.attempt === entry.attempt.attempt);
  }

  private async writeUsage(
    customer: string,
    uncounted: Parameters<typeof countedUsage>[0]["uncounted"],
  ): Promise<boolean> {
    const live = this.liveIds(customer);
    for (const u of uncounted) live.add(u.id);
    const res = await this.d.api.updateStatusWithRetry<BillingAccount>(
      "billingaccounts",
      this.d.accountNamespace,
      billingAccountName(customer),
      (cur) =>
        customerAccount(cur, customer) && {
          ...cur,
          status: {
            ...cur.status,
            usage: countedUsage({
              current: cur.status?.usage,
              uncounted,
              live,
              now: this.now(),
              subscriptionPeriod: cur.status?.subscriptionPeriod,
            }),
          },
        },
    );
    return res.written;
  }

  /**
   * Attempts waiting for a BillingAccount that is gone wait for it (counted when it is back: the
   * sidecar recreates it from the customer's next subscription event, or an operator applies it),
   * their jobs kept (the TTL waits), never silently: a Warning Event on each job, once per process,
   * a log line per account, and the gauge media_orchestrator_usage_account_missing.
   */
  private async tellAccountMissing(
    customer: string,
    entries: readonly OutboxEntry[],
    jobOf: (e: OutboxEntry) => MediaJob,
  ): Promise<void> {
    const name = billingAccountName(customer);
    const fresh = entries.filter((e) => !this.toldMissing.has(`${e.job.uid}\u0000${customer}`));
    if (fresh.length === 0) return;
    if (this.toldMissing.size >= 10_000) this.toldMissing.clear(); // bounded: at worst told twice
    this.d.log.warn(
      { account: customer, billingAccount: name, namespace: this.d.accountNamespace, jobs: fresh.length },
      "usage waits for a BillingAccount that does not exist",
    );
    for (const e of fresh) {
      const told = `${e.job.uid}\u0000${customer}`;
      if (this.toldMissing.has(told)) continue; // another attempt of the same job
      this.toldMissing.add(told);
      const job = jobOf(e);
      const usage = job.status!.usage!;
      const seconds = usage.attempts
        .filter((a) => awaitsCount(usage, a))
        .reduce((s, a) => s + (a.billedSeconds ?? 0), 0);
      await this.d.events.record(
        job,
        "Warning",
        "UsageAccountMissing",
        `${seconds} GPU seconds wait to be counted into BillingAccount ${name} (customer ${customer}), ` +
          `which does not exist in namespace ${this.d.accountNamespace}: they are counted when it is back; ` +
          "until then the job is kept (its TTL waits)",
      );
    }
  }

  // ---- meters

  /**
   * Sends one planned batch (one event alone through v1, more through the v2 stream) and does what
   * its answer means (afterSend). Undefined when done; the reason when the key must back off.
   */
  private async sendBatch(
    customer: string,
    batch: readonly Send[],
    jobOf: (e: OutboxEntry) => MediaJob,
  ): Promise<string | undefined> {
    if (batch.length === 0) return undefined;
    const events = batch.map((s) => this.eventOf(customer, s));
    const answer = await this.call(events);
    if (!answer) return "this process no longer leads";
    const next = afterSend(batch, answer);
    if (next.accepted.length > 0) await this.settleAccepted(customer, next.accepted, jobOf);
    for (const { entry, reason } of next.refuse) await this.refuse(jobOf(entry), entry.attempt, reason);
    if (next.oneByOne.length > 0)
      this.d.log.info(
        { reason: answer.outcome === "unstreamable" && answer.reason, events: events.length },
        "meter events sent one by one",
      );
    for (const one of next.oneByOne) {
      const backOff = await this.sendBatch(customer, [one], jobOf);
      if (backOff !== undefined) return backOff;
    }
    return next.backOff;
  }

  /**
   * One meter call, and again at once after a passing fault, QUICK_RETRIES times (the same
   * identifiers, so never twice). Undefined when this process lost the lead meanwhile.
   */
  private async call(events: readonly MeterEvent[]): Promise<MeterAnswer | undefined> {
    const meter = this.d.meter!;
    // Before the call: from now on a send may have happened (the window's start, sendWindowStart).
    const nowS = Math.floor(this.now().getTime() / 1000);
    for (const e of events) if (!this.tried.has(e.identifier)) this.tried.set(e.identifier, nowS);
    const once = async (): Promise<MeterAnswer> =>
      events.length === 1 || !streams(meter) ? meter.send(events[0]!) : meter.sendBatch!(events);
    let answer = await once();
    for (let retry = 0; answer.outcome === "retry" && retry < QUICK_RETRIES; retry++) {
      this.d.metrics?.sends.inc({ outcome: "retry" }, events.length);
      await new Promise((r) => setTimeout(r, QUICK_RETRY_MS * (retry + 1) * (0.5 + Math.random())));
      if (!this.d.leading()) return undefined;
      answer = await once();
    }
    const outcome = answer.outcome === "recorded" && answer.duplicate === true ? "duplicate" : answer.outcome;
    if (outcome !== "unstreamable") this.d.metrics?.sends.inc({ outcome }, events.length);
    if (answer.outcome === "retry")
      this.d.log.info(
        { events: events.length, reason: answer.reason },
        "meter events not recorded yet; retrying with backoff",
      );
    return answer;
  }

  private eventOf(customer: string, s: Send): MeterEvent {
    return {
      eventName: s.entry.attempt.eventName!,
      customer,
      value: s.entry.attempt.billedSeconds!,
      identifier: s.entry.id,
      timestamp: s.timestamp,
    };
  }

  /**
   * After the provider accepted these attempts of one customer: one write of its account counting
   * what each still owes (its used seconds if not counted yet, and its reported seconds), then one
   * write per job marking it Reported and counted. Without the account or its write: Reported
   * alone, and a later reconcile counts it, as any uncounted attempt. Whether ids were listed.
   */
  private async settleAccepted(
    customer: string,
    accepted: ReadonlyArray<{ send: Send; fresh: boolean }>,
    jobOf: (e: OutboxEntry) => MediaJob,
  ): Promise<boolean> {
    let counted = false;
    if (this.account(customer)) {
      try {
        counted = (
          await this.writeCounts(
            customer,
            accepted.map((a) => a.send.entry),
            acceptedCounts,
          )
        ).written;
      } catch (err) {
        this.d.log.warn({ account: customer, err: describeError(err) }, "could not count reported usage");
      }
    }
    const reportedAt = this.now();
    await eachLimited(accepted, WRITE_CONCURRENCY, async ({ send, fresh }) => {
      const written = await this.markReported(jobOf(send.entry), customer, send, reportedAt, counted);
      const e = send.entry.attempt;
      if (written && fresh)
        this.d.metrics?.meteredSeconds.inc({ event_name: e.eventName! }, e.billedSeconds!);
    });
    return counted;
  }

  /**
   * Marks the attempt Reported (`counted`: and its seconds counted, the account's write done), and
   * `afterInvoice` when its period's invoice was finalized before the provider accepted it (a
   * Warning Event and a count: that usage is on no invoice).
   */
  private async markReported(
    job: MediaJob,
    customer: string,
    send: Send,
    reportedAt: Date,
    counted: boolean,
  ): Promise<MediaJob | undefined> {
    const graceSeconds = this.d.invoiceGraceSeconds ?? DEFAULT_INVOICE_GRACE_SECONDS;
    const subscriptionPeriod = this.account(customer)?.status?.subscriptionPeriod;
    const eventAt = new Date(send.timestamp * 1000);
    const late = acceptedAfterInvoice({ eventAt, acceptedAt: reportedAt, subscriptionPeriod, graceSeconds });
    const change = (counted ? markReportedCounted : markReported)(reportedAt.toISOString(), late);
    const written = await this.writeAttempt(job, send.entry.attempt.attempt, change);
    if (written && late) {
      const seconds = send.entry.attempt.billedSeconds ?? 0;
      this.d.metrics?.afterInvoice.inc({ event_name: send.entry.attempt.eventName! }, seconds);
      const { periodEnd } = periodAt(eventAt, subscriptionPeriod);
      void this.d.events.record(
        written,
        "Warning",
        "UsageAfterInvoice",
        usageAfterInvoice(seconds, periodEnd, graceSeconds),
      );
    }
    return written;
  }

  private async refuse(job: MediaJob, attempt: UsageAttempt, reason: string): Promise<void> {
    const written = await this.writeAttempt(job, attempt.attempt, markRefused(reason));
    const id = attemptIdentifier(job.metadata.uid, attempt);
    if (!written || this.told.has(id)) return;
    if (this.told.size >= 10_000) this.told.clear(); // bounded: at worst an Event told twice
    this.told.add(id);
    this.d.metrics?.refused.inc();
    void this.d.events.record(written, "Warning", "UsageNotReported", usageNotReported(attempt, reason));
  }

  /**
   * Changes one attempt of the job's status.usage (a read-modify-write with the resourceVersion,
   * re-read on conflict), only on the same object (its uid). Returns the written job.
   */
  private async writeAttempt(
    job: MediaJob,
    attempt: number,
    change: AttemptChange,
  ): Promise<MediaJob | undefined> {
    if (!this.d.leading()) return undefined;
    const res = await this.d.api.updateStatusWithRetry<MediaJob>(
      "mediajobs",
      job.metadata.namespace!,
      job.metadata.name,
      (cur) => {
        if (cur.metadata.uid !== job.metadata.uid) return undefined;
        const usage = cur.status?.usage;
        const i = usage?.attempts.findIndex((a) => a.attempt === attempt) ?? -1;
        if (!usage || i < 0) return undefined;
        const next = change(usage.attempts[i]!);
        if (!next) return undefined;
        const status: MediaJobStatus = {
          ...cur.status,
          usage: { ...usage, attempts: usage.attempts.with(i, next) },
        };
        return { ...cur, status };
      },
      5,
    );
    return res.written ? res.object : undefined;
  }

  // ---- metrics

  /** The backlog's gauges, from the index: attempts waiting to be sent, the oldest, those without an account. */
  private observeBacklog(): void {
    const m = this.d.metrics;
    if (!m) return;
    let pending = 0;
    let missing = 0;
    let oldest = Infinity;
    const customers = new Set<string>();
    for (const key of this.index.keys()) customers.add(parseUsageKey(key).customer);
    for (const customer of customers) {
      const hasAccount = this.account(customer) !== undefined;
      for (const key of this.index.keysOfCustomer(customer))
        for (const { entry } of this.entriesOf(key, customer)) {
          if (entry.attempt.meter === "Pending") {
            pending++;
            oldest = Math.min(oldest, Date.parse(entry.attempt.endedAt));
          }
          if (!hasAccount && entry.awaitsCount) missing++;
        }
    }
    m.backlog.set(pending);
    m.backlogOldestSeconds.set(
      Number.isFinite(oldest) ? Math.max(0, (this.now().getTime() - oldest) / 1000) : 0,
    );
    m.accountMissing.set(missing);
  }
}

/** Whether the meter takes batches (the v2 stream); asked with `in`, so a sender without one is never read for it. */
const streams = (m: MeterSender): boolean => "sendBatch" in m && m.sendBatch !== undefined;

const seconds = (iso: string): number => Math.floor(Date.parse(iso) / 1000);

/** Runs fn over the items, at most `limit` at a time. */
async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]!);
  });
  await Promise.all(workers);
}
