// Wires the loops together: informers fill caches on every replica; only the leader runs the
// loops' controllers. Each loop declares its own watches, map functions and settings in its
// setup (mediajob, gpuendpoint, dispatch, usage, storage and cost, each its setup.ts), as
// controller-runtime's SetupWithManager does; the runtime (src/runtime) knows no resource. Event
// handlers only enqueue keys; the periodic resync (docs/design.md, Lifecycle) enqueues every key
// that may still need work, so a missed event is corrected within one tick. At rest nothing moves:
// finished jobs are not reconciled, the events of our own writes are not news, and a key on its
// failure backoff stays on it. One piece: the order of start, lead, resync and stop across the
// loops is the manager's one job, and reads best in one place.
import type { Logger } from "pino";
import { BillingAccount, findAccount } from "../crds/billingaccount.js";
import { GpuEndpoint } from "../crds/gpuendpoint.js";
import { MediaJob } from "../crds/mediajob.js";
import { stateNamespace, type Env } from "../config/env.js";
import type { KubeApi, KubeObject } from "../k8s/api.js";
import { BackgroundEventRecorder, EventRecorder } from "../k8s/events.js";
import { boundAccounts } from "../mediajob/tenancy.js";
import type { GpuProviderClient } from "../provider/index.js";
import { selfHostedBaseUrl } from "../gpuendpoint/plan.js";
import { Controller } from "../runtime/controller.js";
import { IdleCompaction, runtimeCollector, type IdleCompactionPolicy } from "../runtime/idle-compaction.js";
import { Informer } from "../runtime/informer.js";
import { LeaderElector } from "../runtime/leader.js";
import type { OwnWrites } from "../runtime/own-writes.js";
import { stripMetadata } from "../runtime/strip-metadata.js";
import type { WorkQueue } from "../runtime/workqueue.js";
import { AccountJobs } from "./account-jobs.js";
import { keepBinding, trimMediaJob } from "./cache-transform.js";
import type { Dispatcher } from "./dispatch/dispatcher.js";
import { setupDispatch } from "./dispatch/setup.js";
import type { GpuEndpointReconciler } from "./gpuendpoint/reconciler.js";
import type { ProviderView } from "./gpuendpoint/provider-view.js";
import { setupGpuEndpoint } from "./gpuendpoint/setup.js";
import type { LoopContext } from "./loop-context.js";
import type { MediaJobReconciler } from "./mediajob/reconciler.js";
import { setupMediaJob } from "./mediajob/setup.js";
import { ControllerMetrics } from "./metrics.js";
import type { UsageReporter } from "./usage/reporter.js";
import { setupUsage } from "./usage/setup.js";
import type { setupStorage } from "./storage/setup.js";
import { setupCost } from "./cost/setup.js";
import { CostSpans } from "./cost/spans.js";

export interface ManagerOptions {
  api: KubeApi;
  provider: GpuProviderClient;
  env: Env;
  log: Logger;
  metrics?: ControllerMetrics;
  /** Identity in the leader Lease (tests give each process its own). */
  identity?: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Called when leadership is lost: controller-runtime exits so the pod restarts as a candidate. */
  onLeadershipLost?: () => void;
  /** How soon a misconfigured meter (or one not read) is read again, ms; default 30 s. Tests shorten it. */
  meterRecheckMs?: number;
  /**
   * The memory-reducing collection run once a burst of work is over (idle-compaction.ts); by
   * default the runtime's, when Node exposes it (the image runs it with --expose-gc).
   */
  collectGarbage?: () => void;
  /** When that collection runs (idle-compaction.ts's defaults unless given). */
  idleCompaction?: IdleCompactionPolicy;
  /** The cost loop's clock; Date.now unless given (tests move it past an hourly bucket's end). */
  costClock?: () => number;
}

export class Manager {
  readonly jobs: Informer<MediaJob>;
  readonly endpoints: Informer<GpuEndpoint>;
  readonly accounts: Informer<BillingAccount>;
  /** Namespaces, trimmed to their account binding (cache-transform.ts keepBinding). */
  readonly namespaces: Informer<KubeObject>;
  /** Running jobs per account, for the plans' concurrency cap. */
  readonly accountJobs = new AccountJobs();
  readonly metrics: ControllerMetrics;
  readonly elector?: LeaderElector;
  private resyncTimer?: NodeJS.Timeout;
  /** Resync ticks so far: tests and benchmarks count work per tick. */
  ticks = 0;
  private running?: Promise<unknown>;
  private leading = false;
  /** Aborted when leadership is lost, so in-flight provider calls stop at once. */
  private leadership?: AbortController;
  private stopped = false;
  /** Events are written in the background; stop() waits for them. */
  private readonly events: BackgroundEventRecorder;
  /** Gives the garbage of a burst of work (a list, a pass) back to the system once it is over. */
  readonly compaction: IdleCompaction;
  private compactionTimer?: NodeJS.Timeout;
  /** The loops, as their setups left them. */
  private readonly mediajob: ReturnType<typeof setupMediaJob>;
  private readonly gpuendpoint: ReturnType<typeof setupGpuEndpoint>;
  private readonly usageLoop: ReturnType<typeof setupUsage>;
  /** The media retention loop, loaded by start() only when storage is on (STORAGE_BUCKET). */
  private storageLoop?: ReturnType<typeof setupStorage>;
  private readonly ctx: LoopContext;
  private readonly costLoop: ReturnType<typeof setupCost>;
  /** The jobs' execution spans for the cost loop, read before the cache trims a finished job. */
  private readonly costSpans = new CostSpans();
  /** The runtime controllers the leader runs, one per loop with a work queue. */
  private readonly controllers: Controller[] = [];
  /** The endpoints' in-flight windows and fair share; undefined with FAIR_SHARE_WINDOW=false. */
  readonly dispatcher?: Dispatcher;

  constructor(private readonly o: ManagerOptions) {
    const { api, env, log } = o;
    const ns = env.WATCH_NAMESPACE;
    this.metrics = o.metrics ?? new ControllerMetrics();
    this.jobs = new Informer<MediaJob>(api, {
      plural: "mediajobs",
      namespace: ns,
      schema: MediaJob,
      // The cost loop's spans are read first: a finished job's cached copy keeps no usage.
      transform: (job) => {
        this.costSpans.observe(job);
        return trimMediaJob(job);
      },
      log: log.child({ informer: "mediajobs" }),
      onInvalid: (raw) => this.reportInvalid("mediajobs", raw),
      // The MediaJob loop's own writes (the loop is set up below, before the informer starts).
      ownVersion: (raw) => this.mediajob.ownWrites.wrote(raw),
    });
    this.endpoints = new Informer<GpuEndpoint>(api, {
      plural: "gpuendpoints",
      namespace: ns,
      schema: GpuEndpoint as never,
      onInvalid: (raw) => this.reportInvalid("gpuendpoints", raw),
      transform: stripMetadata,
      log: log.child({ informer: "gpuendpoints" }),
    });
    // BillingAccounts live where the sidecar writes them: its namespace, the same rule it uses.
    const accountNamespace = stateNamespace(env);
    this.accounts = new Informer<BillingAccount>(api, {
      plural: "billingaccounts",
      namespace: accountNamespace,
      schema: BillingAccount,
      transform: stripMetadata,
      log: log.child({ informer: "billingaccounts" }),
    });
    // Namespaces, for their account bindings (tenancy.ts): only the watched one when one is.
    this.namespaces = new Informer<KubeObject>(api, {
      plural: "namespaces",
      ...(ns !== undefined && { fieldSelector: `metadata.name=${ns}` }),
      transform: keepBinding,
      log: log.child({ informer: "namespaces" }),
    });
    this.events = new BackgroundEventRecorder(new EventRecorder(api, "controller", log), log, {
      onDrop: () => this.metrics.eventsDropped.inc(),
    });
    this.compaction = new IdleCompaction(
      "collectGarbage" in o ? o.collectGarbage : runtimeCollector(),
      o.idleCompaction,
    );
    this.metrics.resources.readFrom({
      jobs: () => this.jobs.list(),
      endpoints: () => this.endpoints.list(),
      defaultTimeoutSeconds: env.JOB_TIMEOUT_SECONDS,
    });

    const ctx: LoopContext = {
      api,
      provider: o.provider,
      env,
      log,
      metrics: this.metrics,
      caches: {
        jobs: this.jobs,
        endpoints: this.endpoints,
        accounts: this.accounts,
        namespaces: this.namespaces,
      },
      events: this.events,
      accountNamespace,
      tickMs: env.RESYNC_INTERVAL_SECONDS * 1000,
      synced: () => this.synced,
      leading: () => this.leading,
      fence: () => this.leading && (this.elector?.holdsLease() ?? true),
      leadership: () => this.leadership?.signal,
      noteWork: () => this.compaction.noteWork(),
      boundAccounts: (namespace) => this.boundAccounts(namespace),
      account: (customerId) => findAccount(this.accounts, accountNamespace, customerId),
      controller: (c) => {
        const controller = new Controller({
          ...c,
          log,
          metrics: this.metrics,
          onWork: () => this.compaction.noteWork(),
        });
        this.controllers.push(controller);
        return controller;
      },
    };
    this.ctx = ctx;
    this.usageLoop = setupUsage(ctx, { meterRecheckMs: o.meterRecheckMs });
    this.costLoop = setupCost(ctx, this.costSpans, {
      meter: () => this.usageLoop.meter(),
      workerCostEventName: this.usageLoop.settings.metering
        ? this.usageLoop.settings.workerCostEventName
        : undefined,
      ...(o.costClock && { now: o.costClock }),
    });
    this.dispatcher = setupDispatch(ctx, this.accountJobs, (key) => this.jobQueue.addUrgent(key));
    this.mediajob = setupMediaJob(ctx, {
      accountJobs: this.accountJobs,
      dispatcher: this.dispatcher,
      usage: this.usageLoop,
      // Opened in start() when storage is configured; its code is loaded only then.
      store: () => this.storageLoop?.store(),
    });
    this.gpuendpoint = setupGpuEndpoint(ctx, this.dispatcher);

    if (env.LEADER_ELECTION) {
      this.elector = new LeaderElector(api, {
        namespace: env.LEADER_ELECTION_NAMESPACE,
        name: env.LEADER_ELECTION_ID,
        identity: o.identity,
        leaseDurationMs: o.leaseDurationMs,
        renewDeadlineMs: o.renewDeadlineMs,
        retryPeriodMs: o.retryPeriodMs,
        log: log.child({ component: "leader-election" }),
        onStartedLeading: () => this.startLeading(),
        onStoppedLeading: () => this.stopLeading(),
      });
    }
  }

  get jobQueue(): WorkQueue {
    return this.mediajob.controller.queue;
  }
  get endpointQueue(): WorkQueue {
    return this.gpuendpoint.controller.queue;
  }
  get jobReconciler(): MediaJobReconciler {
    return this.mediajob.reconciler;
  }
  get endpointReconciler(): GpuEndpointReconciler {
    return this.gpuendpoint.reconciler;
  }
  /** The provider's management view shared by every GpuEndpoint reconcile (one check per tick). */
  get providerView(): ProviderView {
    return this.gpuendpoint.providerView;
  }
  /** resourceVersions of our own writes, whose watch events are not a reason to reconcile. */
  get ownJobWrites(): OwnWrites {
    return this.mediajob.ownWrites;
  }
  get ownEndpointWrites(): OwnWrites {
    return this.gpuendpoint.ownWrites;
  }
  /** The leader's usage reporter: account period usage and the meter events (usage/reporter.ts). */
  get usage(): UsageReporter {
    return this.usageLoop.reporter;
  }
  /** The caches whose stalled watch makes the process unhealthy (runtime/health.ts). */
  get watched(): ReadonlyArray<Informer<MediaJob> | Informer<GpuEndpoint>> {
    return [this.jobs, this.endpoints];
  }

  /** A self-hosted endpoint's base URL by its endpoint id, from the cache (the provider client's routing). */
  endpointBaseUrl(endpointId: string): string | undefined {
    return selfHostedBaseUrl(this.endpoints.list(), endpointId);
  }

  /** The accounts the namespace is bound to, from the cache (tenancy.ts). */
  boundAccounts(namespace: string): string[] {
    return boundAccounts(
      this.namespaces.get("", namespace)?.metadata.annotations as Record<string, string> | undefined,
    );
  }

  /** An object the controller cannot read: left alone (evicted from the cache), counted, and told on it. */
  private reportInvalid(resource: "mediajobs" | "gpuendpoints", raw: KubeObject): void {
    this.metrics.invalidObjects.inc({ resource });
    if (!this.leading) return; // one replica tells
    void this.events.record(
      raw as never,
      "Warning",
      "InvalidObject",
      "the controller cannot read this object (it fails the resource's schema) and leaves it alone until it is fixed",
    );
  }

  get isLeader(): boolean {
    return this.leading;
  }

  get synced(): boolean {
    return (
      this.jobs.hasSynced && this.endpoints.hasSynced && this.accounts.hasSynced && this.namespaces.hasSynced
    );
  }

  /** Starts the caches, then campaigns (or leads at once without leader election). */
  async start(): Promise<void> {
    this.stopped = false;
    await this.usageLoop.load();
    if (this.o.env.STORAGE_BUCKET !== undefined && !this.storageLoop) {
      const { setupStorage } = await import("./storage/setup.js");
      this.storageLoop = setupStorage(this.ctx);
      await this.storageLoop.load();
    }
    if (this.compaction.enabled && !this.compactionTimer) {
      this.compactionTimer = setInterval(() => this.compaction.check(), 1000);
      this.compactionTimer.unref();
    }
    await Promise.all([
      this.jobs.start(),
      this.endpoints.start(),
      this.accounts.start(),
      this.namespaces.start(),
    ]);
    if (this.elector) this.elector.start();
    else this.startLeading();
  }

  private startLeading(): void {
    if (this.leading || this.stopped) return;
    this.leading = true;
    this.leadership = new AbortController();
    this.dispatcher?.lead(this.jobs.list());
    this.metrics.leader.set(1);
    this.metrics.leaderChanges.inc({ change: "acquired" });
    this.running = Promise.all(this.controllers.map((c) => c.run()));
    this.usageLoop.lead();
    this.storageLoop?.lead();
    this.costLoop.lead();
    this.resync();
    const tickMs = this.o.env.RESYNC_INTERVAL_SECONDS * 1000;
    this.resyncTimer = setInterval(() => this.resync(), tickMs);
    this.resyncTimer.unref();
  }

  /**
   * The tick: every cached object that may need work is reconciled again. Finished jobs are not
   * (nothing changes them but an event), and a key waiting out a failure's backoff keeps waiting.
   */
  resync(): void {
    this.ticks++;
    this.gpuendpoint.resync();
    this.mediajob.resync();
    this.usageLoop.resync();
    this.metrics.cachedObjects.set({ resource: "mediajobs" }, this.jobs.size);
    this.metrics.cachedObjects.set({ resource: "gpuendpoints" }, this.endpoints.size);
  }

  /** Losing the lease stops reconciling at once: no new key is handed out. */
  private stopLeading(): void {
    if (!this.leading) return;
    this.leading = false;
    this.leadership?.abort();
    this.dispatcher?.stopLeading();
    this.metrics.leader.set(0);
    this.metrics.leaderChanges.inc({ change: "lost" });
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    for (const c of this.controllers) c.shutdown();
    this.usageLoop.stopLeading();
    this.storageLoop?.stopLeading();
    this.costLoop.stopLeading();
    if (!this.stopped) this.o.onLeadershipLost?.();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.compactionTimer) clearInterval(this.compactionTimer);
    this.compactionTimer = undefined;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    for (const c of this.controllers) c.shutdown();
    await this.running; // in-flight reconciles finish
    await this.usageLoop.stop();
    await this.storageLoop?.stop();
    await this.costLoop.stop();
    await this.events.flush(); // and the Events they recorded are written
    if (this.elector) await this.elector.stop();
    this.leading = false;
    await Promise.all([
      this.jobs.stop(),
      this.endpoints.stop(),
      this.accounts.stop(),
      this.namespaces.stop(),
    ]);
  }
}
