import type { Logger } from "pino";
import type { EndpointHealthReport, ProviderJob, ProviderJobStatus } from "../../src/provider/schemas.js";
import type { Clock, TimerHandle } from "./clock.js";
import { honoursClientId, type Faults, type ResolvedOptions } from "./options.js";
import { failureFor, outputFor, workerControls, type Workload } from "./outputs.js";
import {
  finishMediaIO,
  hasMediaIO,
  mediaFailure,
  readInputs,
  withMediaOutput,
  type MediaIOResult,
} from "./media-io.js";
import type { HostedObjects } from "./hosted.js";
import { chance, unit, type Rng } from "./random.js";
import { scale, type ScalerType } from "./scaler.js";
import { priceFor, WorkerLedger, type WorkerRun } from "./worker-ledger.js";

// The provider's queue and workers: jobs go IN_QUEUE -> IN_PROGRESS -> COMPLETED | FAILED |
// TIMED_OUT, or CANCELLED. Workers scale between workersMin and workersMax with a cold start, by
// the endpoint's scaler (scaler.ts: QUEUE_DELAY or REQUEST_COUNT); workersMax = 0 leaves jobs in
// the queue. Pure in-memory state driven by the scaled clock.

export interface EndpointConfig {
  id: string;
  name: string;
  workload: Workload;
  workersMin: number;
  workersMax: number;
  /** Seconds an idle worker above workersMin lives on. */
  idleTimeout: number;
  /** Default executionTimeout of the endpoint's jobs, simulated ms. */
  executionTimeoutMs: number;
  /** Provider fields stored and returned but not acted on (templateId, gpuIds, scalerType, ...). */
  settings: Record<string, unknown>;
}

export interface Job {
  /** The provider's job id: the client's id, or a generated one when it is ignored or absent. */
  id: string;
  /** Executions are counted per key: the id the client sent, else the provider id. */
  key: string;
  endpointId: string;
  input: Record<string, unknown>;
  webhook?: string;
  executionTimeoutMs: number;
  status: ProviderJobStatus;
  submittedAt: number;
  startedAt?: number;
  /** What the provider did with the job, in simulated ms since its clock started (Clock.simNow). */
  timeline: JobTimeline;
  delayTime?: number;
  executionTime?: number;
  output?: unknown;
  error?: string;
  workerId?: string;
  timers: { run?: TimerHandle; ttl?: TimerHandle; retention?: TimerHandle };
  /** Set while a held job has reached its natural end: runs the end on release. */
  finishPending?: () => void;
  /** Submitted with /runsync: its result is kept 1 minute instead of 30. */
  sync?: boolean;
  /** policy.lowPriority: the job does not trigger scaling. */
  lowPriority?: boolean;
  /** The worker's reads of the inputs under `_mediaOrchestrator`, begun when it started (media-io.ts). */
  mediaRead?: Promise<MediaIOResult>;
  /** How the worker's media I/O ended: its outputs' digests, or why the job failed. */
  mediaResult?: MediaIOResult;
}

/**
 * A job's life at the provider, simulated ms since the clock started. delayTime = started -
 * submitted (queue wait, with `coldStartMs` of it spent waiting for the worker that took the job to
 * boot); executionTime = ended - started. A job cancelled in the queue has no `started`.
 */
export interface JobTimeline {
  submitted: number;
  started?: number;
  ended?: number;
  /** The part of the delay its worker spent in cold start after the job arrived. */
  coldStartMs?: number;
}

type WorkerState = "initializing" | "idle" | "running" | "unhealthy";

interface Worker {
  id: string;
  /** unhealthy: crashed as it started (the crashLoopWorkers fault), restarting; takes no job. */
  state: WorkerState;
  /** Simulated ms (Clock.simNow) when the worker was started and when its cold start ended. */
  spawned: number;
  ready?: number;
  job?: Job;
  timer?: TimerHandle;
}

interface EndpointRuntime {
  config: EndpointConfig;
  workers: Worker[];
  queue: Job[];
  completed: number;
  failed: number;
  /** QUEUE_DELAY: wakes the scaler when the next queued job crosses the threshold. */
  scaleTimer?: TimerHandle;
  /** When the scaler last added a worker, simulated ms (Clock.simNow): the onePerDelay reading. */
  lastAddAt?: number;
}

export interface SubmitArgs {
  clientId?: string;
  /**
   * Whose job this is, for counting executions: the client's own job id, which a provider that
   * ignores `id` never sees except inside the webhook URL. Default: clientId, else the new id.
   */
  executionKey?: string;
  input: Record<string, unknown>;
  webhook?: string;
  executionTimeoutMs?: number;
  ttlMs?: number;
  /** /runsync: a `sync-` id and the shorter result retention. */
  sync?: boolean;
  lowPriority?: boolean;
}

export type SubmitResult = { job: Job; created: boolean } | { conflict: string };

export interface EngineDeps {
  clock: Clock;
  rng: Rng;
  opts: ResolvedOptions;
  faults: () => Faults;
  /** Called once per job when it reaches a terminal state (the webhook trigger). */
  onTerminal: (job: Job) => void;
  /** Called when the provider loses a job (forget, TTL, endpoint removal): pending callbacks stop. */
  onForget: (jobId: string) => void;
  /** The provider's storage for outputs a worker leaves there (hosted.ts). */
  hosted?: HostedObjects;
  log?: Logger;
}

const DEFAULT_TTL_MS = 24 * 3_600_000;
// RunPod keeps a /runsync result 1 minute (https://docs.runpod.io/serverless/endpoints/operation-reference).
const SYNC_RETENTION_MS = 60_000;

/** A job that ended, as its last status reported it: what the provider bills it. */
export interface EndedJob {
  id: string;
  key: string;
  status: string;
  executionTime?: number;
  delayTime?: number;
  /** When a worker started it, real ms since the epoch (absent: it never ran). */
  startedAt?: number;
  /** When it ended, real ms since the epoch. */
  endedAt: number;
}

export class Engine {
  readonly #d: EngineDeps;
  readonly #endpoints = new Map<string, EndpointRuntime>();
  readonly #jobs = new Map<string, Job>();
  readonly #executions = new Map<string, number>();
  /** Every job's execution key by its provider id, kept after the job is forgotten (inspection). */
  readonly #keys = new Map<string, string>();
  /** Every ended job's reported times by its provider id, kept after its status expires (inspection). */
  readonly #endedJobs = new Map<string, EndedJob>();
  readonly #held = new Set<string>();
  /** /runsync and /status-sync requests waiting for a job to end. */
  readonly #waiters = new Map<Job, Set<() => void>>();
  /** Every worker run with its price: what the provider bills (worker-ledger.ts). */
  readonly ledger = new WorkerLedger();

  constructor(deps: EngineDeps) {
    this.#d = deps;
  }

  // ---- endpoints ----

  /** Creates or replaces an endpoint's configuration; its queue and workers carry over. */
  upsertEndpoint(config: EndpointConfig): void {
    const ep = this.#endpoints.get(config.id);
    if (ep === undefined)
      this.#endpoints.set(config.id, { config, workers: [], queue: [], completed: 0, failed: 0 });
    else ep.config = config;
    this.#pump(this.#endpoints.get(config.id) as EndpointRuntime);
  }

  /** Deletes the endpoint; its jobs disappear with it (status then answers endpoint not found). */
  removeEndpoint(id: string): boolean {
    const ep = this.#endpoints.get(id);
    if (ep === undefined) return false;
    for (const job of [...this.#jobs.values()]) if (job.endpointId === id) this.#drop(job);
    for (const w of ep.workers) {
      this.#d.clock.cancel(w.timer);
      this.ledger.stop(w.id, this.#d.clock.simNow());
    }
    this.#d.clock.cancel(ep.scaleTimer);
    this.#endpoints.delete(id);
    return true;
  }

  endpoint(id: string): EndpointConfig | undefined {
    return this.#endpoints.get(id)?.config;
  }

  endpoints(): EndpointConfig[] {
    return [...this.#endpoints.values()].map((e) => e.config);
  }

  health(endpointId: string): EndpointHealthReport | undefined {
    const ep = this.#endpoints.get(endpointId);
    if (ep === undefined) return undefined;
    const count = (s: Worker["state"]) => ep.workers.filter((w) => w.state === s).length;
    return {
      jobs: {
        completed: ep.completed,
        failed: ep.failed,
        inProgress: ep.workers.filter((w) => w.job !== undefined).length,
        inQueue: ep.queue.length,
        retried: 0,
      },
      workers: {
        idle: count("idle"),
        initializing: count("initializing"),
        ready: count("idle") + count("running"),
        running: count("running"),
        throttled: 0,
        unhealthy: count("unhealthy"),
      },
    };
  }

  // ---- jobs ----

  submit(endpointId: string, args: SubmitArgs): SubmitResult {
    const ep = this.#endpoints.get(endpointId);
    if (ep === undefined) throw new Error(`unknown endpoint ${endpointId}`);
    const honourId = args.clientId !== undefined && honoursClientId(this.#d.faults());
    if (honourId) {
      const existing = this.#jobs.get(args.clientId as string);
      if (existing !== undefined) {
        if (existing.endpointId !== endpointId)
          return { conflict: "job id already used on another endpoint" };
        return { job: existing, created: false };
      }
    }
    const id = honourId
      ? (args.clientId as string)
      : `${args.sync === true ? "sync-" : ""}${this.#d.rng.uuid()}-u1`;
    const job: Job = {
      id,
      key: args.executionKey ?? args.clientId ?? id,
      endpointId,
      input: args.input,
      ...(args.webhook !== undefined && { webhook: args.webhook }),
      executionTimeoutMs: args.executionTimeoutMs ?? ep.config.executionTimeoutMs,
      status: "IN_QUEUE",
      submittedAt: this.#d.clock.now(),
      timeline: { submitted: this.#d.clock.simNow() },
      timers: {},
      ...(args.sync === true && { sync: true }),
      ...(args.lowPriority === true && { lowPriority: true }),
    };
    // TTL covers queue and execution; when it runs out the job is removed
    // (https://docs.runpod.io/serverless/endpoints/send-requests, Execution policies).
    job.timers.ttl = this.#d.clock.after(args.ttlMs ?? DEFAULT_TTL_MS, () => this.#drop(job));
    this.#jobs.set(id, job);
    this.#keys.set(id, job.key);
    ep.queue.push(job);
    this.#pump(ep);
    return { job, created: true };
  }

  /** By the provider's id (what /status takes). */
  job(id: string): Job | undefined {
    return this.#jobs.get(id);
  }

  /**
   * For tests and the inspection API: by the provider's id, else the newest job whose execution
   * key is `id` (our job id, which is all a test knows when the provider made up its own).
   */
  find(id: string): Job | undefined {
    const byId = this.#jobs.get(id);
    if (byId !== undefined) return byId;
    let found: Job | undefined;
    for (const job of this.#jobs.values()) if (job.key === id) found = job;
    return found;
  }

  /** The execution key a provider id was given, even once the provider has forgotten the job. */
  keyOf(id: string): string | undefined {
    return this.#keys.get(id);
  }

  jobs(): Job[] {
    return [...this.#jobs.values()];
  }

  /** What the provider reported for every job that ended, as its status did (the usage it bills). */
  endedJobs(): EndedJob[] {
    return [...this.#endedJobs.values()].map((e) => ({ ...e }));
  }

  cancel(job: Job): void {
    if (job.status === "IN_QUEUE") {
      const ep = this.#endpoints.get(job.endpointId);
      if (ep !== undefined) ep.queue = ep.queue.filter((j) => j !== job);
      // It waited until the cancel and no worker ran it.
      job.timeline.ended = this.#d.clock.simNow();
      job.delayTime = job.timeline.ended - job.timeline.submitted;
      job.executionTime = 0;
    } else if (job.status === "IN_PROGRESS") {
      this.#ended(job);
      this.#releaseWorker(job);
    } else {
      return;
    }
    job.status = "CANCELLED";
    this.#terminal(job);
  }

  /** The provider loses the job: status 404 from now on, no callback. */
  forget(id: string): boolean {
    const job = this.find(id);
    if (job === undefined) return false;
    this.#drop(job);
    return true;
  }

  /** Keeps `id` IN_PROGRESS past its natural end until release(); may be called before submission. */
  hold(id: string): void {
    this.#held.add(id);
  }

  /** Releases every job held under `id` (a provider id, or our job id for all its submissions). */
  release(id: string): void {
    this.#held.delete(id);
    for (const job of [...this.#jobs.values()]) {
      if (job.id !== id && job.key !== id) continue;
      this.#held.delete(job.id);
      const pending = job.finishPending;
      if (pending !== undefined) {
        job.finishPending = undefined;
        pending();
      }
    }
  }

  executions(key: string): number {
    return this.#executions.get(key) ?? 0;
  }

  allExecutions(): Map<string, number> {
    return new Map(this.#executions);
  }

  /** The provider's per-worker billing ledger (every run, or one endpoint's), with billed seconds so far. */
  workerRuns(endpointId?: string): Array<WorkerRun & { billedSeconds: number; amountMicros: number }> {
    const now = this.#d.clock.simNow();
    return this.ledger.runs(endpointId).map((r) => {
      const seconds = Math.ceil(((r.stoppedAt ?? now) - r.startedAt) / 1000);
      return { ...r, billedSeconds: seconds, amountMicros: seconds * r.pricePerSecondMicros };
    });
  }

  /** The endpoint's workers and what each is doing (REST v2's worker list). */
  workers(endpointId: string): Array<{ id: string; state: WorkerState }> {
    return (this.#endpoints.get(endpointId)?.workers ?? []).map((w) => ({ id: w.id, state: w.state }));
  }

  /** /purge-queue: removes every queued job (status 404 from then on, no callback); running ones go on. */
  purgeQueue(endpointId: string): number {
    const ep = this.#endpoints.get(endpointId);
    if (ep === undefined) return 0;
    const queued = [...ep.queue];
    for (const job of queued) this.#drop(job);
    return queued.length;
  }

  /** Resolves when the job ends or is removed, or after `simMs` simulated ms, whichever is first. */
  settled(job: Job, simMs: number): Promise<void> {
    if (this.#jobs.get(job.id) !== job || TERMINAL.has(job.status)) return Promise.resolve();
    return new Promise((resolve) => {
      const waiters = this.#waiters.get(job) ?? new Set<() => void>();
      this.#waiters.set(job, waiters);
      const done = () => {
        this.#d.clock.cancel(timer);
        waiters.delete(done);
        resolve();
      };
      const timer = this.#d.clock.after(simMs, done);
      waiters.add(done);
    });
  }

  close(): void {
    for (const waiters of this.#waiters.values()) for (const done of [...waiters]) done();
    this.#waiters.clear();
    // Timers belong to the clock, which the server closes.
    this.#jobs.clear();
    this.#endpoints.clear();
  }

  // ---- internals ----

  #pump(ep: EndpointRuntime): void {
    const cfg = ep.config;
    for (const w of ep.workers) {
      if (ep.queue.length === 0) break;
      if (w.state === "idle") this.#start(ep, w, ep.queue.shift() as Job);
    }
    // Shrink first (workersMax lowered): idle, then unhealthy and initializing workers go now;
    // running ones go when their job ends.
    for (const state of ["idle", "unhealthy", "initializing"] as const) {
      for (const w of ep.workers.filter((x) => x.state === state)) {
        if (ep.workers.length <= cfg.workersMax) break;
        this.#terminate(ep, w);
      }
    }
    const now = this.#d.clock.now();
    const count = (state: Worker["state"]) => ep.workers.filter((w) => w.state === state).length;
    const simNow = this.#d.clock.simNow();
    const decision = scale({
      ...scalerOf(cfg),
      workersMin: cfg.workersMin,
      workersMax: cfg.workersMax,
      // A crash-looping worker restarts: to the scaler it is one that is starting.
      initializing: count("initializing") + count("unhealthy"),
      idle: count("idle"),
      running: count("running"),
      queued: this.#scalerQueue(ep, now),
      reading: this.#d.opts.queueDelayReading,
      ...(ep.lastAddAt !== undefined && { sinceLastAddMs: simNow - ep.lastAddAt }),
    });
    if (ep.workers.length < decision.target) ep.lastAddAt = simNow;
    while (ep.workers.length < decision.target) this.#spawn(ep);
    if (decision.stopSurplusNow) {
      for (const w of ep.workers.filter((x) => x.state === "idle")) {
        if (ep.workers.length <= decision.target) break;
        this.#terminate(ep, w);
      }
    } else {
      for (const w of ep.workers)
        if (w.state === "idle" && w.timer === undefined) this.#scheduleIdleStop(ep, w);
    }
    this.#d.clock.cancel(ep.scaleTimer);
    ep.scaleTimer =
      decision.recheckInMs === undefined || ep.workers.length >= cfg.workersMax
        ? undefined
        : this.#d.clock.after(decision.recheckInMs, () => {
            ep.scaleTimer = undefined;
            this.#pump(ep);
          });
  }

  /**
   * The queued jobs that may trigger scaling, oldest first, as many as can change the scaler's
   * answer: past workersMax x (scalerValue + 1) the target is workersMax under either scaler. The
   * cap keeps a burst of thousands of queued jobs from making every submission scan the queue.
   */
  #scalerQueue(ep: EndpointRuntime, now: number): Array<{ waitedMs: number; lowPriority: boolean }> {
    const cap = ep.config.workersMax * (scalerOf(ep.config).value + 1) + 1;
    const out: Array<{ waitedMs: number; lowPriority: boolean }> = [];
    for (const job of ep.queue) {
      if (out.length >= cap) break;
      if (job.lowPriority !== true)
        out.push({ waitedMs: this.#d.clock.toSim(now - job.submittedAt), lowPriority: false });
    }
    return out;
  }

  #spawn(ep: EndpointRuntime): void {
    const w: Worker = { id: this.#d.rng.token(14), state: "initializing", spawned: this.#d.clock.simNow() };
    const coldStart = this.#d.opts.coldStartMs * (0.8 + 0.4 * unit(this.#d.opts.seed, w.id, "cold"));
    const started = () => {
      w.timer = undefined;
      // Crash-looping: the container dies as it starts and is restarted, a cold start each time.
      if (this.#d.faults().crashLoopWorkers === true) {
        w.state = "unhealthy";
        w.timer = this.#d.clock.after(coldStart, started);
        return;
      }
      w.state = "idle";
      w.ready = this.#d.clock.simNow();
      this.#pump(ep);
    };
    w.timer = this.#d.clock.after(coldStart, started);
    this.ledger.start({
      workerId: w.id,
      endpointId: ep.config.id,
      ...priceFor(ep.config.settings, this.#d.opts.gpuPricesMicros),
      startedAt: w.spawned,
      active: ep.workers.length < ep.config.workersMin,
    });
    ep.workers.push(w);
  }

  #terminate(ep: EndpointRuntime, w: Worker): void {
    this.#d.clock.cancel(w.timer);
    this.ledger.stop(w.id, this.#d.clock.simNow());
    ep.workers = ep.workers.filter((x) => x !== w);
  }

  #scheduleIdleStop(ep: EndpointRuntime, w: Worker): void {
    if (ep.workers.length <= ep.config.workersMin) return;
    w.timer = this.#d.clock.after(ep.config.idleTimeout * 1000, () => {
      w.timer = undefined;
      if (w.state === "idle" && ep.workers.length > ep.config.workersMin) this.#terminate(ep, w);
    });
  }

  #start(ep: EndpointRuntime, w: Worker, job: Job): void {
    const { clock, opts } = this.#d;
    clock.cancel(w.timer);
    w.timer = undefined;
    w.state = "running";
    w.job = job;
    const now = clock.now();
    job.status = "IN_PROGRESS";
    job.workerId = w.id;
    job.startedAt = now;
    this.ledger.jobStarted(w.id);
    const started = clock.simNow();
    const t = job.timeline;
    t.started = started;
    // Of the wait, the part after both the job's arrival and the worker's start, until it was ready.
    const booting = (w.ready ?? started) - Math.max(w.spawned, t.submitted);
    t.coldStartMs = Math.min(Math.max(0, booting), started - t.submitted);
    job.delayTime = started - t.submitted;
    const n = (this.#executions.get(job.key) ?? 0) + 1;
    this.#executions.set(job.key, n);
    this.#d.log?.debug({ jobId: job.id, workerId: w.id, execution: n }, "job started");
    if (hasMediaIO(job.input)) job.mediaRead = readInputs(job.input);
    const duration = opts.executionMs * (0.8 + 0.4 * unit(opts.seed, job.key, "exec", n));
    const timedOut = duration > job.executionTimeoutMs;
    job.timers.run = clock.after(timedOut ? job.executionTimeoutMs : duration, () => {
      job.timers.run = undefined;
      const status = timedOut
        ? "TIMED_OUT"
        : chance(this.#d.faults().failJob, opts.seed, job.key, "fail", n) || workerControls(job.input).fail
          ? "FAILED"
          : "COMPLETED";
      if (status !== "COMPLETED" || job.mediaRead === undefined) return this.#finish(job, status);
      // The worker uploads its outputs before it reports COMPLETED (media-io.ts).
      const output = outputFor(ep.config.workload, job.input);
      void finishMediaIO(job.input, job.mediaRead, output, this.#d.hosted).then((r) => {
        if (job.status !== "IN_PROGRESS" || job.workerId !== w.id) return;
        job.mediaResult = r;
        this.#finish(job, r.ok ? "COMPLETED" : "FAILED");
      });
    });
  }

  #finish(job: Job, status: "COMPLETED" | "FAILED" | "TIMED_OUT"): void {
    if (this.#held.has(job.id) || this.#held.has(job.key)) {
      job.finishPending = () => this.#finish(job, status);
      return;
    }
    const ep = this.#endpoints.get(job.endpointId);
    this.#ended(job);
    // The provider stops a job at its timeout: it ran exactly that long. A real timer fires a little
    // early or late, and one real ms is many simulated ones at a small time scale.
    if (status === "TIMED_OUT") {
      job.executionTime = job.executionTimeoutMs;
      job.timeline.ended = (job.timeline.started ?? job.timeline.submitted) + job.executionTimeoutMs;
    }
    const workload = ep?.config.workload ?? "render";
    if (status === "COMPLETED") job.output = withMediaOutput(outputFor(workload, job.input), job.mediaResult);
    else if (status === "FAILED")
      job.error =
        job.mediaResult?.ok === false
          ? mediaFailure(job.mediaResult.error, job.workerId ?? "unknown")
          : failureFor(workload, job.workerId ?? "unknown", job.input);
    else job.error = `Job timed out after ${job.executionTimeoutMs} ms (policy.executionTimeout)`;
    job.status = status;
    this.#releaseWorker(job);
    this.#terminal(job);
  }

  /** A running job stops now: its execution time is the worker's time on it. */
  #ended(job: Job): void {
    const t = job.timeline;
    t.ended = this.#d.clock.simNow();
    job.executionTime = t.ended - (t.started ?? t.submitted);
  }

  #releaseWorker(job: Job): void {
    this.#d.clock.cancel(job.timers.run);
    job.timers.run = undefined;
    job.finishPending = undefined;
    const ep = this.#endpoints.get(job.endpointId);
    const w = ep?.workers.find((x) => x.job === job);
    if (ep === undefined || w === undefined) return;
    w.job = undefined;
    w.state = "idle";
    if (ep.workers.length > ep.config.workersMax) this.#terminate(ep, w);
    this.#pump(ep);
  }

  #terminal(job: Job): void {
    this.#endedJobs.set(job.id, {
      id: job.id,
      key: job.key,
      status: job.status,
      ...(job.executionTime !== undefined && { executionTime: job.executionTime }),
      ...(job.delayTime !== undefined && { delayTime: job.delayTime }),
      ...(job.timeline.started !== undefined && { startedAt: this.#d.clock.realAt(job.timeline.started) }),
      endedAt: this.#d.clock.now(),
    });
    const ep = this.#endpoints.get(job.endpointId);
    if (ep !== undefined) {
      if (job.status === "COMPLETED") ep.completed++;
      else if (job.status === "FAILED" || job.status === "TIMED_OUT") ep.failed++;
    }
    this.#d.clock.cancel(job.timers.ttl);
    job.timers.ttl = undefined;
    // RunPod keeps /run results 30 min (/runsync: 1 min), then status answers 404.
    const retention =
      job.sync === true
        ? Math.min(this.#d.opts.statusRetentionMs, SYNC_RETENTION_MS)
        : this.#d.opts.statusRetentionMs;
    job.timers.retention = this.#d.clock.after(retention, () => {
      if (this.#jobs.get(job.id) === job) this.#jobs.delete(job.id);
    });
    this.#wake(job);
    this.#d.log?.debug({ jobId: job.id, status: job.status }, "job finished");
    this.#d.onTerminal(job);
  }

  /** Removes a job as if the provider lost it: no state, no callback. */
  #drop(job: Job): void {
    if (this.#jobs.get(job.id) !== job) return;
    const ep = this.#endpoints.get(job.endpointId);
    if (job.status === "IN_QUEUE" && ep !== undefined) ep.queue = ep.queue.filter((j) => j !== job);
    if (job.status === "IN_PROGRESS") this.#releaseWorker(job);
    for (const t of Object.values(job.timers)) this.#d.clock.cancel(t);
    job.finishPending = undefined;
    this.#jobs.delete(job.id);
    this.#wake(job);
    this.#d.onForget(job.id);
  }

  #wake(job: Job): void {
    const waiters = this.#waiters.get(job);
    if (waiters === undefined) return;
    this.#waiters.delete(job);
    for (const done of [...waiters]) done();
  }
}

/** The endpoint's scaler settings (scalerType, scalerValue), RunPod's defaults when unset. */
function scalerOf(config: EndpointConfig): { type: ScalerType; value: number } {
  const s = config.settings;
  const value = typeof s.scalerValue === "number" && s.scalerValue >= 1 ? s.scalerValue : 4;
  return { type: s.scalerType === "REQUEST_COUNT" ? "REQUEST_COUNT" : "QUEUE_DELAY", value };
}

const TERMINAL: ReadonlySet<ProviderJobStatus> = new Set(["COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED"]);

/** The status object as /status, /cancel and the webhook carry it. */
export function statusView(job: Job): ProviderJob {
  return {
    id: job.id,
    status: job.status,
    ...(job.delayTime !== undefined && { delayTime: job.delayTime }),
    ...(job.executionTime !== undefined && { executionTime: job.executionTime }),
    ...(job.output !== undefined && { output: job.output }),
    ...(job.error !== undefined && { error: job.error }),
    ...(job.workerId !== undefined && { workerId: job.workerId }),
  };
}
