// Customers on plans under the same faults (docs/design.md, "Plans"). The controllers run with
// MEDIA_PLANS as the chart renders its `plans` value; a few customers subscribe (a subscription
// event through the sidecars, carrying its price) to a plan with a small GPU-seconds cap and a
// concurrency cap, and each creates a burst of jobs worth about 2.5 times its cap. Once the run sees a
// customer's BillingAccount at its cap, it holds the customer there for a while (its other jobs
// wait, Admitted=False UsageLimitReached), then upgrades the subscription to a plan with room (a
// second event), as a customer buying more would: every job then ends, none waits forever.
//
// The checks, once everything has settled:
//  - usageLimitOvershootSeconds: of each customer's runs under the capped plan, the seconds billed
//    to runs admitted or started after the limit was reached, as far as they took the account past
//    the cap. The limit is reached when the billed seconds of the attempts that have ended (each
//    attempt's end and billedSeconds, written in the one status write that ends it: the product's
//    own knowledge) add up to the cap, as a watch shows them: the product promises the limit from
//    when its cache shows the end (docs/design.md, "Plans"), and an end is dated when its pass
//    began, before the provider read that found it and before the write (by the sidecar, for a
//    callback) reached the controller's cache. The run watches the jobs itself and takes the
//    time it first saw each end, plus `watchSkewMs` for the controller's watch to deliver the same
//    event (the two clients of one apiserver do not read an event at the same instant). Which runs started when, and what they billed, is the
//    provider's record (the simulator's ended jobs, with when a worker started each), not the
//    product's view: a job still IN_QUEUE at the provider when the limit was reached must be
//    cancelled there, so a worker that starts it later counts. The jobs already running then may
//    take the account past the cap (the documented allowance); a job submitted after the limit may
//    not, nor one a worker starts after the controller's reaction (a tick, the read, the mark and
//    the cancel, lengthened by an outage the run injected meanwhile). Invariant 0;
//  - the raw overshoot (provider-billed seconds under the capped plan minus its cap), for information, and
//    how long after the limit was reached the account's own count (status.usage.usedSeconds,
//    which admission reads) was seen to show it;
//  - concurrencyOverPlan: the most attempts of one customer running at once (Processing, as the
//    plan counts them: from the submission of each attempt to the recorded end of it) beyond its
//    plan's maxConcurrentJobs. Invariant 0; when it is not, the attempts running at that moment are
//    listed in the customer's figures.
import type { BillingAccount } from "../../src/crds/billingaccount.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import type { KubeApi } from "../../src/k8s/api.js";
import type { Plans } from "../../src/mediajob/plans.js";
import { billableSeconds } from "../../src/mediajob/usage.js";
import { Informer } from "../../src/runtime/informer.js";
import { pino } from "pino";
import { burstJobs } from "../bursts.js";
import type { Outage, PlannedBurst } from "./accounts.js";
import type { EndedProviderJob } from "./metering.js";
import { postEvent } from "./payments.js";
import type { Rng } from "./rng.js";

/** The run's price ids: the capped plan, the one a held customer upgrades to, one without caps. */
export const PRICES = {
  capped: "price_chaos_capped",
  upgraded: "price_chaos_upgraded",
  open: "price_chaos_open",
} as const;
/** Both plans of the customers on plans allow this many jobs at once. */
const MAX_CONCURRENT_JOBS = 2;
/** policy.executionTimeout of every account's jobs: far above a simulated run. */
const MAX_EXECUTION_TIMEOUT_MS = 600_000;

/** MEDIA_PLANS for the run: the capped plan's seconds are `capSeconds`. */
export function chaosPlans(capSeconds: number): Plans {
  return {
    [PRICES.capped]: {
      gpuSecondsPerPeriod: capSeconds,
      maxConcurrentJobs: MAX_CONCURRENT_JOBS,
      maxExecutionTimeoutMs: MAX_EXECUTION_TIMEOUT_MS,
    },
    [PRICES.upgraded]: {
      gpuSecondsPerPeriod: 1_000_000_000,
      maxConcurrentJobs: MAX_CONCURRENT_JOBS,
      maxExecutionTimeoutMs: MAX_EXECUTION_TIMEOUT_MS,
    },
    // The other accounts (metered customers, burst accounts): plans are configured, so an account
    // without one would wait (NoPlan); theirs caps nothing.
    [PRICES.open]: { gpuSecondsPerPeriod: 1_000_000_000, maxExecutionTimeoutMs: MAX_EXECUTION_TIMEOUT_MS },
  };
}

export const planCustomers = (seed: number, count: number): string[] =>
  Array.from({ length: count }, (_, i) => `cus_plan${seed}x${i}`);

/** One burst of `size` single jobs per customer, at a random point of the first 40 % of the run. */
export function planCustomerBursts(rng: Rng, customers: readonly string[], size: number): PlannedBurst[] {
  return customers.map((account, c) => ({
    account,
    atProgress: rng.between(0.05, 0.4),
    jobs: burstJobs(account, size, (i) => ({
      name: `plan-${c}-${String(i).padStart(5, "0")}`,
      spec: { workload: rng.pick(["asr", "tts", "render"] as const), maxAttempts: 2, input: { n: i } },
    })),
  }));
}

/** A Stripe subscription event for the customer's subscription, active on one price. */
export function subscriptionEvent(customer: string, priceId: string, n: number, created: number) {
  return {
    id: `evt_${customer}_${n}`,
    object: "event",
    type: n === 0 ? "customer.subscription.created" : "customer.subscription.updated",
    created,
    livemode: false,
    data: {
      object: {
        id: `sub_${customer}`,
        object: "subscription",
        customer,
        status: "active",
        items: { object: "list", data: [{ id: `si_${customer}_${n}`, price: { id: priceId } }] },
      },
    },
  };
}

/**
 * Delivers an event as the provider does: posted to both sidecars at once (so twice), again every
 * second until one answers 2xx or `until()` turns false. True once delivered.
 */
export async function deliver(
  event: object,
  sidecars: () => string[],
  secret: string,
  until: () => boolean,
): Promise<boolean> {
  const body = JSON.stringify(event);
  while (until()) {
    const answers = await Promise.all(sidecars().map((url) => postEvent(url, body, secret)));
    if (answers.some((a) => a.startsWith("2"))) return true;
    await new Promise((r) => setTimeout(r, 1_000));
  }
  return false;
}

/**
 * Watches the customers' BillingAccounts: notes when each is first seen at its cap, holds it
 * there for `holdMs`, then upgrades it; and, from the run's job lists, the most of their jobs seen
 * waiting on the limit at once.
 */
export class PlanLimits {
  /** Customer -> when its account was first seen at the cap (ms; after the answer arrived). */
  readonly reachedAt = new Map<string, number>();
  /** Customer -> when its upgrade was first sent (ms; before the first post). */
  readonly upgradedAt = new Map<string, number>();
  /** The most jobs of these customers seen waiting with UsageLimitReached at once. */
  waitingSeen = 0;
  /** endKey(job, attempt) -> when a watch on the jobs first showed the attempt's end (ms). */
  readonly endsSeen = new Map<string, number>();
  readonly #customers: ReadonlySet<string>;

  constructor(
    private readonly o: {
      api: KubeApi;
      namespace: string;
      customers: readonly string[];
      capSeconds: number;
      holdMs: number;
      upgrade: (customer: string) => Promise<void>;
    },
  ) {
    this.#customers = new Set(o.customers);
  }

  /** A job list the run read: counts the jobs waiting on the limit. */
  sawJobs(jobs: readonly MediaJob[]): void {
    const waiting = jobs.filter(
      (j) => this.#customers.has(j.spec.account ?? "") && j.status?.reason === "UsageLimitReached",
    ).length;
    this.waitingSeen = Math.max(this.waitingSeen, waiting);
  }

  /** Notes when the customers' jobs' attempt ends are first seen (an informer's event). */
  private sawEnds(job: MediaJob): void {
    if (!this.#customers.has(job.spec.account ?? "")) return;
    const now = Date.now();
    for (const a of job.status?.usage?.attempts ?? []) {
      const key = endKey(job.metadata.name, a.attempt);
      if (!this.endsSeen.has(key)) this.endsSeen.set(key, now);
    }
  }

  /**
   * Polls every 500 ms until `done()`, watching the jobs meanwhile (relisting across a control
   * plane restart as the controller does); resolves once every upgrade it started has landed.
   */
  async run(done: () => boolean): Promise<void> {
    const jobs = new Informer<MediaJob>(this.o.api, {
      plural: "mediajobs",
      namespace: this.o.namespace,
      log: pino({ level: "silent" }),
    });
    jobs.on((event, job) => event !== "delete" && this.sawEnds(job));
    await jobs.start();
    try {
      await this.poll(done);
    } finally {
      await jobs.stop();
    }
  }

  private async poll(done: () => boolean): Promise<void> {
    const upgrades: Array<Promise<void>> = [];
    while (!done()) {
      const accounts = await this.o.api
        .list<BillingAccount>("billingaccounts", this.o.namespace)
        .then((l) => l.items)
        .catch(() => [] as BillingAccount[]); // the control plane is restarting
      const seenAt = Date.now();
      for (const a of accounts) {
        const customer = a.spec.customerId;
        if (!this.#customers.has(customer) || this.reachedAt.has(customer)) continue;
        const capped = a.status?.priceIds?.includes(PRICES.capped) === true;
        if (capped && (a.status?.usage?.usedSeconds ?? 0) >= this.o.capSeconds)
          this.reachedAt.set(customer, seenAt);
      }
      for (const [customer, at] of this.reachedAt) {
        if (this.upgradedAt.has(customer) || Date.now() - at < this.o.holdMs) continue;
        this.upgradedAt.set(customer, Date.now());
        upgrades.push(this.o.upgrade(customer));
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    await Promise.all(upgrades);
  }
}

export interface PlanCheck {
  customers: number;
  jobs: number;
  /** Customers whose account was seen at its cap (and held there, then upgraded). */
  reachedLimit: number;
  waitingSeen: number;
  /**
   * The most seconds any customer went past its cap beyond the jobs already running (submitted
   * after the limit, or started at the provider after it and the controller's reaction): invariant 0.
   */
  usageLimitOvershootSeconds: number;
  /** The longest from a customer's limit being reached to its account seen showing it, s. */
  usageLimitCountLagSeconds: number;
  /** The most seconds any customer's capped-plan attempts were billed past the cap. */
  usageLimitOvershootRawSeconds: number;
  /** The most jobs any customer had running at once beyond its plan's cap: invariant 0. */
  concurrencyOverPlan: number;
  /** The most jobs any customer had running at once. */
  maxRunning: number;
  perCustomer: Array<{
    customer: string;
    cappedSeconds: number;
    overshootSeconds: number;
    lateSeconds: number;
    lateAttempts: string[];
    /** Seconds billed at the provider to runs a worker started after the limit and the reaction. */
    lateStartedSeconds: number;
    lateStartedRuns: string[];
    maxRunning: number;
    /** When maxRunning is above the plan's cap: the attempts running at that moment. */
    runningAtOnce?: unknown[];
    /** From the limit being reached to the account seen showing it, s. */
    countLagSeconds: number;
    /** When the ended attempts' billed seconds reached the cap. */
    limitReachedAt?: string;
    /** When the account was first seen at the cap. */
    reachedAt?: string;
    upgradedAt?: string;
  }>;
}

interface AttemptSpan {
  job: string;
  attempt: number;
  /** When its intent was written, ms; NaN when the job's status no longer says. */
  submitted: number;
  /** When its end was recorded, ms. */
  ended: number;
  /** When the run's watch first showed its end, ms; its recorded end when the watch missed it. */
  seen: number;
  billedSeconds: number;
}

const ms = (iso: string | undefined) => Date.parse(iso ?? "");

/**
 * Each attempt a job's status still dates: the first from status.startedAt, the current one from
 * status.submittedAt (both the intent's time), one in between from the end of the one before it
 * (an earlier bound: it was submitted after that). Ends: the attempt's usage record, or for a last
 * attempt that recorded none, the job's completedAt (or now, if still running). A job runs one
 * attempt at a time and nothing once it has ended: an end is never later than the next attempt's
 * submission, nor than the job's completedAt.
 */
function attemptSpans(job: MediaJob, nowMs: number, endsSeen: ReadonlyMap<string, number>): AttemptSpan[] {
  const s = job.status ?? {};
  const usage = s.usage?.attempts ?? [];
  const spans: AttemptSpan[] = [];
  const submittedOf = (attempt: number, before: number) =>
    attempt === 1 ? ms(s.startedAt) : attempt === s.attempts ? ms(s.submittedAt) : before;
  let previousEnd = NaN;
  for (const a of [...usage].sort((x, y) => x.attempt - y.attempt)) {
    const ended = ms(a.endedAt);
    spans.push({
      job: job.metadata.name,
      attempt: a.attempt,
      submitted: submittedOf(a.attempt, previousEnd),
      ended,
      seen: Math.max(ended, endsSeen.get(endKey(job.metadata.name, a.attempt)) ?? ended),
      billedSeconds: a.billedSeconds ?? 0,
    });
    previousEnd = ended;
  }
  const last = s.attempts ?? 0;
  if (last > 0 && !usage.some((a) => a.attempt === last)) {
    const terminal = ["Completed", "Failed", "Cancelled"].includes(s.phase ?? "");
    const ended = terminal ? ms(s.completedAt) : s.phase === "Processing" ? nowMs : NaN;
    spans.push({
      job: job.metadata.name,
      attempt: last,
      submitted: submittedOf(last, previousEnd),
      ended,
      seen: ended,
      billedSeconds: 0,
    });
  }
  const completed = ms(s.completedAt);
  spans.forEach((span, i) => {
    const next = spans[i + 1]?.submitted ?? NaN;
    for (const bound of [next, completed]) if (bound < span.ended) span.ended = bound;
  });
  return spans;
}

/**
 * The most spans open at once, and the spans open when that was first reached; one that ends at
 * the instant another starts does not overlap it.
 */
function mostAtOnce(spans: readonly AttemptSpan[]): { most: number; open: AttemptSpan[] } {
  const edges = spans
    .filter((s) => Number.isFinite(s.submitted) && Number.isFinite(s.ended))
    .flatMap((s) => [
      { at: s.submitted, d: 1, span: s },
      { at: s.ended, d: -1, span: s },
    ])
    .sort((a, b) => a.at - b.at || a.d - b.d);
  const open = new Set<AttemptSpan>();
  let most: { most: number; open: AttemptSpan[] } = { most: 0, open: [] };
  for (const e of edges) {
    if (e.d > 0) open.add(e.span);
    else open.delete(e.span);
    if (open.size > most.most) most = { most: open.size, open: [...open] };
  }
  return most;
}

/** A span for the report, with what its job's status says of it. */
function described(span: AttemptSpan, jobs: readonly MediaJob[]) {
  const s = jobs.find((j) => j.metadata.name === span.job)?.status;
  return {
    job: span.job,
    attempt: span.attempt,
    submitted: new Date(span.submitted).toISOString(),
    ended: new Date(span.ended).toISOString(),
    phase: s?.phase,
    reason: s?.reason,
    attempts: s?.attempts,
    failures: s?.failures,
    providerLosses: s?.providerLosses,
    submission: s?.submission?.state,
  };
}

/** When the ended attempts' billed seconds, as the watch showed them, first add up to `cap` (ms). */
function reachedCap(spans: readonly AttemptSpan[], cap: number): number {
  let sum = 0;
  for (const s of spans.filter((x) => Number.isFinite(x.ended)).sort((a, b) => a.seen - b.seen)) {
    sum += s.billedSeconds;
    if (sum >= cap) return s.seen;
  }
  return Infinity;
}

/** The key of an attempt's end in `endsSeen`. */
const endKey = (job: string, attempt: number): string => `${job}#${attempt}`;

/** What the provider ran (the simulator's record) and how fast the controller may react to a cap. */
export interface ProviderRecord {
  ended: readonly EndedProviderJob[];
  /** From the limit being recorded to a queued job's cancel at the provider, ms: a tick and the calls. */
  reactionMs: number;
  /** How much later than the run's watch the controller's may deliver an event, ms. */
  watchSkewMs: number;
  outages: readonly Outage[];
}

/** Each run at the provider: its job (by the job id it was submitted for) and what it billed. */
function providerRuns(jobs: readonly MediaJob[], ended: readonly EndedProviderJob[]) {
  const byJobId = new Map<string, MediaJob>();
  for (const j of jobs) if (j.status?.jobId !== undefined) byJobId.set(j.status.jobId, j);
  return ended.flatMap((p) => {
    const job = byJobId.get(p.key.replace(/-retry-\d+$/, ""));
    if (!job) return [];
    const billed = billableSeconds({
      status: p.status as never,
      ...(p.executionTime !== undefined && { executionTime: p.executionTime }),
      ...(p.delayTime !== undefined && { delayTime: p.delayTime }),
    });
    return [
      {
        id: p.id,
        job: job.metadata.name,
        account: job.spec.account,
        startedAt: p.startedAt,
        billedSeconds: billed.ok ? billed.seconds : 0,
      },
    ];
  });
}

export function checkPlans(
  jobs: readonly MediaJob[],
  customers: readonly string[],
  capSeconds: number,
  limits: Pick<PlanLimits, "reachedAt" | "upgradedAt" | "waitingSeen"> &
    Partial<Pick<PlanLimits, "endsSeen">>,
  provider: ProviderRecord,
  nowMs = Date.now(),
): PlanCheck {
  const iso = (t: number | undefined) => (t === undefined ? undefined : new Date(t).toISOString());
  const runs = providerRuns(jobs, provider.ended);
  const perCustomer = customers.map((customer) => {
    const endsSeen = limits.endsSeen ?? new Map<string, number>();
    const spans = jobs
      .filter((j) => j.spec.account === customer)
      .flatMap((j) => attemptSpans(j, nowMs, endsSeen));
    const upgraded = limits.upgradedAt.get(customer) ?? Infinity;
    // Admitted under the capped plan: submitted before the upgrade was sent (a job submitted a
    // moment after, before the controller saw it, is left out: the check errs on the lenient side).
    const capped = spans.filter((s) => !(s.submitted >= upgraded));
    const limitReached = reachedCap(capped, capSeconds) + provider.watchSkewMs;
    // Run at the provider under the capped plan: started by a worker before the upgrade was sent.
    const cappedRuns = runs.filter(
      (r) => r.account === customer && r.startedAt !== undefined && r.startedAt < upgraded,
    );
    const cappedSeconds = cappedRuns.reduce((n, r) => n + r.billedSeconds, 0);
    const overshootSeconds = Math.max(0, cappedSeconds - capSeconds);
    // Submitted after the limit was reached: admitted past it.
    const late = capped.filter((s) => s.submitted > limitReached && s.billedSeconds > 0);
    const lateSeconds = late.reduce((n, s) => n + s.billedSeconds, 0);
    // Started by a worker after the limit and the controller's reaction: left queued at the
    // provider when it was to be cancelled there.
    let reactedBy = limitReached + provider.reactionMs;
    for (const o of provider.outages)
      if (o.from < reactedBy && o.to + o.recoveryMs > limitReached) reactedBy += o.to - o.from + o.recoveryMs;
    const lateStarted = cappedRuns.filter((r) => r.startedAt! > reactedBy && r.billedSeconds > 0);
    const lateStartedSeconds = lateStarted.reduce((n, r) => n + r.billedSeconds, 0);
    const seen = limits.reachedAt.get(customer);
    const atOnce = mostAtOnce(spans);
    return {
      customer,
      cappedSeconds,
      overshootSeconds,
      lateSeconds,
      lateAttempts: late.slice(0, 20).map((s) => `${s.job}#${s.attempt}`),
      lateStartedSeconds,
      lateStartedRuns: lateStarted.slice(0, 20).map((r) => `${r.job} (${r.id}, started ${iso(r.startedAt)})`),
      maxRunning: atOnce.most,
      ...(atOnce.most > MAX_CONCURRENT_JOBS && {
        runningAtOnce: atOnce.open.map((span) => described(span, jobs)),
      }),
      countLagSeconds:
        seen !== undefined && Number.isFinite(limitReached) ? Math.max(0, (seen - limitReached) / 1000) : 0,
      ...(Number.isFinite(limitReached) && { limitReachedAt: iso(limitReached) }),
      ...(seen !== undefined && { reachedAt: iso(seen) }),
      ...(limits.upgradedAt.has(customer) && { upgradedAt: iso(upgraded) }),
    };
  });
  const most = (f: (c: (typeof perCustomer)[number]) => number) =>
    perCustomer.reduce((m, c) => Math.max(m, f(c)), 0);
  return {
    customers: customers.length,
    jobs: jobs.filter((j) => customers.includes(j.spec.account ?? "")).length,
    reachedLimit: limits.reachedAt.size,
    waitingSeen: limits.waitingSeen,
    usageLimitOvershootSeconds: most((c) =>
      Math.min(c.overshootSeconds, Math.max(c.lateSeconds, c.lateStartedSeconds)),
    ),
    usageLimitOvershootRawSeconds: most((c) => c.overshootSeconds),
    usageLimitCountLagSeconds: Math.round(most((c) => c.countLagSeconds)),
    concurrencyOverPlan: most((c) => Math.max(0, c.maxRunning - MAX_CONCURRENT_JOBS)),
    maxRunning: most((c) => c.maxRunning),
    perCustomer,
  };
}
