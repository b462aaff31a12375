// The leader's dispatcher: per provider endpoint, how many of our jobs may be submitted and not yet
// finished (the in-flight window, src/mediajob/window.ts), and which waiting jobs get the slots as
// they free (weighted fair share between accounts, src/mediajob/fair-share.ts). Which jobs get the
// free slots is decided by src/mediajob/grant-policy.ts; this class holds the state and the timers.
//
// Everything here is memory, rebuilt from the informer cache: which jobs are in flight (Processing
// at an endpoint) is read from the cache's events on every replica; the window, the fair-share
// tags, the waiting jobs and the grants not yet used are the leader's and start afresh when a
// replica starts leading (lead()). The dispatcher never submits anything itself: a job's pass reads
// what the window would answer it (wouldGrant(), which changes nothing) while it gathers its facts,
// takes the slot (gate()) once its plan is made and, granted, submits through the write-ahead
// protocol, which is what keeps a submission from happening twice across leader changes. Both
// answers come from one step (consider()): gate() is that step put in place. One piece: the
// windows, the fair-share tags, the waiting jobs and the grants are one state that the gate, the
// informer's events and the ticks change together.
import type { GpuEndpoint } from "../../crds/gpuendpoint.js";
import type { MediaJob } from "../../crds/mediajob.js";
import {
  DEFAULT_ACCOUNT,
  fairShareState,
  type FairShareState,
  type Priority,
  type WaitingJob,
  type AccountWeights,
} from "../../mediajob/fair-share.js";
import { windowWait, type SlotFact } from "../../mediajob/queued.js";
import { decideGrants, lowRoom, RUN_LIMIT_WINDOW_MS } from "../../mediajob/grant-policy.js";
import { WaitingQueue } from "../../mediajob/waiting-queue.js";
import {
  ceiling,
  initialWindow,
  onAccepted,
  onThrottled,
  scalerOf,
  windowSize,
  type EndpointCapacity,
  type WindowState,
} from "../../mediajob/window.js";
import { isTerminal } from "../../mediajob/job.js";
import { objectKey } from "../../runtime/informer.js";
import {
  EndpointDispatch,
  roomInputs,
  usedOf,
  waitingWith,
  type EndpointNumbers,
  type GateStep,
  type Round,
} from "./endpoint-dispatch.js";
import { jobAccount } from "../../mediajob/tenancy.js";
import { isPending } from "../../mediajob/job.js";

export interface DispatcherOptions {
  /** Reconcile this job soon: it was granted a slot. */
  wake: (key: string) => void;
  /** A job's typical run before any was seen to finish, seconds. */
  jobSeconds: number;
  /** How long, at worst, between a slot freeing and the next submission, seconds. */
  tickSeconds: number;
  /** Per-account weights (default 1). */
  weights?: AccountWeights;
  /**
   * The endpoint a Pending job seen in the cache would be submitted to now (it is admitted and
   * the endpoint Ready), else undefined: such a job waits from its creation event, not from its
   * first pass. Absent: jobs wait from their first pass only.
   */
  eligible?: (job: MediaJob) => GpuEndpoint | undefined;
  /** A grant the job has not used within this long is taken back (the job did not submit). */
  grantTtlMs?: number;
  now?: () => number;
}

/** What `kubectl media queue` and the GpuEndpoint status show of one endpoint. */
export interface EndpointDispatchView {
  window: number;
  inFlight: number;
  waiting: Record<string, number>;
}

/** RunPod's scaler of an endpoint as the management API reports it. */
export interface ScalerSetting {
  scalerType?: string;
  scalerValue?: number;
}

const priorityOf = (job: MediaJob): Priority => job.spec.priority ?? "normal";

const accountKey = (job: MediaJob): string => jobAccount(job) ?? DEFAULT_ACCOUNT;

/** A job is in flight at an endpoint while it is Processing there. */
function inFlightAt(job: MediaJob): string | undefined {
  const s = job.status;
  return s?.phase === "Processing" && s.endpointId ? s.endpointId : undefined;
}

export class Dispatcher {
  private readonly endpoints = new Map<string, EndpointDispatch>();
  /** Where each in-flight job is, so an event that moves it finds its old endpoint. */
  private readonly where = new Map<string, string>();
  /** The endpoint each waiting job asked about. */
  private readonly waitingAt = new Map<string, string>();
  /** How many jobs of its account were waiting when each waiting job came (the Queued message). */
  private readonly positionAt = new Map<string, number>();
  private readonly scalers = new Map<string, ScalerSetting>();
  private leading = false;
  /** Observed run times (runSecondsOf), seconds, smoothed. */
  private jobSecondsSeen?: number;

  constructor(private readonly o: DispatcherOptions) {}

  private now(): number {
    return this.o.now?.() ?? Date.now();
  }

  private at(endpointId: string): EndpointDispatch {
    let d = this.endpoints.get(endpointId);
    if (!d) {
      d = new EndpointDispatch();
      this.endpoints.set(endpointId, d);
    }
    return d;
  }

  /**
   * The typical job run the ceiling assumes, seconds: the configured one, or less when the jobs
   * seen ran less (runSecondsOf: the provider's executionTime, not their wait in its queue). It is
   * never taken above the setting, only as the sign that jobs are shorter.
   */
  get jobSeconds(): number {
    return Math.min(this.o.jobSeconds, this.jobSecondsSeen ?? Infinity);
  }

  /**
   * This replica starts leading: the leader's memory starts afresh from the cache. In-flight jobs
   * (kept on every replica) seed the fair-share tags, so an account that held many slots under the
   * previous leader does not get more right away.
   */
  lead(cached: Iterable<MediaJob> = []): void {
    this.leading = true;
    for (const d of this.endpoints.values()) {
      d.granted.clear();
      d.waiting.clear();
      d.window = undefined;
      d.fair = undefined;
      clearTimeout(d.holdTimer);
      d.holdTimer = undefined;
    }
    this.waitingAt.clear();
    this.positionAt.clear();
    // The Pending jobs in the cache wait from now, in the order of their creation.
    const pending = [...cached].filter(
      (j) => isPending(j.status) && !j.spec.suspend && !j.metadata.deletionTimestamp,
    );
    pending.sort((a, b) =>
      String(a.metadata.creationTimestamp).localeCompare(String(b.metadata.creationTimestamp)),
    );
    for (const j of pending) this.noticeWaiting(j, objectKey(j));
  }

  stopLeading(): void {
    this.leading = false;
    for (const d of this.endpoints.values()) {
      clearTimeout(d.holdTimer);
      d.holdTimer = undefined;
    }
  }

  /** The informer's view of a job (every replica): in flight, finished, gone. */
  observe(event: "add" | "update" | "delete", job: MediaJob): void {
    const key = objectKey(job);
    const was = this.where.get(key);
    const now = event === "delete" ? undefined : inFlightAt(job);
    if (now !== undefined) {
      if (was !== now) {
        if (was !== undefined) this.leave(was, key);
        this.where.set(key, now);
        const d = this.at(now);
        d.inFlight.add(key);
        d.accountOf.set(key, accountKey(job));
        if (priorityOf(job) === "low") d.low.add(key);
        d.ownMax = Math.max(d.ownMax, d.inFlight.size);
      }
      this.at(now).granted.delete(key);
      this.unwait(key);
    } else if (was !== undefined) {
      this.where.delete(key);
      this.leave(was, key);
      if (event !== "delete" && isTerminal(job.status?.phase)) this.learnDuration(job);
    }
    // A job that cannot go now (gone, suspended, no longer Pending) waits no more.
    if (event === "delete" || job.metadata.deletionTimestamp || job.spec.suspend || !isPending(job.status)) {
      this.unwait(key);
      if (now === undefined) for (const d of this.endpoints.values()) d.granted.delete(key);
    } else this.noticeWaiting(job, key);
  }

  private leave(endpointId: string, key: string): void {
    const d = this.at(endpointId);
    d.inFlight.delete(key);
    d.accountOf.delete(key);
    d.granted.delete(key);
    d.low.delete(key);
    // A slot freed: the next jobs go now, not at the next tick.
    this.pump(endpointId);
  }

  private unwait(key: string): void {
    const at = this.waitingAt.get(key);
    if (at === undefined) return;
    this.waitingAt.delete(key);
    this.positionAt.delete(key);
    const d = this.endpoints.get(at);
    if (!d) return;
    for (const [account, q] of d.waiting) {
      if (q.delete(key) && q.size === 0) d.waiting.delete(account);
    }
  }

  private learnDuration(job: MediaJob): void {
    const s = runSecondsOf(job);
    if (s === undefined) return;
    this.jobSecondsSeen = this.jobSecondsSeen === undefined ? s : 0.9 * this.jobSecondsSeen + 0.1 * s;
  }

  /**
   * What the GpuEndpoint reconcile saw of the endpoint: settings, /health counts, spec.maxInFlight.
   * Our own in-flight count is noted with it (the most we had while the report can have been
   * read), so jobs of ours that finished since are not taken for other clients' jobs.
   */
  observeEndpoint(ep: GpuEndpoint, scaler?: ScalerSetting): void {
    const id = ep.status?.endpointId;
    if (!id) return;
    if (scaler) this.scalers.set(id, scaler);
    const d = this.at(id);
    // An endpoint whose scaler is no longer known has no window until it is again.
    d.capacity = this.capacityOf(ep, id);
    d.ownAtHealth = Math.max(d.ownMaxBefore, d.ownMax, d.inFlight.size);
    d.ownMaxBefore = d.ownMax;
    d.ownMax = d.inFlight.size;
    d.maxInFlight = maxInFlightOf(ep);
    d.workersUp = workersUpOf(ep);
    // More room (a higher ceiling, workers up for low-priority jobs): the waiting jobs go now.
    this.pump(id);
  }

  /**
   * The endpoint's capacity: its workersMax, its scaler (the provider's reading at the last look,
   * else the one the GpuEndpoint's status recorded) and its /health counts. Undefined while the
   * scaler is not known: no window is sized from a guess.
   */
  private capacityOf(ep: GpuEndpoint, id: string): EndpointCapacity | undefined {
    const live = this.scalers.get(id);
    const scaler = live
      ? scalerOf(live.scalerType, live.scalerValue)
      : scalerOf(ep.status?.scalerType, ep.status?.scalerValue);
    if (!scaler) return undefined;
    return {
      workersMax: ep.status?.workersMax ?? ep.spec.maxWorkers,
      scaler,
      inQueue: ep.status?.health?.jobsInQueue ?? 0,
      inProgress: ep.status?.health?.jobsInProgress ?? 0,
      ...(ep.status?.health && {
        workersUp: (ep.status.health.workersIdle ?? 0) + (ep.status.health.workersRunning ?? 0),
      }),
    };
  }

  /**
   * The endpoint's numbers once `ep` is read: its spec.maxInFlight and workers up each time, its
   * capacity the first time a job asks (a new leader's backlog).
   */
  private numbersSeen(d: EndpointDispatch, ep: GpuEndpoint, id: string): EndpointNumbers {
    const fresh = d.capacity === undefined ? this.capacityOf(ep, id) : undefined;
    return {
      capacity: d.capacity ?? fresh,
      ownAtHealth: fresh ? d.inFlight.size : d.ownAtHealth,
      maxInFlight: maxInFlightOf(ep),
      workersUp: workersUpOf(ep),
    };
  }

  private ceilingOf(n: EndpointNumbers): number {
    if (!n.capacity && n.maxInFlight === undefined) return 0;
    return ceiling({
      capacity: n.capacity ?? {
        workersMax: 0,
        scaler: { type: "QUEUE_DELAY", seconds: 4 },
        inQueue: 0,
        inProgress: 0,
      },
      ownInFlight: n.ownAtHealth,
      jobSeconds: this.jobSeconds,
      tickSeconds: this.o.tickSeconds,
      ...(n.maxInFlight !== undefined && { maxInFlight: n.maxInFlight }),
    });
  }

  private windowOf(d: EndpointDispatch): WindowState {
    d.window ??= initialWindow();
    return d.window;
  }

  /**
   * A Pending job that may be submitted now takes a slot of its endpoint: it joins the endpoint's
   * waiting jobs (once: a job already waiting there keeps its place) and the free slots are handed
   * out. Granted once, it keeps its grant until its submission shows in the cache (or the grant
   * expires unused). The answer is wouldGrant()'s: the same step, put in place.
   */
  gate(job: MediaJob, ep: GpuEndpoint): SlotFact {
    const step = this.consider(job, ep);
    this.take(step);
    return step.fact;
  }

  /**
   * What gate() would answer now, with nothing changed: no job joins the waiting jobs, no grant is
   * made or expires, no timer is set, no job is woken. The pass gathers this; it takes the slot
   * with gate() once its plan is made.
   */
  wouldGrant(job: MediaJob, ep: GpuEndpoint): SlotFact {
    return this.consider(job, ep).fact;
  }

  /**
   * gate()'s step, read from the state and left out of it: the endpoint's numbers from `ep`, the
   * job joining the waiting jobs, the grant round on a waiting list that includes it (on copies of
   * the grants), and the answer from the state that would follow.
   */
  private consider(job: MediaJob, ep: GpuEndpoint): GateStep {
    const id = ep.status!.endpointId!;
    const key = objectKey(job);
    const d = this.endpoints.get(id) ?? new EndpointDispatch();
    const numbers = this.numbersSeen(d, ep, id);
    const step = { id, key, d, numbers };
    if (d.inFlight.has(key) || d.granted.has(key)) return { ...step, holds: true, fact: { granted: true } };
    const nowMs = this.now();
    const join = this.waitingAt.get(key) === id ? undefined : this.joining(job, key, d, nowMs);
    const round = this.leading ? this.round(d, numbers, nowMs, waitingWith(d.waiting, join?.job)) : undefined;
    const position = join?.position ?? this.positionAt.get(key) ?? 0;
    const fact = this.answer(job, ep, { ...step, nowMs, slots: round ?? d, position });
    return { ...step, holds: false, ...(join && { join }), ...(round && { round }), fact };
  }

  /** The gate's answer from the state after the step: granted, or why the job waits. */
  private answer(
    job: MediaJob,
    ep: GpuEndpoint,
    a: {
      id: string;
      key: string;
      d: EndpointDispatch;
      numbers: EndpointNumbers;
      /** The grants after the round (the endpoint's own when no round runs). */
      slots: Pick<Round, "granted" | "low">;
      nowMs: number;
      position: number;
    },
  ): SlotFact {
    const { id, numbers, nowMs } = a;
    if (a.slots.granted.has(a.key)) return { granted: true };
    if (!numbers.capacity && numbers.maxInFlight === undefined)
      return windowWait.scalerUnknown(id, ep.status?.scalerType, ep.status?.scalerValue);
    const used = usedOf(a.d.inFlight, a.slots.granted, a.slots.low);
    const ceil = this.ceilingOf(numbers);
    const window = a.d.window ?? initialWindow();
    const held = nowMs < window.notBefore;
    if (!held && ceil > 0 && priorityOf(job) === "low" && lowRoom({ used, ...roomInputs(numbers) }) <= 0)
      return windowWait.lowPriority(id, {
        up: numbers.workersUp.idle + numbers.workersUp.running,
        normal: used.normal,
        low: used.low,
      });
    if (held) return windowWait.throttled(id, new Date(window.notBefore).toISOString());
    if (ceil === 0) return windowWait.noCapacity(id);
    return windowWait.windowFull(id, used.normal + used.low, windowSize(window, ceil, nowMs), a.position);
  }

  /** gate()'s step put in place: the numbers, the job's place among the waiting jobs, the round. */
  private take(step: GateStep): void {
    const { id, key, d } = step;
    if (!this.endpoints.has(id)) this.endpoints.set(id, d);
    Object.assign(d, step.numbers);
    if (step.holds) return;
    if (step.join) this.enqueue(d, id, step.join.job, step.join.position);
    if (step.round) this.commit(id, d, step.round, key);
  }

  /** How `job` would join the endpoint's waiting jobs, and how many of its account wait before it. */
  private joining(
    job: MediaJob,
    key: string,
    d: EndpointDispatch,
    nowMs: number,
  ): { job: WaitingJob; position: number } {
    const account = accountKey(job);
    return {
      job: {
        id: key,
        account,
        priority: priorityOf(job),
        createdAt: Date.parse(String(job.metadata.creationTimestamp ?? "")) || nowMs,
      },
      position: d.waiting.get(account)?.size ?? 0,
    };
  }

  /** The job waits for a slot of endpoint `id`, at the end of its account's waiting jobs. */
  private enqueue(d: EndpointDispatch, id: string, job: WaitingJob, position: number): void {
    this.unwait(job.id);
    // The tags start from the jobs in flight when the first job waits, not when a slot frees:
    // by then the jobs that held the slots may have finished.
    d.fair ??= this.initialFair(d);
    const account = job.account ?? DEFAULT_ACCOUNT;
    let q = d.waiting.get(account);
    if (!q) d.waiting.set(account, (q = new WaitingQueue()));
    this.positionAt.set(job.id, position);
    q.add(job);
    this.waitingAt.set(job.id, id);
  }

  /**
   * A Pending job seen in the cache that could be submitted now (options.eligible: admitted, its
   * endpoint Ready) waits from this moment, before its own pass: fair share is decided from the
   * cache, not from the order in which the work queue gets to the jobs. Granted, it is woken.
   */
  private noticeWaiting(job: MediaJob, key: string): void {
    if (!this.leading || !this.o.eligible || this.waitingAt.has(key) || this.where.has(key)) return;
    const ep = this.o.eligible(job);
    const id = ep?.status?.endpointId;
    if (!ep || !id) return;
    const d = this.at(id);
    if (d.granted.has(key)) return;
    Object.assign(d, this.numbersSeen(d, ep, id));
    const { job: waiting, position } = this.joining(job, key, d, this.now());
    this.enqueue(d, id, waiting, position);
    this.grant(id, d);
  }

  /** Hands the free slots of an endpoint to the next waiting jobs, and wakes them. */
  private grant(id: string, d: EndpointDispatch): void {
    if (!this.leading) return;
    this.commit(id, d, this.round(d, d, this.now(), [...d.waiting.values()]));
  }

  /**
   * A grant round, on copies of the endpoint's grants: those unused past their TTL expire, the
   * /run limit's window moves on, and the free slots go to `waiting` (grant-policy.ts).
   */
  private round(
    d: EndpointDispatch,
    n: EndpointNumbers,
    nowMs: number,
    waiting: Iterable<Iterable<WaitingJob>>,
  ): Round {
    const ttl = this.o.grantTtlMs ?? 30_000;
    // The round works on copies, made only when it changes something: most rounds (a job asking
    // while the window is full) change nothing, and a window of hundreds is copied for nothing.
    let granted = d.granted;
    for (const [key, at] of d.granted)
      if (nowMs - at > ttl && !d.inFlight.has(key)) {
        if (granted === d.granted) granted = new Map(d.granted);
        granted.delete(key);
      }
    // RunPod's /run limit per endpoint (https://docs.runpod.io/serverless/endpoints/send-requests#rate-limits):
    // the grants of the last 10 s, each one /run, stay under it (a window of thousands refilled
    // at once, or jobs that end at once, would otherwise exceed it).
    let past = 0;
    while (past < d.recentGrants.length && nowMs - d.recentGrants[past]! >= RUN_LIMIT_WINDOW_MS) past++;
    let recentGrants = past ? d.recentGrants.slice(past) : d.recentGrants;
    let low = d.low;
    const decision = decideGrants({
      nowMs,
      window: d.window ?? initialWindow(),
      ceiling: this.ceilingOf(n),
      used: usedOf(d.inFlight, granted, low),
      recentGrants,
      waiting,
      ...roomInputs(n),
      fair: d.fair ?? this.initialFair(d),
      ...(this.o.weights && { weights: this.o.weights }),
    });
    if (decision.granted.length) {
      if (granted === d.granted) granted = new Map(d.granted);
      if (recentGrants === d.recentGrants) recentGrants = [...d.recentGrants];
      low = new Set(d.low);
    }
    for (const job of decision.granted) {
      granted.set(job.id, nowMs);
      if (job.priority === "low") low.add(job.id);
      recentGrants.push(nowMs);
    }
    return {
      granted,
      low,
      recentGrants,
      fair: decision.fair,
      picked: decision.granted,
      ...(decision.recheckInMs !== undefined && { recheckInMs: decision.recheckInMs }),
    };
  }

  /** A round put in place: the picked jobs wait no more and are woken (all but `asking`). */
  private commit(id: string, d: EndpointDispatch, r: Round, asking?: string): void {
    d.granted = r.granted;
    d.low = r.low;
    d.recentGrants = r.recentGrants;
    d.fair = r.fair;
    for (const job of r.picked) this.unwait(job.id);
    for (const job of r.picked) if (job.id !== asking) this.o.wake(job.id);
    if (r.recheckInMs !== undefined) this.pumpAt(id, d, r.recheckInMs);
  }

  /** The fair-share tags of the jobs in flight at the endpoint. */
  private initialFair(d: EndpointDispatch): FairShareState {
    return fairShareState(this.inFlightByAccount(d), this.o.weights);
  }

  private inFlightByAccount(d: EndpointDispatch): Map<string, number> {
    const counts = new Map<string, number>();
    for (const a of d.accountOf.values()) counts.set(a, (counts.get(a) ?? 0) + 1);
    return counts;
  }

  private pump(id: string): void {
    const d = this.endpoints.get(id);
    if (d && d.waiting.size > 0) this.grant(id, d);
  }

  private pumpAt(id: string, d: EndpointDispatch, ms: number): void {
    if (d.holdTimer) return;
    d.holdTimer = setTimeout(() => {
      d.holdTimer = undefined;
      this.pump(id);
    }, ms);
    d.holdTimer.unref();
  }

  /** The job did not submit after all (not admitted, refused, fenced): its slot goes back. */
  release(endpointId: string, key: string): void {
    const d = this.endpoints.get(endpointId);
    if (!d?.granted.delete(key)) return;
    if (!d.inFlight.has(key)) d.low.delete(key);
    this.pump(endpointId);
  }

  /** The provider accepted a submission: the window grows back towards its ceiling. */
  accepted(endpointId: string): void {
    const d = this.at(endpointId);
    const ceil = this.ceilingOf(d);
    d.window = onAccepted(this.windowOf(d), ceil);
  }

  /** The provider answered 429: the window halves, and nothing goes before Retry-After. */
  throttled(endpointId: string, retryAfterMs?: number): void {
    const d = this.at(endpointId);
    const ceil = this.ceilingOf(d);
    d.window = onThrottled(this.windowOf(d), ceil, this.now(), retryAfterMs ?? 1_000);
  }

  /** The endpoint as `kubectl media queue`, the metrics and the GpuEndpoint status show it. */
  view(endpointId: string): EndpointDispatchView {
    const d = this.at(endpointId);
    const ceil = this.ceilingOf(d);
    const waiting: Record<string, number> = {};
    for (const [account, q] of d.waiting) waiting[account] = q.size;
    return {
      window: d.window ? windowSize(d.window, ceil, this.now()) : ceil,
      inFlight: d.inFlight.size,
      waiting,
    };
  }

  /** Every endpoint the dispatcher knows, by provider id. */
  endpointIds(): string[] {
    return [...this.endpoints.keys()];
  }

  get isLeading(): boolean {
    return this.leading;
  }
}

/**
 * How long a finished job ran, seconds: the provider's executionTime of its last attempt (recorded
 * with its end, status.usage), else submitted to finished, which also counts its wait in the
 * provider's queue.
 */
function runSecondsOf(job: MediaJob): number | undefined {
  const attempt = job.status?.submission?.attempt;
  const ran = job.status?.usage?.attempts.find((a) => a.attempt === attempt)?.executionTimeMs;
  if (ran !== undefined && ran > 0) return ran / 1000;
  const from = Date.parse(job.status?.submittedAt ?? "");
  const to = Date.parse(job.status?.completedAt ?? "");
  return Number.isFinite(from) && Number.isFinite(to) && to > from ? (to - from) / 1000 : undefined;
}

/** The workers /health showed idle or running at the endpoint's last look. */
function workersUpOf(ep: GpuEndpoint): { idle: number; running: number } {
  return { idle: ep.status?.health?.workersIdle ?? 0, running: ep.status?.health?.workersRunning ?? 0 };
}

function maxInFlightOf(ep: GpuEndpoint): number | undefined {
  return ep.spec.maxInFlight;
}
