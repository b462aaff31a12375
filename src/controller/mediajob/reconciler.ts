// The MediaJob executor: gathers the facts of one job (the caches, the clock, a provider status
// only when one is due), asks the domain for the pass (src/mediajob/plan.ts), and carries out its
// actions in order. Level-triggered: the same object in the same world always leads to the same
// actions, so a repeated or concurrent trigger is harmless. Only the write-ahead submission
// (submit.ts) writes status more than once in a pass, and it does so by name.
import { DEFAULT_USAGE_SETTINGS, withBilledUsage } from "../../mediajob/usage.js";
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { billingAccountName, type BillingAccount } from "../../crds/billingaccount.js";
import type { GpuEndpoint } from "../../crds/gpuendpoint.js";
import type { MediaJob } from "../../crds/mediajob.js";
import { describeError, isAlreadyExists } from "../../k8s/errors.js";
import type { EventSink } from "../../k8s/events.js";
import { isProviderError, type GpuProviderClient } from "../../provider/index.js";
import { admission, endpointReadiness, pickEndpoint, planLimits } from "../../mediajob/admission.js";
import type { SlotFact } from "../../mediajob/queued.js";
import type { PlannedEvent } from "../../mediajob/conditions.js";
import {
  CANCEL_GIVE_UP_MS,
  cancelFailedEvent,
  cancelledEvent,
  planDeletion,
} from "../../mediajob/deletion.js";
import { acceptedStatus } from "../../mediajob/write-ahead.js";
import { afterNextStep, type CreateAnswer } from "../../mediajob/next-step.js";
import {
  finalStatus,
  planFinish,
  planJob,
  retry,
  type Action,
  type Facts,
  type FinishAction,
  type PassError,
  type Plan,
  type PlanSettings,
  type ProviderRead,
  type RecoveryKind,
  type SubmissionOutcome,
} from "../../mediajob/plan.js";
import { providerReadDue } from "../../mediajob/processing.js";
import { afterDeletionCancel, afterStop, type CancelAnswer } from "../../mediajob/stop.js";
import { accountFacts } from "../account-facts.js";
import { sameStatus } from "../same-status.js";
import type { Informer } from "../informer.js";
import { StaleCacheGuard } from "../stale-cache.js";
import type { ReconcileResult } from "../workqueue.js";
import type { Dispatcher } from "../dispatch/dispatcher.js";
import { submit } from "./submit.js";
import { JobWrites, jobKey, type JobApi } from "./writes.js";
import type { AccountJobs } from "../account-jobs.js";

interface MediaJobSettings extends PlanSettings {
  callbackBaseUrl: string;
  callbackSecret: string;
}

export interface MediaJobDeps {
  api: JobApi;
  jobs: Pick<Informer<MediaJob>, "getByKey" | "get">;
  endpoints: Pick<Informer<GpuEndpoint>, "get" | "list">;
  accounts: Pick<Informer<BillingAccount>, "get">;
  provider: Pick<GpuProviderClient, "submit" | "status" | "cancel">;
  events: EventSink;
  log: Logger;
  settings: MediaJobSettings;
  /** Where the sidecar keeps BillingAccounts; undefined: the job's own namespace. */
  accountNamespace?: string;
  /**
   * The leader's fence, checked immediately before every side effect at the provider: false once
   * this replica may no longer be the leader. Undefined: always true (no leader election).
   */
  fence?: () => boolean;
  /** Aborted when leadership is lost: in-flight provider calls stop waiting. */
  leadership?: () => AbortSignal | undefined;
  onSubmission?: (outcome: SubmissionOutcome) => void;
  /**
   * The endpoints' in-flight windows and fair share (dispatch/dispatcher.ts). Undefined: no
   * window, every job that may go is submitted at once.
   */
  dispatcher?: Dispatcher;
  now?: () => Date;
  onTransition?: (from: string | undefined, to: string | undefined) => void;
  /** A job recovered by the controller itself (for metrics). */
  onRecovery?: (kind: RecoveryKind) => void;
  /** Running jobs per account, for the plans' concurrency cap; needed when plans are configured. */
  accountJobs?: AccountJobs;
}

/** A pass's retryable error: the key is retried with backoff (the cause is in a condition). */
export class RetryLater extends Error {
  override readonly name = "RetryLater";
}

/** A pass's result, as controller-runtime's `(Result, error)`. */
export interface PassResult {
  result?: ReconcileResult;
  error?: PassError;
}

interface Step {
  job: MediaJob;
  plan: Plan;
  /** What became of the submission, when the action was one. */
  submitted?: SubmissionOutcome;
  /** The action wrote the job's status itself (the write-ahead sequence): no final write. */
  written?: MediaJob;
}

export class MediaJobReconciler {
  /** The manager forgets a key here once its job has settled (nothing will read it again). */
  readonly stale = new StaleCacheGuard();
  /**
   * Provider ids of accepted submissions whose record write failed, by key: retried on the next
   * pass so the id is not left to the callback alone. Lost with the process, which is safe: the
   * submission stays Processing (never resubmitted) and its callback adopts it.
   */
  private readonly unrecorded = new Map<string, { attempt: number; providerJobId: string }>();
  private readonly writes: JobWrites;

  constructor(private readonly d: MediaJobDeps) {
    this.writes = new JobWrites(d.api, this.stale, () => this.now(), d.log);
  }

  private now(): Date {
    return this.d.now?.() ?? new Date();
  }

  private fenceHolds = (): boolean => this.d.fence?.() ?? true;

  /** The work queue's entry: a retryable error is thrown (backoff), a terminal one only logged. */
  readonly reconcile = async (key: string): Promise<ReconcileResult | void> => {
    const { result, error } = await this.pass(key);
    if (error && !error.terminal) throw new RetryLater(error.message);
    if (error)
      this.d.log.info({ job: key, err: error.message }, "reconcile ended on a terminal error; not retried");
    return result;
  };

  /** One pass: gather, plan, execute. */
  async pass(key: string): Promise<PassResult> {
    let job = this.d.jobs.getByKey(key);
    if (!job) {
      this.stale.forget(key);
      return {};
    }
    if (this.stale.isStale(key, job.metadata.resourceVersion)) return { result: { requeueAfterMs: 50 } };
    if (job.metadata.deletionTimestamp) return this.finalize(job);

    const nowDate = this.now();
    const now = nowDate.toISOString();
    const before = job.status;
    const facts = await this.gather(job, nowDate);
    // Counted, planned and reserved with no await between: two passes of one account cannot both
    // take its last concurrent slot, and a window's slot is asked for only by a job its plan admits.
    const account = accountFacts(job, { ...this.d, plans: this.d.settings.plans }, nowDate.getTime());
    if (account) facts.account = account;
    const slot = this.askSlot(job, facts);
    if (slot) facts.slot = slot;
    let plan = planJob(job, facts);
    const reservation = this.reserve(job, plan);
    let written: MediaJob | undefined;
    let submitted: SubmissionOutcome | undefined;
    try {
      for (const action of plan.actions) {
        ({ job, plan, written, submitted } = await this.execute(job, plan, action, now));
        if (written) break;
      }
    } finally {
      if (reservation && written?.status?.phase !== "Processing") this.d.accountJobs?.release(...reservation);
      this.afterSlot(key, facts, submitted);
    }
    if (plan.submission) this.d.onSubmission?.(plan.submission);
    if (plan.recovery) this.d.onRecovery?.(plan.recovery);

    if (written) job = written;
    else if (!sameStatus(plan.status, before)) {
      job = await this.writes.replaceStatus(job, plan.status);
      if (before?.phase !== plan.status.phase) this.d.onTransition?.(before?.phase, plan.status.phase);
    }
    for (const e of plan.events) await this.record(job, e);

    const next = job.status?.nextJob;
    const finish = planFinish(job, {
      nowMs: nowDate.getTime(),
      requeueAfterMs: plan.requeueAfterMs,
      nextStepCached: next !== undefined && this.d.jobs.get(job.metadata.namespace!, next) !== undefined,
      failed: plan.error !== undefined && !plan.error.terminal,
    });
    let kept = true;
    for (const action of finish.actions) kept = (await this.finish(job, action, now)) && kept;
    const result =
      kept && finish.requeueAfterMs !== undefined ? { requeueAfterMs: finish.requeueAfterMs } : undefined;
    return { ...(result && { result }), ...(plan.error && { error: plan.error }) };
  }

  private async gather(job: MediaJob, now: Date): Promise<Facts> {
    const ns = job.metadata.namespace ?? "";
    const settings = this.d.settings;
    const facts: Facts = {
      now,
      settings,
      newSubmissionId: randomBytes(12).toString("base64url"),
      unrecorded: this.unrecorded.get(jobKey(job)),
    };
    if ((job.status?.phase ?? "Pending") === "Pending") {
      const account = job.spec.account;
      if (account)
        facts.subscriptionState = this.d.accounts.get(
          this.d.accountNamespace ?? ns,
          billingAccountName(account),
        )?.status?.subscriptionStatus;
      const ref = job.spec.endpointRef;
      const candidates = ref
        ? [this.d.endpoints.get(ns, ref)].filter((e) => e !== undefined)
        : this.d.endpoints.list(ns);
      facts.endpoint = pickEndpoint(job, candidates);
    }
    const submitted = job.status?.submission;
    if (submitted && submitted.state !== "Accepted" && job.status?.endpointId) {
      const at = job.status.endpointId;
      facts.idempotentWorkers = this.d.endpoints
        .list(ns)
        .some((e) => e.status?.endpointId === at && e.spec.idempotentWorkers === true);
    }
    const due = providerReadDue(job, now.getTime(), settings.defaultTimeoutSeconds);
    if (due) facts.provider = await this.readStatus(due.endpointId, due.providerJobId);
    return facts;
  }

  /** A planned submission of a job with an account holds its place in the account's count. */
  private reserve(job: MediaJob, plan: Plan): [string, string] | undefined {
    const account = job.spec.account;
    if (!account || !this.d.accountJobs || !plan.actions.some((a) => a.type === "submit")) return undefined;
    this.d.accountJobs.reserve(account, jobKey(job));
    return [account, jobKey(job)];
  }

  /**
   * The window's gate, asked only of a job that could be submitted now (not suspended or
   * cancelled, admitted by its account and its plan, its endpoint Ready), so no slot is held by a
   * job that would not use it.
   */
  private askSlot(job: MediaJob, facts: Facts): SlotFact | undefined {
    const ep = facts.endpoint;
    if (!this.d.dispatcher || !ep?.status?.endpointId || job.spec.suspend || job.spec.cancel)
      return undefined;
    if ((job.status?.phase ?? "Pending") !== "Pending") return undefined;
    if (admission(job, facts.subscriptionState).status !== "True") return undefined;
    if (!planLimits(job, this.d.settings.plans, facts.account).admitted) return undefined;
    if (endpointReadiness(job, ep).status !== "True") return undefined;
    return this.d.dispatcher.gate(job, ep);
  }

  /**
   * What the pass did with its slot: an accepted submission grows the window, and a slot the pass
   * did not use (refused, fenced, not submitted after all) goes back. A 429 shrinks the window
   * (submit.ts tells the dispatcher, with the answer's Retry-After).
   */
  private afterSlot(key: string, facts: Facts, submitted: SubmissionOutcome | undefined): void {
    const dispatcher = this.d.dispatcher;
    const endpointId = facts.endpoint?.status?.endpointId;
    if (!dispatcher || !endpointId || !facts.slot?.granted) return;
    switch (submitted) {
      case "accepted":
        return dispatcher.accepted(endpointId);
      case "unconfirmed":
        return; // it may be running: it keeps its slot while Processing
      default:
        return dispatcher.release(endpointId, key);
    }
  }

  private async readStatus(endpointId: string, providerJobId: string): Promise<ProviderRead> {
    try {
      return { result: await this.d.provider.status(endpointId, providerJobId) };
    } catch (err) {
      if (isProviderError(err, "JOB_NOT_FOUND")) return { lost: true };
      return { error: describeError(err) };
    }
  }

  /** One planned action; an action with an answer hands it to the domain for the rest of the pass. */
  private async execute(job: MediaJob, plan: Plan, action: Action, now: string): Promise<Step> {
    switch (action.type) {
      case "addFinalizer":
        return { job: await this.writes.addFinalizer(job, action.metadata), plan };
      case "labelPipeline":
        return { job: await this.writes.labelPipeline(job, action.metadata), plan };
      case "submit": {
        let submitted: SubmissionOutcome | undefined;
        const deps = this.submitDeps((o) => (submitted = o));
        const done = await submit(deps, job, plan, action.submission, now);
        return { job, ...done, ...(submitted && { submitted }) };
      }
      case "recordProviderId": {
        const { attempt, providerJobId } = action;
        const written = await this.writes.writeOnto(job, (cur) =>
          acceptedStatus(cur, attempt, providerJobId, now),
        );
        this.unrecorded.delete(jobKey(job));
        return { job, plan, written };
      }
      case "cancel": {
        if (!this.fenceHolds()) return { job, plan: { ...plan, error: retry("not the leader: no cancel") } };
        let answer: CancelAnswer;
        try {
          answer = { result: await this.d.provider.cancel(action.endpointId, action.providerJobId) };
          // The cancel's answer says little (RunPod: the id and a status); the job's own status has
          // the final figures (executionTime, delayTime) a stopped job's usage is recorded from.
          const read = await this.readStatus(action.endpointId, action.providerJobId);
          if ("result" in read) answer = { result: read.result, confirmed: true };
        } catch (err) {
          answer = isProviderError(err, "JOB_NOT_FOUND") ? { lost: true } : { error: describeError(err) };
        }
        const next = afterStop(job, plan.status, action.why, answer, now, this.d.settings.tickMs);
        return { job, plan: this.then(job, plan, next, now) };
      }
      case "createNextStep": {
        const ns = job.metadata.namespace!;
        let answer: CreateAnswer;
        try {
          await this.d.api.create("mediajobs", ns, action.object as never);
          answer = { created: true };
        } catch (err) {
          if (!isAlreadyExists(err)) throw err;
          // Created by an earlier pass whose status write did not land? Adopted if it is ours.
          answer = { existing: await this.d.api.get<MediaJob>("mediajobs", ns, action.name) };
        }
        return {
          job,
          plan: this.then(job, plan, afterNextStep(job, plan.status, action.name, answer, now), now),
        };
      }
    }
  }

  /** The domain's reading of an answer replaces the plan's status; its Events follow the plan's. */
  private then(job: MediaJob, plan: Plan, next: Plan, now: string): Plan {
    return {
      ...plan,
      ...next,
      // An answer that ended the attempt (a cancel answered with its end) recorded its usage: billed
      // in this same write, as planJob bills.
      status: finalStatus(
        job,
        withBilledUsage(job, next.status, this.d.settings.usage ?? DEFAULT_USAGE_SETTINGS),
        now,
      ),
      events: [...plan.events, ...next.events],
    };
  }

  private submitDeps(told: (outcome: SubmissionOutcome) => void) {
    return {
      writes: this.writes,
      provider: this.d.provider,
      settings: this.d.settings,
      fence: this.fenceHolds,
      leadership: this.d.leadership,
      log: this.d.log,
      unrecorded: this.unrecorded,
      onSubmission: (outcome: SubmissionOutcome) => {
        told(outcome);
        this.d.onSubmission?.(outcome);
      },
      onTransition: this.d.onTransition,
      ...(this.d.dispatcher && {
        onThrottled: this.d.dispatcher.throttled.bind(this.d.dispatcher),
      }),
    };
  }

  /** One action after the status write; false when it deleted the job (nothing more to look at). */
  private async finish(job: MediaJob, action: FinishAction, now: string): Promise<boolean> {
    const ns = job.metadata.namespace!;
    switch (action.type) {
      case "reportToPipeline":
        // Before the step's finalizer goes, so a failed write is retried.
        await this.writes.reportToPipeline(ns, action.first, action.uid, action.condition, now);
        return true;
      case "releaseFinalizer":
        if (await this.writes.removeFinalizer(job)) await this.record(job, action.endEvent);
        return true;
      case "deleteExpired":
        // A step just created may not be cached yet: its absence is confirmed by a read.
        if (
          action.unlessStepExists &&
          (await this.d.api.get<MediaJob>("mediajobs", ns, action.unlessStepExists))
        )
          return true;
        await this.writes.deleteExpired(job);
        return false;
    }
  }

  /** Deletion: cancel at the provider, then let go. */
  private async finalize(job: MediaJob): Promise<PassResult> {
    const plan = planDeletion(job, this.now().getTime(), this.d.settings.cancelGiveUpMs);
    for (const step of plan.steps) {
      if (step.type === "event") await this.record(job, step.event);
      else if (step.type === "removeFinalizer") await this.writes.removeFinalizer(job);
      else if (step.type === "reportToPipeline")
        await this.writes.reportToPipeline(
          job.metadata.namespace!,
          step.first,
          step.uid,
          step.condition,
          this.now().toISOString(),
        );
      else {
        if (!this.fenceHolds()) return { error: retry("not the leader: no cancel") };
        try {
          const res = await this.d.provider.cancel(step.endpointId, step.providerJobId);
          // The job's own status after the cancel: whether it has ended there, and its final figures.
          const read = await this.readStatus(step.endpointId, step.providerJobId);
          const final = "result" in read ? read.result : res;
          const nowDate = this.now();
          const outcome = afterDeletionCancel(job, final, {
            now: nowDate,
            deletingForMs: nowDate.getTime() - new Date(job.metadata.deletionTimestamp ?? 0).getTime(),
            giveUpMs: this.d.settings.cancelGiveUpMs ?? CANCEL_GIVE_UP_MS,
            warnMs: this.d.settings.cancelFollowWarningMs,
            tickMs: this.d.settings.tickMs,
            confirmed: "result" in read,
          });
          if (outcome.status)
            job = await this.writes.replaceStatus(
              job,
              finalStatus(
                job,
                withBilledUsage(job, outcome.status, this.d.settings.usage ?? DEFAULT_USAGE_SETTINGS),
                nowDate.toISOString(),
              ),
            );
          for (const e of outcome.events) await this.record(job, e);
          if (!outcome.letGo)
            return { result: { requeueAfterMs: outcome.requeueAfterMs ?? this.d.settings.tickMs } };
          await this.record(job, cancelledEvent(step.providerJobId, final.status));
        } catch (err) {
          if (isProviderError(err, "JOB_NOT_FOUND") || isProviderError(err, "ENDPOINT_NOT_FOUND")) continue;
          await this.record(job, cancelFailedEvent(step.providerJobId, describeError(err), step.giveUp));
          if (!step.giveUp) throw err;
        }
      }
    }
    return plan.requeueAfterMs === undefined ? {} : { result: { requeueAfterMs: plan.requeueAfterMs } };
  }

  private async record(job: MediaJob, [type, reason, message]: PlannedEvent): Promise<void> {
    await this.d.events.record(job, type, reason, message);
  }
}
