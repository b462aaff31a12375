// The usage reporter: the leader's loop that turns billed usage on MediaJobs into meter events
// and BillingAccount period usage. The job's status.usage is the outbox: an attempt in it with
// meter=Pending is sent, then marked Reported, so a crash, a lost answer or a leader change sends
// the same identifier again (the payment provider keeps one event per identifier), never a second
// event. docs/design.md, "Usage and plans", states the guarantees and the one residual window.
// One piece: its pass, sends and counts share the backoff per customer and meter and the sets
// of what was told; what each step decides is the billing domain's (src/billing).
import type { Logger } from "pino";
import { billingAccountName, customerAccount, type BillingAccount } from "../../crds/billingaccount.js";
import type { MediaJob, MediaJobStatus, UsageAttempt } from "../../crds/mediajob.js";
import type { KubeApi } from "../../k8s/api.js";
import { describeError } from "../../k8s/errors.js";
import type { EventSink } from "../../k8s/events.js";
import { attemptIdentifier, reportedCountId } from "../../billing/identifier.js";
import {
  acceptedCounts,
  countEntries as owedCounts,
  liveCountIds,
  markCounted,
  markRefused,
  markReported,
  markReportedCounted,
  stampFirstSent,
} from "../../billing/outbox.js";
import { countedUsage, periodAt, type UncountedAttempt } from "../../billing/period.js";
import {
  acceptedAfterInvoice,
  DEFAULT_INVOICE_GRACE_SECONDS,
  usageAfterInvoice,
} from "../../billing/invoice-grace.js";
import { FORGOTTEN_IDENTIFIER, usageNotReported } from "../../billing/refusals.js";
import { awaitsCount, meterSendVerdict } from "../../mediajob/usage.js";
import type { MeterEvent, MeterSender } from "./meter-client.js";
import { STREAM_BATCH_MAX } from "./stream-batch.js";
import type { UsageMetrics } from "./metrics.js";

/** What the reporter reads jobs and accounts from: the manager's caches. */
interface Cache<T> {
  list(namespace?: string): T[];
  get(namespace: string, name: string): T | undefined;
}

export interface UsageReporterDeps {
  api: KubeApi;
  jobs: Cache<MediaJob>;
  accounts: Cache<BillingAccount>;
  accountNamespace: string;
  /** Undefined: metering is off (accounts' period usage is still kept). */
  meter?: MeterSender;
  events: EventSink;
  log: Logger;
  metrics?: UsageMetrics;
  intervalMs: number;
  /** Whether the caches have synced: counting before then could count an attempt twice. */
  synced: () => boolean;
  /** Whether this process still leads: checked before every send. */
  leading: () => boolean;
  now?: () => Date;
  /** Customer+event groups sent to at once. */
  concurrency?: number;
  /** Why an event name's usage is held (its meter misconfigured, meter-check.ts); undefined: send. */
  held?: (eventName: string) => string | undefined;
  /** The payment provider's invoice finalization grace period (USAGE_INVOICE_GRACE_SECONDS). */
  invoiceGraceSeconds?: number;
}

const BACKOFF_MIN_MS = 1_000;
// A payment provider down for hours is asked about once every 5 minutes per customer and meter.
/** Calls tried again at once after a passing fault, and the pause before each. */
const QUICK_RETRIES = 2;
const QUICK_RETRY_MS = 250;
/** Passes asked for while one runs are made this long after it. */
const PASS_GAP_MS = 250;
const BACKOFF_MAX_MS = 5 * 60_000;
/** Job status writes made at once for one batch (its firstSentAt stamps, its Reported marks). */
const WRITE_CONCURRENCY = 16;
/** Attempts counted into one account per write (its `counting` list holds at most 1,000). */
const COUNT_BATCH = 500;

interface Outstanding {
  job: MediaJob;
  attempt: UsageAttempt;
}

/** An attempt the payment provider accepted; `fresh`: by this send (not a duplicate, not found counted). */
interface Accepted {
  w: Outstanding;
  event: MeterEvent;
  fresh: boolean;
}

export class UsageReporter {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private stopped = true;
  /** Per customer and event name: when it may be tried again, and the next backoff. */
  private readonly backoff = new Map<string, { until: number; delayMs: number }>();
  /** Identifiers whose refusal was already told as an Event. */
  private readonly told = new Set<string>();
  /** Jobs (uid and customer) already told their BillingAccount is missing. */
  private readonly toldMissing = new Set<string>();

  /**
   * Keys (namespace/name) of the cached jobs that may have usage to meter or count: a pass reads
   * these, not every job in the cache (a burst of job ends made each of its passes walk the whole
   * cache: quadratic). Kept by noteJob from the informer's events, and rebuilt from the cache at
   * each interval tick, as a resync would, so an event missed is found within an interval.
   */
  private readonly candidates = new Set<string>();
  private rescan = true;

  constructor(private readonly d: UsageReporterDeps) {}

  /** Told of each job event (setup.ts), before the pass it may wake. */
  noteJob(event: "add" | "update" | "delete", job: MediaJob): void {
    const key = `${job.metadata.namespace}/${job.metadata.name}`;
    if (event !== "delete" && hasOutstanding(job)) this.candidates.add(key);
    else this.candidates.delete(key);
  }

  private now(): Date {
    return this.d.now?.() ?? new Date();
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.timer = setInterval(() => {
      this.rescan = true;
      this.wake();
    }, this.d.intervalMs);
    this.timer.unref();
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** Runs a pass now, or right after the one under way. */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.pass()
      .catch((err: unknown) => this.d.log.warn({ err: describeError(err) }, "usage report pass failed"))
      .finally(() => {
        this.running = undefined;
        if (this.again && !this.stopped) {
          this.again = false;
          // A little later: a burst of job events makes one more pass, not one per event.
          setTimeout(() => this.wake(), PASS_GAP_MS).unref();
        }
      });
  }

  /** The jobs' attempts whose usage still needs work, billed (the controller's pass bills them). */
  private outstanding(): Outstanding[] {
    if (this.rescan) {
      this.rescan = false;
      this.candidates.clear();
      for (const job of this.d.jobs.list()) this.noteJob("add", job);
    }
    const out: Outstanding[] = [];
    for (const key of this.candidates) {
      const slash = key.indexOf("/");
      const job = this.d.jobs.get(key.slice(0, slash), key.slice(slash + 1));
      const attempts = job ? outstandingAttempts(job) : [];
      if (attempts.length === 0) this.candidates.delete(key);
      for (const attempt of attempts) out.push({ job: job!, attempt });
    }
    return out;
  }

  /** One pass: account usage counted, then the outbox sent. Also the metrics of the backlog. */
  async pass(): Promise<void> {
    if (!this.d.synced() || !this.d.leading()) return;
    const work = this.outstanding();
    this.observeBacklog(work);
    await this.countAll(work, this.sentThisPass(work));
    if (this.d.meter) await this.sendAll(work.filter((w) => w.attempt.meter === "Pending"));
    this.observeBacklog(this.outstanding());
  }

  private observeBacklog(work: Outstanding[]): void {
    const m = this.d.metrics;
    if (!m) return;
    const pending = work.filter((w) => w.attempt.meter === "Pending");
    const nowMs = this.now().getTime();
    const oldest = pending.reduce((min, w) => Math.min(min, Date.parse(w.attempt.endedAt)), Infinity);
    m.backlog.set(pending.length);
    m.backlogOldestSeconds.set(Number.isFinite(oldest) ? Math.max(0, (nowMs - oldest) / 1000) : 0);
    m.accountMissing.set(work.filter((w) => this.accountMissing(w)).length);
  }

  /** Whether an attempt waits to be counted into a BillingAccount that does not exist. */
  private accountMissing({ job, attempt }: Outstanding): boolean {
    const usage = job.status!.usage!;
    return (
      usage.account !== undefined &&
      awaitsCount(usage, attempt) &&
      !customerAccount(
        this.d.accounts.get(this.d.accountNamespace, billingAccountName(usage.account)),
        usage.account,
      )
    );
  }

  /**
   * Attempts whose BillingAccount is gone wait for it (counted when it is back: the sidecar
   * recreates it from the customer's next subscription event, or an operator applies it), their
   * jobs kept (the TTL waits), never silently: a Warning Event on each job, once per process, a log
   * line per account, and the gauge media_orchestrator_usage_account_missing.
   */
  private async tellAccountMissing(customer: string, list: Outstanding[]): Promise<void> {
    const name = billingAccountName(customer);
    const fresh = list.filter(({ job }) => !this.toldMissing.has(`${job.metadata.uid}\u0000${customer}`));
    if (fresh.length === 0) return;
    if (this.toldMissing.size >= 10_000) this.toldMissing.clear(); // bounded: at worst told twice
    this.d.log.warn(
      { account: customer, billingAccount: name, namespace: this.d.accountNamespace, jobs: fresh.length },
      "usage waits for a BillingAccount that does not exist",
    );
    for (const { job } of fresh) {
      this.toldMissing.add(`${job.metadata.uid}\u0000${customer}`);
      const seconds = job
        .status!.usage!.attempts.filter((a) => awaitsCount(job.status!.usage!, a))
        .reduce((sum, a) => sum + (a.billedSeconds ?? 0), 0);
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

  // ---- accounts

  /**
   * The Pending attempts this pass sends (metering on, their customer and meter neither backing off
   * nor held, their account there): their seconds are counted in the account's write after the
   * provider's answer, with the reported seconds, so the job is written once for both.
   */
  private sentThisPass(work: Outstanding[]): ReadonlySet<Outstanding> {
    const out = new Set<Outstanding>();
    if (!this.d.meter) return out;
    const nowMs = this.now().getTime();
    for (const w of work) {
      const account = w.job.status!.usage!.account;
      if (w.attempt.meter !== "Pending" || account === undefined) continue;
      if ((this.backoff.get(groupKey(w))?.until ?? 0) > nowMs) continue;
      if (this.d.held?.(w.attempt.eventName ?? "") !== undefined) continue;
      if (
        !customerAccount(this.d.accounts.get(this.d.accountNamespace, billingAccountName(account)), account)
      )
        continue;
      out.add(w);
    }
    return out;
  }

  /** `sending`: attempts counted after their send instead (sentThisPass), unless it does not happen. */
  private async countAll(work: Outstanding[], sending: ReadonlySet<Outstanding>): Promise<void> {
    const byAccount = new Map<string, Outstanding[]>();
    const live = liveByAccount(work);
    for (const w of work) {
      const account = w.job.status!.usage!.account;
      if (account === undefined || !awaitsCount(w.job.status!.usage!, w.attempt) || sending.has(w)) continue;
      const list = byAccount.get(account) ?? [];
      list.push(w);
      byAccount.set(account, list);
    }
    // An account still listing attempts between its two writes gets a write that drops them once
    // their jobs show them counted (or are gone), so `counting` empties when the work is done; one
    // whose period has ended gets the write that starts the next at 0, so a customer held at its
    // plan's limit is admitted again when the period rolls over, with no job ending to trigger it.
    const nowMs = this.now().getTime();
    for (const acct of this.d.accounts.list(this.d.accountNamespace)) {
      const u = acct.status?.usage;
      const ended = u?.periodEnd !== undefined && nowMs >= Date.parse(u.periodEnd);
      if ((u?.counting?.length || ended) && !byAccount.has(acct.spec.customerId))
        byAccount.set(acct.spec.customerId, []);
    }
    for (const [account, list] of byAccount) {
      if (!this.d.leading()) return;
      try {
        await this.countInto(account, list.slice(0, COUNT_BATCH), live.get(account) ?? new Set());
      } catch (err) {
        this.d.log.warn({ account, err: describeError(err) }, "could not count usage into the account");
      }
    }
  }

  private async countInto(customer: string, list: Outstanding[], live: ReadonlySet<string>): Promise<void> {
    const name = billingAccountName(customer);
    const ns = this.d.accountNamespace;
    if (!customerAccount(this.d.accounts.get(ns, name), customer))
      return this.tellAccountMissing(customer, list);
    // Back (or never gone): should it go again, its jobs are told again.
    for (const { job } of list) this.toldMissing.delete(`${job.metadata.uid}\u0000${customer}`);
    const uncounted = list.flatMap(({ job, attempt }) => countEntries(job, attempt));
    // Attempts of this account counted in a pass whose job writes the cache has not shown yet stay
    // listed (`live`): only an attempt its job shows counted (or whose job is gone) leaves `counting`.
    if (!(await this.writeCounts(customer, uncounted, live))) return;
    for (const { job, attempt } of list) await this.writeAttempt(job, attempt.attempt, markCounted(attempt));
  }

  /** One write of the account's period usage with `uncounted` counted; whether it was written. */
  private async writeCounts(
    customer: string,
    uncounted: Parameters<typeof countedUsage>[0]["uncounted"],
    live: ReadonlySet<string>,
  ): Promise<boolean> {
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

  // ---- meters

  private async sendAll(pending: Outstanding[]): Promise<void> {
    const groups = new Map<string, Outstanding[]>();
    for (const w of pending) {
      const key = groupKey(w);
      const list = groups.get(key) ?? [];
      list.push(w);
      groups.set(key, list);
    }
    // One call at a time per customer and meter (Stripe refuses a second with 429); groups in parallel.
    const queue = [...groups.entries()];
    const workers = Array.from({ length: Math.min(queue.length, this.d.concurrency ?? 8) }, async () => {
      for (let next = queue.shift(); next; next = queue.shift()) await this.sendGroup(next[0], next[1]);
    });
    await Promise.all(workers);
  }

  private async sendGroup(key: string, list: Outstanding[]): Promise<void> {
    const b = this.backoff.get(key);
    if (b && b.until > this.now().getTime()) return;
    // Held: nothing stamped or sent (the attempts stay Pending) until the meter is fixed.
    if (this.d.held?.(list[0]?.attempt.eventName ?? "") !== undefined) return;
    // An attempt whose reported count its account lists was accepted (that count is written only
    // after the provider's acceptance): a write before its job's was lost (a crash, a leader
    // change). It is settled as accepted, never sent again nor refused.
    const customer = list[0]!.job.status!.usage!.account!;
    const counting = new Set(
      this.d.accounts.get(this.d.accountNamespace, billingAccountName(customer))?.status?.usage?.counting,
    );
    const found = list.filter((w) => counting.has(reportedCountId(this.idOf(w))));
    if (found.length > 0) {
      list = list.filter((w) => !found.includes(w));
      const at = (w: Outstanding) => seconds(w.attempt.endedAt)!;
      await this.settleAccepted(
        customer,
        found.map((w) => ({ w, event: this.eventOf(w.job, w.attempt, at(w)), fresh: false })),
      );
    }
    list.sort((x, y) => Date.parse(x.attempt.endedAt) - Date.parse(y.attempt.endedAt));
    // More than one waiting: batches of up to 100 through the v2 stream, one call at a time; a
    // batch the stream will not take is sent one event at a time through v1, whose answer says.
    let unstreamable: Outstanding[] = [];
    while (list.length > 0) {
      if (this.stopped || !this.d.leading()) return;
      let ok: boolean;
      if (list.length > 1 && this.d.meter!.sendBatch) {
        const batch = list.splice(0, STREAM_BATCH_MAX);
        const sent = await this.sendBatch(batch);
        if (sent === "unstreamable") {
          unstreamable = unstreamable.concat(batch);
          continue;
        }
        ok = sent;
      } else ok = await this.sendOne(list.shift()!);
      if (!ok) return this.backOff(key);
      this.backoff.delete(key);
    }
    for (const w of unstreamable) {
      if (this.stopped || !this.d.leading()) return;
      if (!(await this.sendOne(w))) return this.backOff(key);
      this.backoff.delete(key);
    }
  }

  private backOff(key: string): void {
    // Doubling while the failures follow one another; a success starts it over.
    const prior = this.backoff.get(key)?.delayMs ?? 0;
    const delayMs = Math.min(BACKOFF_MAX_MS, Math.max(BACKOFF_MIN_MS, prior * 2));
    const waitMs = delayMs + Math.random() * delayMs * 0.2;
    this.backoff.set(key, { until: this.now().getTime() + waitMs, delayMs });
    // Tried again when the backoff ends, not at the next tick.
    setTimeout(() => this.wake(), waitMs).unref();
  }

  /**
   * Sends attempts of one customer and event name as one v2 stream batch: each stamped firstSentAt
   * before the call (the outbox knows a send may have happened), each marked Reported after the
   * 200. False when the group must back off; "unstreamable" when v1 must send them one by one.
   */
  private async sendBatch(batch: Outstanding[]): Promise<boolean | "unstreamable"> {
    const nowMs = this.now().getTime();
    const nowS = Math.floor(nowMs / 1000);
    const ready: Array<{ w: Outstanding; event: MeterEvent }> = [];
    await eachLimited(batch, WRITE_CONCURRENCY, async (w) => {
      const { job, attempt } = w;
      const verdict = meterSendVerdict(seconds(attempt.endedAt)!, seconds(attempt.firstSentAt), nowS);
      if (verdict.send !== "now") {
        await this.sendOne(w); // refused (too old, or past the dedup window) with its reason
        return;
      }
      let current = job;
      if (attempt.firstSentAt === undefined) {
        const stamped = await this.writeAttempt(
          job,
          attempt.attempt,
          stampFirstSent(new Date(nowMs).toISOString()),
        );
        if (!stamped) return; // changed or gone meanwhile: the next pass sees it as it is
        current = stamped;
      }
      ready.push({ w: { job: current, attempt }, event: this.eventOf(job, attempt, verdict.timestamp) });
    });
    if (ready.length === 0) return true;
    const events = ready.map((r) => r.event);
    const result = await this.withQuickRetries(() => this.d.meter!.sendBatch!(events), events.length);
    if (!result) return false;
    if (result.outcome === "unstreamable") {
      this.d.log.info({ reason: result.reason, events: events.length }, "meter events sent one by one");
      return "unstreamable";
    }
    if (result.outcome === "retry") {
      this.d.metrics?.sends.inc({ outcome: "retry" }, events.length);
      this.d.log.info(
        { events: events.length, reason: result.reason },
        "meter event batch not recorded yet; retrying with backoff",
      );
      return false;
    }
    this.d.metrics?.sends.inc({ outcome: "recorded" }, ready.length);
    await this.settleAccepted(
      ready[0]!.event.customer,
      ready.map((r) => ({ ...r, fresh: true })),
    );
    return true;
  }

  /**
   * After the provider accepted these attempts of one customer: one write of its account counting
   * what each still owes (its used seconds if not counted yet, and its reported seconds), then one
   * write per job marking it Reported and counted. Without the account or its write: Reported
   * alone, and the count pass counts it later, as any uncounted attempt.
   */
  private async settleAccepted(customer: string, accepted: Accepted[]): Promise<void> {
    const ns = this.d.accountNamespace;
    const name = billingAccountName(customer);
    let counted = false;
    if (customerAccount(this.d.accounts.get(ns, name), customer)) {
      const uncounted = accepted.flatMap(({ w }) => acceptedCounts(this.idOf(w), w.attempt));
      // What stays listed: the ids the jobs do not show marked in the cache now (the earlier
      // batches' marks that it shows leave, so a pass of many batches does not fill `counting`),
      // and the ones this write adds.
      const live = liveByAccount(this.outstanding()).get(customer) ?? new Set<string>();
      for (const u of uncounted) live.add(u.id);
      try {
        counted = await this.writeCounts(customer, uncounted, live);
      } catch (err) {
        this.d.log.warn({ account: customer, err: describeError(err) }, "could not count reported usage");
      }
    }
    const reportedAt = this.now();
    await eachLimited(accepted, WRITE_CONCURRENCY, async ({ w, event, fresh }) => {
      const written = await this.markReported(w.job, w.attempt, event, reportedAt, counted);
      if (written && fresh) this.d.metrics?.meteredSeconds.inc({ event_name: event.eventName }, event.value);
    });
  }

  private idOf({ job, attempt }: Outstanding): string {
    return attemptIdentifier(job.metadata.uid, attempt);
  }

  /**
   * Marks the attempt Reported (`counted`: and its seconds counted, the account's write done), and
   * `afterInvoice` when its period's invoice was finalized before the provider accepted it (a
   * Warning Event and a count: that usage is on no invoice).
   */
  private async markReported(
    job: MediaJob,
    attempt: UsageAttempt,
    event: MeterEvent,
    reportedAt: Date,
    counted: boolean,
  ): Promise<MediaJob | undefined> {
    const graceSeconds = this.d.invoiceGraceSeconds ?? DEFAULT_INVOICE_GRACE_SECONDS;
    const subscriptionPeriod = this.d.accounts.get(
      this.d.accountNamespace,
      billingAccountName(event.customer),
    )?.status?.subscriptionPeriod;
    const eventAt = new Date(event.timestamp * 1000);
    const late = acceptedAfterInvoice({ eventAt, acceptedAt: reportedAt, subscriptionPeriod, graceSeconds });
    const written = await this.writeAttempt(
      job,
      attempt.attempt,
      (counted ? markReportedCounted : markReported)(reportedAt.toISOString(), late),
    );
    if (written && late) {
      this.d.metrics?.afterInvoice.inc({ event_name: event.eventName }, event.value);
      const { periodEnd } = periodAt(eventAt, subscriptionPeriod);
      void this.d.events.record(
        written,
        "Warning",
        "UsageAfterInvoice",
        usageAfterInvoice(event.value, periodEnd, graceSeconds),
      );
    }
    return written;
  }

  private eventOf(job: MediaJob, attempt: UsageAttempt, timestamp: number): MeterEvent {
    return {
      eventName: attempt.eventName!,
      customer: job.status!.usage!.account!,
      value: attempt.billedSeconds!,
      identifier: attemptIdentifier(job.metadata.uid, attempt),
      timestamp,
    };
  }

  /** Sends one attempt's usage; false when the group must back off (429, 5xx, no answer). */
  private async sendOne({ job, attempt }: Outstanding): Promise<boolean> {
    const nowMs = this.now().getTime();
    const verdict = meterSendVerdict(
      seconds(attempt.endedAt)!,
      seconds(attempt.firstSentAt),
      Math.floor(nowMs / 1000),
    );
    if (verdict.send === "never") return this.refuse(job, attempt, verdict.reason);
    if (verdict.send === "reconcileFirst") return this.refuse(job, attempt, FORGOTTEN_IDENTIFIER);
    let current = job;
    if (attempt.firstSentAt === undefined) {
      // Written before the call: the outbox knows a send may have happened, and since when.
      const stamped = await this.writeAttempt(
        job,
        attempt.attempt,
        stampFirstSent(new Date(nowMs).toISOString()),
      );
      if (!stamped) return true; // changed or gone meanwhile: the next pass sees it as it is
      current = stamped;
    }
    const event = this.eventOf(job, attempt, verdict.timestamp);
    // A passing fault (a 5xx, a reset connection) is tried again at once, twice, as Stripe's own
    // clients do, before the customer's queue backs off: the same identifier, so never twice.
    const result = await this.withQuickRetries(() => this.d.meter!.send(event), 1);
    if (!result) return false;
    this.d.metrics?.sends.inc({
      outcome: result.outcome === "recorded" && result.duplicate ? "duplicate" : result.outcome,
    });
    if (result.outcome === "retry") {
      this.d.log.info(
        { job: keyOf(job), attempt: attempt.attempt, reason: result.reason },
        "meter event not recorded yet; retrying with backoff",
      );
      return false;
    }
    if (result.outcome === "refused") return this.refuse(current, attempt, result.reason);
    await this.settleAccepted(event.customer, [
      { w: { job: current, attempt }, event, fresh: !result.duplicate },
    ]);
    return true;
  }

  /**
   * Calls the meter, and again at once after a passing fault, QUICK_RETRIES times (the same
   * identifiers, so never twice). Undefined when this process stopped or lost the lead meanwhile.
   */
  private async withQuickRetries<R extends { outcome: string }>(
    call: () => Promise<R>,
    events: number,
  ): Promise<R | undefined> {
    let result = await call();
    for (let retry = 0; result.outcome === "retry" && retry < QUICK_RETRIES; retry++) {
      this.d.metrics?.sends.inc({ outcome: "retry" }, events);
      await new Promise((r) => setTimeout(r, QUICK_RETRY_MS * (retry + 1) * (0.5 + Math.random())));
      if (this.stopped || !this.d.leading()) return undefined;
      result = await call();
    }
    return result;
  }

  private async refuse(job: MediaJob, attempt: UsageAttempt, reason: string): Promise<boolean> {
    const written = await this.writeAttempt(job, attempt.attempt, markRefused(reason));
    const id = attemptIdentifier(job.metadata.uid, attempt);
    if (written && !this.told.has(id)) {
      if (this.told.size >= 10_000) this.told.clear(); // bounded: at worst an Event told twice
      this.told.add(id);
      this.d.metrics?.refused.inc();
      void this.d.events.record(written, "Warning", "UsageNotReported", usageNotReported(attempt, reason));
    }
    return true;
  }

  /**
   * Changes one attempt of the job's status.usage (a read-modify-write with the resourceVersion,
   * re-read on conflict), only on the same object (its uid). Returns the written job.
   */
  private async writeAttempt(
    job: MediaJob,
    attempt: number,
    change: (a: UsageAttempt) => UsageAttempt | undefined,
  ): Promise<MediaJob | undefined> {
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
        const attempts = usage.attempts.with(i, next);
        const status: MediaJobStatus = { ...cur.status, usage: { ...usage, attempts } };
        return { ...cur, status };
      },
      5,
    );
    return res.written ? res.object : undefined;
  }
}

const seconds = (iso: string | undefined): number | undefined =>
  iso === undefined ? undefined : Math.floor(Date.parse(iso) / 1000);

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

const keyOf = (job: MediaJob): string => `${job.metadata.namespace}/${job.metadata.name}`;

/** The counts an attempt still owes its account, under its meter identifier. */
const countEntries = (job: MediaJob, a: UsageAttempt): UncountedAttempt[] =>
  owedCounts(attemptIdentifier(job.metadata.uid, a), a);

/** A customer's meter: its sends go one call at a time, and back off together. */
const groupKey = (w: Outstanding): string =>
  `${w.job.status!.usage!.account ?? ""}\u0000${w.attempt.eventName ?? ""}`;

/**
 * Per account, every count id its outstanding attempts may have listed in its `counting` without
 * the mark on the job yet (liveCountIds), as the cache shows them: what an account write may keep
 * listed. An id leaves only once the cache shows its job marked (or gone), so no later pass, which
 * reads the same cache, can find the attempt uncounted while its id is no longer listed.
 */
function liveByAccount(work: readonly Outstanding[]): Map<string, Set<string>> {
  const live = new Map<string, Set<string>>();
  for (const { job, attempt } of work) {
    const account = job.status!.usage!.account;
    if (account === undefined) continue;
    const ids = live.get(account) ?? new Set<string>();
    for (const id of liveCountIds(attemptIdentifier(job.metadata.uid, attempt), attempt)) ids.add(id);
    live.set(account, ids);
  }
  return live;
}

/** A job's billed attempts still to be metered or counted. */
function outstandingAttempts(job: MediaJob): UsageAttempt[] {
  const usage = job.status?.usage;
  if (!usage) return [];
  return usage.attempts.filter(
    (a) => a.billedSeconds !== undefined && (a.meter === "Pending" || awaitsCount(usage, a)),
  );
}

const hasOutstanding = (job: MediaJob): boolean => outstandingAttempts(job).length > 0;
