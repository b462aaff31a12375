// The controller's side of the dispatch benchmark: the MediaJob loop and the GpuEndpoint look,
// reduced to what decides when a job goes to the provider, around the product's own Dispatcher
// (src/controller/dispatch/dispatcher.ts) and its pure rules. Each step names the controller path
// it stands for. Kubernetes is replaced by a map of MediaJob objects whose writes show in the
// "cache" at once; the provider is the simulator's engine (tools/simulator/engine.ts), called
// in-process. Time is whatever the global clock says: bench/dispatch-replay.ts runs all of this on
// a virtual one.
import type { EndpointHealth, GpuEndpoint } from "../src/crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../src/crds/mediajob.js";
import { API_VERSION } from "../src/crds/common.js";
import { Dispatcher } from "../src/controller/dispatch/dispatcher.js";
import { toHealth } from "../src/gpuendpoint/diagnosis.js";
import { providerPolicy, START_DEADLINE_EXCEEDED } from "../src/mediajob/deadline.js";
import {
  msUntilStartDeadline,
  queueAllowanceMs,
  startDeadlineExceeded,
} from "../src/mediajob/start-deadline.js";
import { withRecordedUsage } from "../src/mediajob/usage.js";
import { statusView, type Engine, type Job as ProviderJob } from "../tools/simulator/engine.js";

/** How long a work-queue pass takes from its key being added to its write (and /run) being done. */
const PASS_MS = 50;
/** How long from the provider ending a job to the sidecar's write of its callback in the cache. */
const CALLBACK_MS = 50;
/** How long the GpuEndpoint look takes (its /health read). */
const LOOK_MS = 200;

export interface DriverOptions {
  engine: Engine;
  endpointId: string;
  /** FAIR_SHARE_WINDOW: the Dispatcher gates every submission; false: every job is submitted. */
  window: boolean;
  /** FAIR_SHARE_TICK_SECONDS and FAIR_SHARE_JOB_SECONDS. */
  fairShareTickSeconds: number;
  fairShareJobSeconds: number;
  startDeadlineSeconds?: number;
  /** Whether the GpuEndpoint's status records the endpoint's scaler before the first look. */
  scalerInStatus: boolean;
}

export interface JobRecord {
  job: MediaJob;
  endedAt?: number;
  /** A read showed the current attempt started (the Started condition, start-deadline.ts). */
  started?: boolean;
}

const NAMESPACE = "bench";

export class ControllerStandIn {
  readonly jobs = new Map<string, JobRecord>();
  readonly dispatcher?: Dispatcher;
  /** Jobs the provider forgot (onForget): a lost job, which must never happen here. */
  lost = 0;
  /** Waits the gate answered, by reason (Queued condition reasons). */
  readonly waits = new Map<string, number>();
  readonly #o: DriverOptions;
  readonly #queued = new Set<string>();
  #scalerKnown: boolean;
  #health: EndpointHealth;
  #seq = 0;

  constructor(o: DriverOptions) {
    this.#o = o;
    this.#scalerKnown = o.scalerInStatus;
    this.#health = { jobsInQueue: 0, jobsInProgress: 0 };
    if (o.window)
      // manager.ts: the Dispatcher exactly as the controller builds it when FAIR_SHARE_WINDOW is on.
      this.dispatcher = new Dispatcher({
        wake: (key) => this.#enqueue(key),
        jobSeconds: o.fairShareJobSeconds,
        tickSeconds: o.fairShareTickSeconds,
        eligible: () => this.endpoint(),
      });
  }

  /** The GpuEndpoint as the cache holds it: Ready, its status as the last look wrote it. */
  endpoint(): GpuEndpoint {
    const cfg = this.#o.engine.endpoint(this.#o.endpointId)!;
    const s = cfg.settings as { scalerType?: string; scalerValue?: number };
    return {
      apiVersion: API_VERSION,
      kind: "GpuEndpoint",
      metadata: { name: "bench", namespace: NAMESPACE },
      spec: {
        workload: "asr",
        minWorkers: cfg.workersMin,
        maxWorkers: cfg.workersMax,
        idleTimeoutSeconds: cfg.idleTimeout,
      },
      status: {
        endpointId: this.#o.endpointId,
        workersMax: cfg.workersMax,
        ...(this.#scalerKnown && { scalerType: s.scalerType, scalerValue: s.scalerValue }),
        health: this.#health,
        conditions: [
          {
            type: "Ready",
            status: "True",
            reason: "Ready",
            message: "",
            lastTransitionTime: new Date().toISOString(),
          },
        ],
      },
    } as GpuEndpoint;
  }

  /** The replica starts leading (manager.ts: dispatcher.lead(cached jobs), then resync()). */
  lead(): void {
    this.dispatcher?.lead([...this.jobs.values()].map((r) => r.job));
    this.resync();
  }

  /** manager.ts resync(): each endpoint looked at, each job not at rest reconciled. */
  resync(): void {
    setTimeout(() => this.look(), LOOK_MS);
    for (const [key, r] of this.jobs) if (!isEnded(r.job)) this.#enqueue(key);
  }

  /**
   * GpuEndpoint reconcile (gpuendpoint/reconciler.ts): the endpoint's settings and /health are read,
   * written to its status, and the Dispatcher is told (observeEndpoint).
   */
  look(): void {
    const { engine, endpointId } = this.#o;
    const report = engine.health(endpointId);
    if (report) this.#health = toHealth(report);
    this.#scalerKnown = true;
    const s = engine.endpoint(endpointId)!.settings as { scalerType?: string; scalerValue?: number };
    this.dispatcher?.observeEndpoint(this.endpoint(), {
      scalerType: s.scalerType,
      scalerValue: s.scalerValue,
    });
  }

  /** manager.ts: a GpuEndpoint's change event queues its reconcile, which looks at the endpoint. */
  endpointChanged(): void {
    setTimeout(() => this.look(), LOOK_MS);
  }

  /** A MediaJob is created: the informer's add event, then its first pass. */
  create(account: string, priority: "low" | "normal"): string {
    const name = `job-${String(this.#seq++).padStart(5, "0")}`;
    const job: MediaJob = {
      apiVersion: API_VERSION,
      kind: "MediaJob",
      metadata: {
        name,
        namespace: NAMESPACE,
        uid: `uid-${name}`,
        generation: 1,
        creationTimestamp: new Date().toISOString(),
      },
      spec: {
        workload: "asr",
        input: { audio: `s3://bench/${name}.wav` },
        account,
        ...(priority === "low" && { priority: "low" }),
        ...(this.#o.startDeadlineSeconds !== undefined && {
          startDeadlineSeconds: this.#o.startDeadlineSeconds,
        }),
      } as MediaJob["spec"],
      status: { phase: "Pending", account },
    };
    const key = `${NAMESPACE}/${name}`;
    this.jobs.set(key, { job });
    // manager.ts: jobs.on(event => dispatcher.observe(event, job)), then the key is queued.
    this.dispatcher?.observe("add", job);
    this.#enqueue(key);
    return key;
  }

  /** The work queue: a key added twice before its pass runs once (workqueue.ts). */
  #enqueue(key: string): void {
    if (this.#queued.has(key)) return;
    this.#queued.add(key);
    setTimeout(() => {
      this.#queued.delete(key);
      this.#reconcile(key);
    }, PASS_MS);
  }

  /** The MediaJob reconcile (mediajob/reconciler.ts) of one key. */
  #reconcile(key: string): void {
    const r = this.jobs.get(key);
    if (!r || isEnded(r.job) || (this.dispatcher && !this.dispatcher.isLeading)) return;
    if (r.job.status?.phase === "Pending") this.#pending(key, r);
    else if (r.job.status?.phase === "Processing") this.#processing(key, r);
  }

  /**
   * A Pending job (pending.ts): the window's answer gathered (gather.ts addPlaces: wouldGrant), the
   * slot taken after the plan (takeSlot: gate), then the submission.
   */
  #pending(key: string, r: JobRecord): void {
    const ep = this.endpoint();
    if (this.dispatcher) {
      const read = this.dispatcher.wouldGrant(r.job, ep);
      const slot = this.dispatcher.gate(r.job, ep);
      // The clock does not move between the read and the take: an answer that changed is a bug.
      if (slot.granted !== read.granted) throw new Error(`${key}: the window's take disagreed with its read`);
      if (!slot.granted) {
        this.waits.set(slot.reason, (this.waits.get(slot.reason) ?? 0) + 1);
        return; // waits Pending, Queued=True: woken when granted, else the next resync
      }
    }
    // submit.ts: the provider's policy as the write-ahead intent sends it (deadline.ts), then /run.
    const now = Date.now();
    const sd = r.job.spec.startDeadlineSeconds;
    const cfg = this.#o.engine.endpoint(this.#o.endpointId)!;
    const policy = providerPolicy({
      spec: r.job.spec,
      status: r.job.status,
      nowMs: now,
      endpointExecutionTimeoutMs: cfg.executionTimeoutMs,
      ...(sd !== undefined && { queueAllowanceMs: queueAllowanceMs(sd) }),
    });
    const sent = this.#o.engine.submit(this.#o.endpointId, {
      executionKey: key,
      input: r.job.spec.input as Record<string, unknown>,
      ttlMs: policy.ttl,
      ...(policy.executionTimeout !== undefined && { executionTimeoutMs: policy.executionTimeout }),
      ...(r.job.spec.priority === "low" && { lowPriority: true }),
    });
    if ("conflict" in sent) throw new Error(sent.conflict);
    // gather.ts settleSlot: an accepted submission grows the window back towards its ceiling.
    this.dispatcher?.accepted(this.#o.endpointId);
    const at = new Date(now).toISOString();
    const attempts = (r.job.status?.attempts ?? 0) + 1;
    this.#write(r, {
      ...r.job.status,
      phase: "Processing",
      endpointId: this.#o.endpointId,
      providerJobId: sent.job.id,
      submittedAt: at,
      attempts,
      submission: {
        attempt: attempts,
        id: `bench-${attempts}-${key}`,
        startedAt: at,
        state: "Accepted",
        ...(sd !== undefined && { startBy: new Date(now + sd * 1000).toISOString() }),
      },
    } as MediaJobStatus);
    r.started = false;
    // processing.ts: a job with a start deadline is requeued for it (requeueAfterMs = untilStart).
    if (sd !== undefined) setTimeout(() => this.#enqueue(key), sd * 1000);
  }

  /**
   * A Processing job (processing.ts): past its start deadline and not seen started, the provider's
   * status is read; still IN_QUEUE, it is cancelled there (stop.ts, "start-deadline"), and the
   * CANCELLED status then ends it (provider-result.ts). Seen running: not checked again.
   */
  #processing(_key: string, r: JobRecord): void {
    if (r.started || msUntilStartDeadline(r.job.status, Date.now()) > 0) return;
    const at = this.#o.engine.job(r.job.status!.providerJobId!);
    if (!at) return;
    if (at.status === "IN_QUEUE") this.#o.engine.cancel(at);
    else r.started = true;
  }

  /**
   * The provider ended a job: its callback, applied by the webhooks sidecar (provider-result.ts),
   * shows in the cache CALLBACK_MS later.
   */
  onProviderEnd(p: ProviderJob): void {
    setTimeout(() => {
      const r = this.jobs.get(p.key);
      if (!r || r.job.status?.providerJobId !== p.id || isEnded(r.job)) return;
      const now = new Date().toISOString();
      // The attempt's usage (the provider's executionTime and delayTime) rides on the write of its end.
      const status = withRecordedUsage(r.job, r.job.status, statusView(p), now);
      let next: MediaJobStatus;
      if (p.status === "COMPLETED") next = { ...status, phase: "Completed", completedAt: now };
      else if (p.status === "CANCELLED" && msUntilStartDeadline(status, Date.parse(now)) <= 0)
        next = startDeadlineExceeded(r.job, status, now, "cancelled at the provider");
      else next = { ...status, phase: "Failed", error: `${p.status}: ${p.error ?? ""}`, completedAt: now };
      this.#write(r, next);
      if (next.phase === "Pending") this.#enqueue(p.key);
    }, CALLBACK_MS);
  }

  /** A status write, seen back through the informer (manager.ts: dispatcher.observe). */
  #write(r: JobRecord, status: MediaJobStatus): void {
    r.job = { ...r.job, status };
    if (isEnded(r.job)) r.endedAt = Date.now();
    this.dispatcher?.observe("update", r.job);
  }

  /** Every job ended (Completed, Failed, Cancelled). */
  settled(): boolean {
    for (const r of this.jobs.values()) if (!isEnded(r.job)) return false;
    return true;
  }
}

const isEnded = (job: MediaJob): boolean =>
  job.status?.phase === "Completed" || job.status?.phase === "Failed" || job.status?.phase === "Cancelled";

/** Whether a job ended because no worker started it within its start deadline. */
export const endedStartDeadlineExceeded = (job: MediaJob): boolean =>
  job.status?.phase === "Failed" && (job.status.error ?? "").startsWith(START_DEADLINE_EXCEEDED);
