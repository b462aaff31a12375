// Wires the controllers together: informers fill caches on every replica; only the leader runs
// the work queues. Event handlers only enqueue keys; the periodic resync (docs/design.md, Lifecycle)
// enqueues every key that may still need work, so a missed event is corrected within one tick.
// At rest nothing moves: finished jobs are not reconciled, the events of our own writes are not
// news, and a key on its failure backoff stays on it.
import type { Logger } from "pino";
import {
  BillingAccount,
  billingAccountName,
  customerAccount,
  findAccount,
  type OrphanedRun,
} from "../crds/billingaccount.js";
import { GpuEndpoint } from "../crds/gpuendpoint.js";
import { MediaJob } from "../crds/mediajob.js";
import { fairShareWeights, stateNamespace, type Env } from "../config/env.js";
import { accountRequired, usageSettings } from "../config/usage.js";
import type { MeterSender } from "./usage/meter-client.js";
import type { MeterCheck } from "./usage/meter-check.js";
import { UsageMetrics } from "./usage/metrics.js";
import { UsageReporter } from "./usage/reporter.js";
import { OrphanFollower } from "./usage/orphans.js";
import type { KubeApi, KubeObject } from "../k8s/api.js";
import { describeError } from "../k8s/errors.js";
import { BackgroundEventRecorder, EventRecorder } from "../k8s/events.js";
import type { GpuProviderClient } from "../provider/index.js";
import { GpuEndpointReconciler } from "./gpuendpoint/reconciler.js";
import { ProviderView } from "./gpuendpoint/provider-view.js";
import { keepBinding, stripMetadata, trimMediaJob } from "./cache-transform.js";
import { IdleCompaction, runtimeCollector, type IdleCompactionPolicy } from "./idle-compaction.js";
import { holderKey } from "../callback/holders.js";
import { AccountJobs } from "./account-jobs.js";
import { AccountLimits } from "./account-limits.js";
import { Informer, objectKey } from "./informer.js";
import {
  admission,
  endpointMatches,
  endpointReadiness,
  pickEndpoint,
  planLimits,
} from "../mediajob/admission.js";
import { accountFacts } from "./account-facts.js";
import { accountWeights } from "../mediajob/fair-share.js";
import { planFor, type Plan } from "../mediajob/plans.js";
import { atRest, settled } from "../mediajob/at-rest.js";
import {
  ACCOUNTS_USAGE_ANNOTATION,
  accountsSummary,
  billedAccount,
  boundAccounts,
  jobAccount,
} from "../mediajob/tenancy.js";
import { jobEventWorthALook } from "./job-at-rest.js";
import { Dispatcher } from "./dispatch/dispatcher.js";
import { LeaderElector } from "./leader.js";
import { MediaJobReconciler, RetryLater } from "./mediajob/reconciler.js";
import { ControllerMetrics } from "./metrics.js";
import { OwnWrites, recordingWrites } from "./own-writes.js";
import { WorkQueue, type ReconcileResult } from "./workqueue.js";

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
}

export class Manager {
  readonly jobs: Informer<MediaJob>;
  readonly endpoints: Informer<GpuEndpoint>;
  readonly accounts: Informer<BillingAccount>;
  /** Namespaces, trimmed to their account binding (cache-transform.ts keepBinding). */
  readonly namespaces: Informer<KubeObject>;
  /** Running jobs per account, for the plans' concurrency cap. */
  readonly accountJobs = new AccountJobs();
  /** Keeps each account's shown plan limit (status.usage.limitSeconds) equal to its plan. */
  private readonly accountLimits: AccountLimits;
  readonly jobQueue: WorkQueue;
  readonly endpointQueue: WorkQueue;
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
  readonly jobReconciler: MediaJobReconciler;
  /** The endpoints' in-flight windows and fair share; undefined with FAIR_SHARE_WINDOW=false. */
  readonly dispatcher?: Dispatcher;
  readonly endpointReconciler: GpuEndpointReconciler;
  /** The provider's management view shared by every GpuEndpoint reconcile (one check per tick). */
  readonly providerView: ProviderView;
  /** resourceVersions of our own writes, whose watch events are not a reason to reconcile. */
  readonly ownJobWrites = new OwnWrites();
  readonly ownEndpointWrites = new OwnWrites();
  /** Events are written in the background; stop() waits for them. */
  private readonly events: BackgroundEventRecorder;
  /** Gives the garbage of a burst of work (a list, a pass) back to the system once it is over. */
  readonly compaction: IdleCompaction;
  private compactionTimer?: NodeJS.Timeout;
  /** The leader's follow-up of runs left at the provider by deleted jobs (usage/orphans.ts). */
  private readonly orphans: OrphanFollower;
  private orphanPass?: Promise<void>;
  /** The leader's usage reporter: account period usage and the meter events (usage/reporter.ts). */
  readonly usage: UsageReporter;
  /** Whether usage is metered at the payment provider (USAGE_METERING, config/usage.ts). */
  private readonly metering: boolean;
  /**
   * The payment provider's meter client, loaded by start() when metering is on: a controller that
   * does not meter never loads its code (docs/benchmarks.md, "Footprint of the containers").
   */
  private meter?: MeterSender;
  /** The payment provider's meters checked against what is sent (usage/meter-check.ts), with the client. */
  private meterCheck?: MeterCheck;

  constructor(private readonly o: ManagerOptions) {
    const { api, env, log } = o;
    const ns = env.WATCH_NAMESPACE;
    this.metrics = o.metrics ?? new ControllerMetrics();
    this.jobs = new Informer<MediaJob>(api, {
      plural: "mediajobs",
      namespace: ns,
      schema: MediaJob,
      transform: trimMediaJob,
      log: log.child({ informer: "mediajobs" }),
      onInvalid: (raw) => this.reportInvalid("mediajobs", raw),
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
    const events = new BackgroundEventRecorder(new EventRecorder(api, "controller", log), log, {
      onDrop: () => this.metrics.eventsDropped.inc(),
    });
    this.events = events;
    this.compaction = new IdleCompaction(
      "collectGarbage" in o ? o.collectGarbage : runtimeCollector(),
      o.idleCompaction,
    );
    const tickMs = env.RESYNC_INTERVAL_SECONDS * 1000;
    const queueOpts = (name: string) => ({
      onError: (key: string, err: unknown, retryInMs: number) => {
        const level = err instanceof RetryLater ? "info" : "warn";
        log[level](
          { controller: name, key, err: describeError(err), retryInMs },
          "reconcile failed; retrying with backoff",
        );
      },
      onDone: (_key: string, ms: number, outcome: string) => {
        this.compaction.noteWork();
        this.metrics.reconciles.inc({ controller: name, outcome });
        this.metrics.reconcileSeconds.observe({ controller: name }, ms / 1000);
      },
      metrics: this.metrics.workqueue.sink(name),
    });
    this.jobQueue = new WorkQueue(queueOpts("mediajob"));
    this.endpointQueue = new WorkQueue({ ...queueOpts("gpuendpoint"), maxDelayMs: tickMs });
    this.metrics.workqueue.track("mediajob", this.jobQueue);
    this.metrics.workqueue.track("gpuendpoint", this.endpointQueue);
    this.metrics.resources.readFrom({
      jobs: () => this.jobs.list(),
      endpoints: () => this.endpoints.list(),
      defaultTimeoutSeconds: env.JOB_TIMEOUT_SECONDS,
    });

    const usage = usageSettings(env);
    const usageMetrics = new UsageMetrics(this.metrics.registry, [
      usage.defaultEventName,
      ...Object.values(usage.eventNames),
    ]);
    if (env.FAIR_SHARE_WINDOW) {
      this.dispatcher = new Dispatcher({
        // A granted job goes ahead of the waiting jobs' passes: its slot is idle until it submits.
        wake: (key) => this.jobQueue.addUrgent(key),
        jobSeconds: env.FAIR_SHARE_JOB_SECONDS,
        tickSeconds: env.FAIR_SHARE_TICK_SECONDS,
        // An account's weight: its override (FAIR_SHARE_WEIGHTS), else its plan's, else 1.
        weights: accountWeights(fairShareWeights(env), (account) => this.planOf(account)?.fairShareWeight),
        eligible: (job) => this.eligibleEndpoint(job),
      });
      this.metrics.dispatch.readFrom(this.dispatcher);
    }
    if (!env.CALLBACK_BASE_URL || !env.CALLBACK_SECRET)
      throw new Error("CALLBACK_BASE_URL and CALLBACK_SECRET are required");
    this.jobReconciler = new MediaJobReconciler({
      api: recordingWrites(api, "mediajobs", this.ownJobWrites),
      jobs: this.jobs,
      endpoints: this.endpoints,
      accounts: this.accounts,
      boundAccounts: (namespace) => this.boundAccounts(namespace),
      provider: o.provider,
      events,
      accountNamespace,
      log: log.child({ controller: "mediajob" }),
      settings: {
        callbackBaseUrl: env.CALLBACK_BASE_URL,
        // Read per submission: a rotated key file takes effect without a restart.
        get callbackSecret() {
          return env.CALLBACK_SECRET!;
        },
        defaultTimeoutSeconds: env.JOB_TIMEOUT_SECONDS,
        ...(env.JOB_START_DEADLINE_SECONDS > 0 && {
          defaultStartDeadlineSeconds: env.JOB_START_DEADLINE_SECONDS,
        }),
        confirmationWindowMs: env.CALLBACK_CONFIRMATION_SECONDS * 1000,
        unconfirmedPolicy: env.UNCONFIRMED_SUBMISSION_POLICY,
        cancelGiveUpMs: env.DELETE_CANCEL_TIMEOUT_SECONDS * 1000,
        usageWaitMs: env.DELETE_USAGE_TIMEOUT_SECONDS * 1000,
        tickMs,
        plans: env.MEDIA_PLANS,
        accountRequired: accountRequired(env),
        cancelFollowWarningMs: env.CANCEL_FOLLOW_WARNING_SECONDS * 1000,
        usage,
      },
      accountJobs: this.accountJobs,
      // From the cache, which holds every job of the watched scope (a settled one keeps its
      // provider id): a submission costs no list call, where the apiserver would read every job.
      holders: (providerJobId) => Promise.resolve(this.holdersOf(providerJobId)),
      onTransition: (from, to) => this.metrics.transitions.inc({ from: from ?? "", to: to ?? "" }),
      onSubmission: (outcome) => this.metrics.submissions.inc({ outcome }),
      onRecovery: (kind) => this.metrics.recoveries.inc({ kind }),
      onUsageDropped: (seconds) => usageMetrics.droppedSeconds.inc(seconds),
      recordOrphan: (orphan) => this.recordOrphan(orphan),
      onRunLeft: (followed) => usageMetrics.runsLeft.inc({ followed: String(followed) }),
      ...(this.dispatcher && { dispatcher: this.dispatcher }),
      fence: () => this.leading && (this.elector?.holdsLease() ?? true),
      leadership: () => this.leadership?.signal,
    });
    this.orphans = new OrphanFollower({
      api,
      accounts: this.accounts,
      accountNamespace,
      provider: o.provider,
      meter: () => this.meter,
      settings: usage,
      log: log.child({ component: "orphans" }),
      leading: () => this.leading,
      onFollowed: (count) => usageMetrics.runsFollowed.set(count),
    });
    this.metering = usage.metering;
    const meter = () => this.meter;
    this.usage = new UsageReporter({
      api,
      jobs: this.jobs,
      accounts: this.accounts,
      accountNamespace,
      // Read per pass: undefined until start() has loaded the client, and always without metering.
      get meter() {
        return meter();
      },
      events,
      log: log.child({ component: "usage-reporter" }),
      metrics: usageMetrics,
      intervalMs: env.USAGE_REPORT_INTERVAL_SECONDS * 1000,
      synced: () => this.synced,
      leading: () => this.leading && (this.elector?.holdsLease() ?? true),
      held: (eventName) => this.meterCheck?.held(eventName),
    });
    // Shared for a tick, with room for the tick timer and the reconciles to drift by up to 500 ms.
    this.providerView = new ProviderView(
      o.provider,
      tickMs - Math.min(500, tickMs / 2),
      env.PROVIDER_DRIFT_CHECK_SECONDS * 1000 - 500,
    );
    this.endpointReconciler = new GpuEndpointReconciler({
      api: recordingWrites(api, "gpuendpoints", this.ownEndpointWrites),
      endpoints: this.endpoints,
      provider: o.provider,
      view: this.providerView,
      events,
      log: log.child({ controller: "gpuendpoint" }),
      env,
      tickMs,
      ...(this.dispatcher && { dispatcher: this.dispatcher }),
    });

    this.jobs.on((event, job, old) => {
      this.compaction.noteWork();
      const key = objectKey(job);
      if (event === "delete") this.ownJobWrites.forget(job);
      // A settled job is never reconciled again in this state: what the stale-cache guard keeps
      // of our writes to it is history (memory follows active jobs).
      if (event !== "delete" && settled(job)) this.jobReconciler.stale.forget(key);
      const ours = event !== "delete" && this.ownJobWrites.claim(job);
      const superseded = ours && this.jobReconciler.stale.isStale(key, job.metadata.resourceVersion);
      if (jobEventWorthALook(event, job, old, ours, superseded)) this.jobQueue.add(key);
    });
    this.jobs.on((event, job, old) => this.accountJobs.observe(event, job, old));
    // A job whose usage changed (recorded, billed) has work for the usage reporter.
    this.jobs.on((event, job, old) => {
      if (
        this.leading &&
        event !== "delete" &&
        job.status?.usage !== undefined &&
        job.status.usage !== old?.status?.usage
      )
        this.usage.wake();
    });
    // Counted by the leader only, so a sum across replicas counts each job once.
    this.jobs.on((event, job, old) => {
      if (this.leading) this.metrics.resources.observe(event, job, old);
    });
    // Which jobs are in flight where, on every replica: a new leader's windows start from it.
    this.jobs.on((event, job) => this.dispatcher?.observe(event, job));
    this.endpoints.on((event, ep, old) => {
      this.compaction.noteWork();
      if (event === "delete") this.ownEndpointWrites.forget(ep);
      // The event of our own status write changes nothing the reconcile has not seen.
      if (event === "delete" || !this.ownEndpointWrites.claim(ep)) this.endpointQueue.add(objectKey(ep));
      // Jobs waiting on this endpoint go at once, not at the next tick.
      if (
        event !== "delete" &&
        JSON.stringify(ep.status?.conditions) === JSON.stringify(old?.status?.conditions)
      )
        return;
      for (const job of this.jobs.list(ep.metadata.namespace)) {
        if (job.status?.phase !== "Pending" && job.status?.phase !== undefined) continue;
        if (endpointMatches(job, ep)) this.jobQueue.add(objectKey(job));
      }
    });
    this.accountLimits = new AccountLimits(api, env.MEDIA_PLANS, log.child({ component: "account-limits" }));
    // A binding that changed looks at the namespace's waiting jobs at once, not at the next tick.
    this.namespaces.on((event, namespace, old) => {
      const now = boundAccounts(namespace.metadata.annotations as Record<string, string> | undefined);
      const before = boundAccounts(old?.metadata.annotations as Record<string, string> | undefined);
      if (event === "update" && now.join(",") === before.join(",")) return;
      for (const job of this.jobs.list(namespace.metadata.name))
        if ((job.status?.phase ?? "Pending") === "Pending" && !atRest(job)) this.jobQueue.add(objectKey(job));
    });
    this.accounts.on((e, acct) => {
      if (this.leading && e !== "delete") void this.accountLimits.sync(acct);
      for (const job of this.jobs.list()) {
        if (atRest(job)) continue;
        const account = jobAccount(job);
        if (account && billingAccountName(account) === acct.metadata.name && customerAccount(acct, account))
          this.jobQueue.add(objectKey(job));
      }
    });

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

  /** The accounts the namespace is bound to, from the cache (tenancy.ts). */
  boundAccounts(namespace: string): string[] {
    return boundAccounts(
      this.namespaces.get("", namespace)?.metadata.annotations as Record<string, string> | undefined,
    );
  }

  /** The cached MediaJobs (`namespace/name`) that hold a provider job id. */
  private holdersOf(providerJobId: string): string[] {
    return this.jobs
      .list()
      .filter((j) => j.status?.providerJobId === providerJobId)
      .map(holderKey);
  }

  /** The customer's BillingAccount in the cache (one of its name that is another customer's is not it). */
  private account(customerId: string): BillingAccount | undefined {
    return findAccount(this.accounts, stateNamespace(this.o.env), customerId);
  }

  /** The plan of an account's subscription, when plans are configured (src/mediajob/plans.ts). */
  private planOf(account: string): Plan | undefined {
    const plans = this.o.env.MEDIA_PLANS;
    if (Object.keys(plans).length === 0) return undefined;
    const status = this.account(account)?.status;
    return planFor(plans, status?.priceIds ?? []);
  }

  /**
   * The endpoint a Pending job would be submitted to now, from the caches: admitted by its
   * account and its plan, its endpoint Ready (the same rules as its pass, src/mediajob/pending.ts).
   */
  private eligibleEndpoint(job: MediaJob): GpuEndpoint | undefined {
    const billed = billedAccount(
      job,
      this.boundAccounts(job.metadata.namespace ?? ""),
      accountRequired(this.o.env),
    );
    if ("refused" in billed) return undefined;
    const account = billed.account;
    const state = account ? this.account(account)?.status?.subscriptionStatus : undefined;
    if (admission(account, state).status !== "True") return undefined;
    const plans = this.o.env.MEDIA_PLANS;
    const facts = accountFacts(
      job,
      account,
      {
        accounts: this.accounts,
        accountNamespace: stateNamespace(this.o.env),
        accountJobs: this.accountJobs,
        plans,
      },
      Date.now(),
    );
    if (!planLimits(job, account, plans, facts).admitted) return undefined;
    const ns = job.metadata.namespace ?? "";
    const ref = job.spec.endpointRef;
    const ep = pickEndpoint(
      job,
      ref ? [this.endpoints.get(ns, ref)].filter((e) => e !== undefined) : this.endpoints.list(ns),
    );
    return endpointReadiness(job, ep).status === "True" ? ep : undefined;
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
    // Before leading: the reporter's first pass already sends.
    if (this.metering && !this.meter) {
      const [{ MeterClient }, { MeterCheck }] = await Promise.all([
        import("./usage/meter-client.js"),
        import("./usage/meter-check.js"),
      ]);
      const env = this.o.env;
      // Read per call: a rotated key file takes effect without a restart.
      const apiKey = () => env.PAYMENT_PROVIDER_API_KEY ?? "";
      const usage = usageSettings(env);
      this.meterCheck = new MeterCheck({
        baseUrl: env.PAYMENT_PROVIDER_API_URL,
        apiKey,
        eventNames: [usage.defaultEventName, ...Object.values(usage.eventNames)],
        log: this.o.log.child({ component: "meter-check" }),
        registry: this.metrics.registry,
        accounts: { api: this.o.api, cache: this.accounts, namespace: stateNamespace(env) },
        leading: () => this.leading && (this.elector?.holdsLease() ?? true),
        onFixed: () => this.usage.wake(),
        ...(this.o.meterRecheckMs !== undefined && { recheckMs: this.o.meterRecheckMs }),
      });
      this.meter = this.meterCheck.gate(new MeterClient({ baseUrl: env.PAYMENT_PROVIDER_API_URL, apiKey }));
    }
    this.meterCheck?.start();
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
    const concurrency = this.o.env.MAX_CONCURRENT_RECONCILES;
    this.running = Promise.all([
      this.jobQueue.run(concurrency, this.reconcileJob),
      this.endpointQueue.run(Math.max(1, Math.min(4, concurrency)), this.endpointReconciler.reconcile),
    ]);
    this.usage.start();
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
    for (const key of this.endpoints.keys()) this.endpointQueue.addUnlessBackingOff(key);
    for (const job of this.jobs.list()) if (!atRest(job)) this.jobQueue.addUnlessBackingOff(objectKey(job));
    for (const acct of this.accounts.list()) void this.accountLimits.sync(acct);
    this.followOrphans();
    this.summarizeBindings();
    this.metrics.cachedObjects.set({ resource: "mediajobs" }, this.jobs.size);
    this.metrics.cachedObjects.set({ resource: "gpuendpoints" }, this.endpoints.size);
  }

  /**
   * Each bound Namespace carries its accounts' plan and period usage for its tenants
   * (ACCOUNTS_USAGE_ANNOTATION): written at the tick, only when it changed.
   */
  private summarizeBindings(): void {
    for (const ns of this.namespaces.list()) {
      const annotations = ns.metadata.annotations as Record<string, string> | undefined;
      const bound = boundAccounts(annotations);
      const text = accountsSummary(
        bound.map((customerId) => ({ customerId, status: this.account(customerId)?.status })),
      );
      if (text === annotations?.[ACCOUNTS_USAGE_ANNOTATION]) continue;
      void this.o.api
        .mergePatch("namespaces", "", ns.metadata.name, {
          metadata: { annotations: { [ACCOUNTS_USAGE_ANNOTATION]: text ?? null } },
        })
        .catch((err: unknown) =>
          this.o.log.warn(
            { namespace: ns.metadata.name, err: describeError(err) },
            "accounts' summary not written",
          ),
        );
    }
  }

  /** A pass over the runs left at the provider (usage/orphans.ts), one at a time. */
  private followOrphans(): void {
    if (this.orphanPass || !this.accounts.list().some((a) => a.status?.orphans?.length)) return;
    this.orphanPass = this.orphans
      .pass()
      .catch((err: unknown) => this.o.log.warn({ err: describeError(err) }, "orphan follow-up failed"))
      .finally(() => (this.orphanPass = undefined));
  }

  /**
   * Puts a run left at the provider on its BillingAccount (status.orphans), once: "added", "present"
   * (recorded by an earlier pass), or "missing" (no BillingAccount of that customer to hold it).
   */
  private async recordOrphan(orphan: OrphanedRun): Promise<"added" | "present" | "missing"> {
    const res = await this.o.api.updateStatusWithRetry<BillingAccount>(
      "billingaccounts",
      stateNamespace(this.o.env),
      billingAccountName(orphan.account),
      (cur) => {
        if (cur.spec.customerId !== orphan.account) return undefined;
        const list = cur.status?.orphans ?? [];
        if (list.some((o) => o.uid === orphan.uid && o.attempt === orphan.attempt)) return undefined;
        return { ...cur, status: { ...cur.status, orphans: [...list, orphan] } };
      },
    );
    if (res.object?.spec.customerId !== orphan.account) return "missing";
    return res.written ? "added" : "present";
  }

  /**
   * A settled job is cached as a record (cache-transform.ts) that no pass may start from: it lacks
   * most of the status a pass writes back. A pass would change nothing anyway (mediajob/at-rest.ts), so
   * none runs. A key queued before its job settled ends here.
   */
  private readonly reconcileJob = async (key: string): Promise<ReconcileResult | void> => {
    const job = this.jobs.getByKey(key);
    if (job && settled(job)) return;
    return this.jobReconciler.reconcile(key);
  };

  /** Losing the lease stops reconciling at once: no new key is handed out. */
  private stopLeading(): void {
    if (!this.leading) return;
    this.leading = false;
    this.leadership?.abort();
    this.dispatcher?.stopLeading();
    this.metrics.leader.set(0);
    this.metrics.leaderChanges.inc({ change: "lost" });
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    this.jobQueue.shutdown();
    this.endpointQueue.shutdown();
    void this.usage.stop();
    if (!this.stopped) this.o.onLeadershipLost?.();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.compactionTimer) clearInterval(this.compactionTimer);
    this.compactionTimer = undefined;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    this.jobQueue.shutdown();
    this.endpointQueue.shutdown();
    await this.running; // in-flight reconciles finish
    await this.usage.stop();
    await this.meterCheck?.stop();
    await this.orphanPass;
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
