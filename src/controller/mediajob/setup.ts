// The MediaJob loop's setup: its reconciler and settings, its controller, and its watches with
// their map functions: a job's own events (less those of our own writes and of jobs at rest), and
// the waiting jobs an endpoint, a Namespace's binding or a BillingAccount concerns.
import { Counter } from "prom-client";
import { ProviderJobIndex } from "./provider-job-index.js";
import { billingAccountName, customerAccount, type OrphanedRun } from "../../crds/billingaccount.js";
import { accountRequired } from "../../config/usage.js";
import type { UsageSettings } from "../../mediajob/usage.js";
import { endpointMatches } from "../../mediajob/admission.js";
import { atRest, settled } from "../../mediajob/at-rest.js";
import { boundAccounts, jobAccount } from "../../mediajob/tenancy.js";
import { objectKey } from "../../runtime/informer.js";
import { OwnWrites, recordingWrites } from "../../runtime/own-writes.js";
import { accountChangeConcernsJobs } from "../account-facts.js";
import type { AccountJobs } from "../account-jobs.js";
import type { Dispatcher } from "../dispatch/dispatcher.js";
import { jobEventWorthALook } from "../job-at-rest.js";
import type { LoopContext } from "../loop-context.js";
import type { UsageMetrics } from "../usage/metrics.js";
import { MediaJobReconciler } from "./reconciler.js";
import { isPending } from "../../mediajob/job.js";
import type { Store } from "../../storage/index.js";

export interface MediaJobLoopDeps {
  accountJobs: AccountJobs;
  dispatcher: Dispatcher | undefined;
  /** The object store once opened (storage configured), for presigned I/O and output checks. */
  store: () => Store | undefined;
  usage: {
    settings: UsageSettings;
    metrics: UsageMetrics;
    recordOrphan: (o: OrphanedRun) => Promise<"added" | "present" | "missing">;
  };
}

export function setupMediaJob(ctx: LoopContext, deps: MediaJobLoopDeps) {
  const { env, metrics, tickMs } = ctx;
  const { jobs, endpoints, accounts, namespaces } = ctx.caches;
  const { accountJobs, dispatcher, usage } = deps;
  /** resourceVersions of our own writes, whose watch events are not a reason to reconcile. */
  const ownWrites = new OwnWrites();
  const outputsKept = new Counter({
    name: "media_orchestrator_storage_outputs_kept_total",
    help:
      "Outputs a worker left behind a URL of its own: copied into the store (kept), refused or failed (not_kept), " +
      "or cut short and tried again (retried)",
    labelNames: ["outcome"] as const,
    registers: [metrics.registry],
  });
  if (!env.CALLBACK_BASE_URL || !env.CALLBACK_SECRET)
    throw new Error("CALLBACK_BASE_URL and CALLBACK_SECRET are required");
  // From the cache, which holds every job of the watched scope (a settled one keeps its provider
  // id): a submission costs no list call, where the apiserver would read every job.
  const providerJobs = new ProviderJobIndex();
  const reconciler = new MediaJobReconciler({
    api: recordingWrites(ctx.api, "mediajobs", ownWrites),
    jobs,
    endpoints,
    accounts,
    boundAccounts: ctx.boundAccounts,
    provider: ctx.provider,
    events: ctx.events,
    accountNamespace: ctx.accountNamespace,
    log: ctx.log.child({ controller: "mediajob" }),
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
      usageSettleWaitMs: env.USAGE_SETTLE_WAIT_SECONDS * 1000,
      tickMs,
      plans: env.MEDIA_PLANS,
      accountRequired: accountRequired(env),
      cancelFollowWarningMs: env.CANCEL_FOLLOW_WARNING_SECONDS * 1000,
      usage: usage.settings,
      ...(env.STORAGE_BUCKET !== undefined && { storageBucket: env.STORAGE_BUCKET }),
    },
    store: deps.store,
    accountJobs,
    holders: (providerJobId) => Promise.resolve(providerJobs.holders(providerJobId)),
    onTransition: (from, to) => metrics.transitions.inc({ from: from ?? "", to: to ?? "" }),
    onSubmission: (outcome) => metrics.submissions.inc({ outcome }),
    onRecovery: (kind) => metrics.recoveries.inc({ kind }),
    onUsageDropped: (seconds) => usage.metrics.droppedSeconds.inc(seconds),
    onOutputKept: (outcome) => outputsKept.inc({ outcome }),
    recordOrphan: usage.recordOrphan,
    onRunLeft: (followed) => usage.metrics.runsLeft.inc({ followed: String(followed) }),
    ...(dispatcher && { dispatcher }),
    fence: ctx.fence,
    leadership: ctx.leadership,
  });
  const controller = ctx.controller({
    name: "mediajob",
    // A settled job is cached as a record (cache-transform.ts) that no pass may start from: it
    // lacks most of the status a pass writes back. A pass would change nothing anyway
    // (mediajob/at-rest.ts), so none runs. A key queued before its job settled ends here.
    reconcile: (key) => {
      const job = jobs.getByKey(key);
      return job && settled(job) ? Promise.resolve(undefined) : reconciler.pass(key);
    },
    concurrency: env.MAX_CONCURRENT_RECONCILES,
  });
  const queue = controller.queue;

  jobs.on((event, job, old) => {
    ctx.noteWork();
    const key = objectKey(job);
    if (event === "delete") ownWrites.forget(job);
    // A settled job is never reconciled again in this state: what the stale-cache guard keeps
    // of our writes to it is history (memory follows active jobs).
    if (event !== "delete" && settled(job)) reconciler.stale.forget(key);
    const ours = event !== "delete" && ownWrites.claim(job);
    const superseded = ours && reconciler.stale.isStale(key, job.metadata.resourceVersion);
    if (jobEventWorthALook(event, job, old, ours, superseded)) queue.add(key);
  });
  jobs.on((event, job, old) => accountJobs.observe(event, job, old));
  jobs.on((event, job, old) => providerJobs.note(event, job, old));
  // Counted by the leader only, so a sum across replicas counts each job once.
  jobs.on((event, job, old) => {
    if (ctx.leading()) metrics.resources.observe(event, job, old);
  });
  // Jobs waiting on an endpoint go at once when its conditions change, not at the next tick.
  endpoints.on((event, ep, old) => {
    if (
      event !== "delete" &&
      JSON.stringify(ep.status?.conditions) === JSON.stringify(old?.status?.conditions)
    )
      return;
    for (const job of jobs.list(ep.metadata.namespace)) {
      if (job.status?.phase !== "Pending" && job.status?.phase !== undefined) continue;
      if (endpointMatches(job, ep)) queue.add(objectKey(job));
    }
  });
  // A binding that changed looks at the namespace's waiting jobs at once, not at the next tick.
  namespaces.on((event, namespace, old) => {
    const now = boundAccounts(namespace.metadata.annotations as Record<string, string> | undefined);
    const before = boundAccounts(old?.metadata.annotations as Record<string, string> | undefined);
    if (event === "update" && now.join(",") === before.join(",")) return;
    for (const job of jobs.list(namespace.metadata.name))
      if (isPending(job.status) && !atRest(job)) queue.add(objectKey(job));
  });
  // An account's change concerns every job that names it and is not at rest, when it changes what
  // a pass reads of it (a usage count does not, without plans).
  accounts.on((_event, acct, old) => {
    if (!accountChangeConcernsJobs(old, acct, env.MEDIA_PLANS)) return;
    for (const job of jobs.list()) {
      if (atRest(job)) continue;
      const account = jobAccount(job);
      if (account && billingAccountName(account) === acct.metadata.name && customerAccount(acct, account))
        queue.add(objectKey(job));
    }
  });

  return {
    reconciler,
    controller,
    ownWrites,
    /** The tick: every job not at rest, unless it waits out a failure's backoff. */
    resync(): void {
      for (const job of jobs.list()) if (!atRest(job)) queue.addUnlessBackingOff(objectKey(job));
    },
  };
}
