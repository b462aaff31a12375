// The MediaJob executor: gathers the facts of one job (the caches, the clock, a provider status
// only when one is due), asks the domain for the pass (src/mediajob/plan.ts), and carries out its
// actions in order. Level-triggered: the same object in the same world always leads to the same
// actions, so a repeated or concurrent trigger is harmless. Only the write-ahead submission writes
// status more than once in a pass, and it does so by name (writeIntent, withdraw, recordAnswer).
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { billingAccountName, type BillingAccount } from "../../crds/billingaccount.js";
import type { GpuEndpoint } from "../../crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../../crds/mediajob.js";
import { API_VERSION } from "../../crds/common.js";
import { callbackUrl } from "../../callback/token.js";
import type { KubeApi } from "../../k8s/api.js";
import { describeError, isAlreadyExists, isConflict, isNotFound } from "../../k8s/errors.js";
import type { EventSink } from "../../k8s/events.js";
import { isProviderError, type GpuProviderClient } from "../../provider/index.js";
import { pickEndpoint } from "../../mediajob/admission.js";
import { withPhaseConditions, type PlannedEvent } from "../../mediajob/conditions.js";
import { cancelFailedEvent, cancelledEvent, planDeletion } from "../../mediajob/deletion.js";
import { FINALIZER } from "../../mediajob/job.js";
import { afterNextStep, type CreateAnswer } from "../../mediajob/next-step.js";
import { pipelineReportStatus } from "../../mediajob/pipeline.js";
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
import { afterStop, type CancelAnswer } from "../../mediajob/stop.js";
import {
  acceptedStatus,
  unconfirmedNote,
  unconfirmedStatus,
  withdrawnStatus,
  type SubmissionPlan,
} from "../../mediajob/write-ahead.js";
import { sameStatus } from "../same-status.js";
import type { Informer } from "../informer.js";
import { StaleCacheGuard } from "../stale-cache.js";
import type { ReconcileResult } from "../workqueue.js";

export interface MediaJobSettings extends PlanSettings {
  callbackBaseUrl: string;
  callbackSecret: string;
}

export interface MediaJobDeps {
  api: Pick<KubeApi, "replaceStatus" | "mergePatch" | "updateStatusWithRetry" | "create" | "get" | "rawJson">;
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
  now?: () => Date;
  onTransition?: (from: string | undefined, to: string | undefined) => void;
  /** A job recovered by the controller itself (for metrics). */
  onRecovery?: (kind: RecoveryKind) => void;
}

export type { RecoveryKind, SubmissionOutcome } from "../../mediajob/plan.js";

/** A pass's retryable error: the key is retried with backoff (the cause is in a condition). */
export class RetryLater extends Error {
  override readonly name = "RetryLater";
}

/** A pass's result, as controller-runtime's `(Result, error)`. */
export interface PassResult {
  result?: ReconcileResult;
  error?: PassError;
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

  constructor(private readonly d: MediaJobDeps) {}

  private now(): Date {
    return this.d.now?.() ?? new Date();
  }

  private fenceHolds(): boolean {
    return this.d.fence?.() ?? true;
  }

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
    let plan = planJob(job, await this.gather(job, nowDate));
    let written: MediaJob | undefined;
    for (const action of plan.actions) {
      const done = await this.execute(job, plan, action, now);
      job = done.job;
      plan = done.plan;
      written = done.written ?? written;
      if (done.written) break;
    }
    if (plan.submission) this.d.onSubmission?.(plan.submission);
    if (plan.recovery) this.d.onRecovery?.(plan.recovery);

    if (written) job = written;
    else if (!sameStatus(plan.status, before)) job = await this.writeStatus(job, plan.status, before);
    for (const e of plan.events) await this.record(job, e);

    const finish = planFinish(job, {
      nowMs: nowDate.getTime(),
      requeueAfterMs: plan.requeueAfterMs,
      nextStepCached:
        job.status?.nextJob !== undefined &&
        this.d.jobs.get(job.metadata.namespace!, job.status.nextJob) !== undefined,
      failed: plan.error !== undefined && !plan.error.terminal,
    });
    let kept = true;
    for (const action of finish.actions) kept = (await this.finish(job, action, now)) && kept;
    if (plan.error)
      return {
        error: plan.error,
        ...(plan.error.terminal &&
          finish.requeueAfterMs !== undefined && { result: { requeueAfterMs: finish.requeueAfterMs } }),
      };
    return kept && finish.requeueAfterMs !== undefined
      ? { result: { requeueAfterMs: finish.requeueAfterMs } }
      : {};
  }

  private async gather(job: MediaJob, now: Date): Promise<Facts> {
    const ns = job.metadata.namespace ?? "";
    const settings = this.d.settings;
    const facts: Facts = {
      now,
      settings,
      newSubmissionId: randomBytes(12).toString("base64url"),
      unrecorded: this.unrecorded.get(`${ns}/${job.metadata.name}`),
    };
    if ((job.status?.phase ?? "Pending") === "Pending") {
      if (job.spec.account)
        facts.subscriptionState = this.d.accounts.get(
          this.d.accountNamespace ?? ns,
          billingAccountName(job.spec.account),
        )?.status?.subscriptionStatus;
      const ref = job.spec.endpointRef;
      const candidates = ref
        ? [this.d.endpoints.get(ns, ref)].filter((e) => e !== undefined)
        : this.d.endpoints.list(ns);
      facts.endpoint = pickEndpoint(job, candidates);
    }
    const due = providerReadDue(job, now.getTime(), settings.defaultTimeoutSeconds);
    if (due) facts.provider = await this.readStatus(due.endpointId, due.providerJobId);
    return facts;
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
  private async execute(
    job: MediaJob,
    plan: Plan,
    action: Action,
    now: string,
  ): Promise<{ job: MediaJob; plan: Plan; written?: MediaJob }> {
    switch (action.type) {
      case "addFinalizer":
        return { job: await this.addFinalizer(job, action.metadata), plan };
      case "submit":
        return this.submit(job, plan, action.submission, now);
      case "recordProviderId": {
        const written = await this.writeOnto(job, (cur) =>
          acceptedStatus(cur, action.attempt, action.providerJobId, now),
        );
        this.unrecorded.delete(key(job));
        return { job, plan, written };
      }
      case "cancel": {
        if (!this.fenceHolds()) return { job, plan: { ...plan, error: retry("not the leader: no cancel") } };
        let answer: CancelAnswer;
        try {
          answer = { result: await this.d.provider.cancel(action.endpointId, action.providerJobId) };
        } catch (err) {
          answer = isProviderError(err, "JOB_NOT_FOUND") ? { lost: true } : { error: describeError(err) };
        }
        return { job, plan: this.then(job, plan, afterStop(job, plan.status, action.why, answer, now), now) };
      }
      case "createNextStep": {
        const ns = job.metadata.namespace!;
        let answer: CreateAnswer;
        try {
          await this.d.api.create("mediajobs", ns, action.object as never);
          answer = { created: true };
        } catch (err) {
          if (!isAlreadyExists(err)) throw err;
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
      status: finalStatus(job, next.status, now),
      events: [...plan.events, ...next.events],
    };
  }

  private async addFinalizer(
    job: MediaJob,
    pipeline?: Extract<Action, { type: "addFinalizer" }>["metadata"],
  ): Promise<MediaJob> {
    const patched = await this.d.api.mergePatch<MediaJob>(
      "mediajobs",
      job.metadata.namespace!,
      job.metadata.name,
      {
        metadata: {
          finalizers: [...(job.metadata.finalizers ?? []), FINALIZER],
          resourceVersion: job.metadata.resourceVersion,
          ...pipeline,
        },
      },
    );
    return {
      ...job,
      metadata: {
        ...job.metadata,
        finalizers: patched.metadata.finalizers,
        resourceVersion: patched.metadata.resourceVersion,
        ...(pipeline && { labels: patched.metadata.labels, annotations: patched.metadata.annotations }),
      },
    };
  }

  /** The write-ahead submission (src/mediajob/write-ahead.ts), step by step. */
  private async submit(
    job: MediaJob,
    plan: Plan,
    p: SubmissionPlan,
    now: string,
  ): Promise<{ job: MediaJob; plan: Plan; written?: MediaJob }> {
    const k = key(job);
    const outcome = (o: SubmissionOutcome, more: Partial<Plan>, written?: MediaJob) => {
      this.d.onSubmission?.(o);
      return { job, plan: { ...plan, ...more, events: [...plan.events, ...(more.events ?? [])] }, written };
    };
    if (!this.fenceHolds()) return outcome("fenced", { error: retry("not the leader: no submission") });

    // (1) The intent.
    let stored: MediaJob;
    try {
      const res = await this.d.api.replaceStatus("mediajobs", { ...job, status: p.intent });
      stored = { ...job, status: p.intent, metadata: { ...job.metadata, ...res.metadata } };
    } catch (err) {
      if (!isConflict(err)) throw err;
      // Someone else wrote first (the sidecar, another replica, an operator): decide again from
      // their version, which the watch delivers.
      return outcome("intent-conflict", { requeueAfterMs: 1_000 }, job);
    }
    this.stale.remember(k, job.metadata.resourceVersion, stored.metadata.resourceVersion);
    this.d.onTransition?.(p.before.phase, "Processing");

    // (2) The fence, immediately before the side effect. Nothing was sent: withdraw the intent.
    if (!this.fenceHolds()) {
      const withdrawn = withdrawnStatus(stored, p, now);
      if (withdrawn)
        await this.d.api
          .replaceStatus("mediajobs", {
            ...stored,
            status: withPhaseConditions(withdrawn, stored.metadata.generation, now),
          })
          .catch(() => undefined); // left as it is, it is resubmitted after its deadline: late, not twice
      return outcome("fenced", { error: retry("lost the leadership before submitting") }, stored);
    }

    // (3) /run, once.
    let providerJobId: string;
    try {
      const signal = this.d.leadership?.();
      const res = await this.d.provider.submit(
        p.endpointId,
        {
          ...p.request,
          webhook: callbackUrl(this.d.settings.callbackBaseUrl, this.d.settings.callbackSecret, p.callback, {
            expiresAt: p.callbackExpiresAt,
          }),
        },
        { ...(signal && { signal }) },
      );
      providerJobId = res.id;
    } catch (err) {
      const refused = isProviderError(err) && !err.mayHaveBeenAccepted;
      const message = `submission to endpoint ${p.endpointId} ${refused ? "failed" : "is unconfirmed"}: ${describeError(err)}`;
      if (refused) {
        const reason = isProviderError(err) ? err.code : "SubmitFailed";
        const written = await this.writeOnto(stored, (cur) =>
          withdrawnStatus(cur, p, now, { reason, message }),
        );
        return outcome("refused", { events: [["Warning", reason, message]], error: retry(message) }, written);
      }
      const { note, waitMs } = unconfirmedNote(stored, message, Date.parse(now), this.d.settings);
      const written = await this.writeOnto(stored, (cur) =>
        unconfirmedStatus(cur, p.attempt, note, now),
      ).catch((e: unknown) => {
        this.d.log.warn({ job: k, err: describeError(e) }, "could not record an unconfirmed submission");
        return stored;
      });
      return outcome(
        "unconfirmed",
        { events: [["Warning", "SubmissionUnconfirmed", note]], requeueAfterMs: Math.max(1_000, waitMs) },
        written,
      );
    }

    // (4) The provider's id. A failed write here does not resubmit: the job stays Processing.
    const submitted: PlannedEvent = [
      "Normal",
      "Submitted",
      `submitted to endpoint ${p.endpointId} as ${providerJobId}${p.before.replay ? " (replay)" : ""}, attempt ${p.attempt}`,
    ];
    try {
      const written = await this.writeOnto(stored, (cur) =>
        acceptedStatus(cur, p.attempt, providerJobId, now),
      );
      this.unrecorded.delete(k);
      return outcome("accepted", { events: [submitted], requeueAfterMs: p.timeoutMs }, written);
    } catch (err) {
      this.unrecorded.set(k, { attempt: p.attempt, providerJobId });
      this.d.log.warn(
        { job: k, providerJobId, err: describeError(err) },
        "submitted, but could not record the provider's job id yet; retrying the record (never the submission)",
      );
      return outcome("accepted", { events: [submitted], requeueAfterMs: 1_000 }, stored);
    }
  }

  /** The pass's one status write, when the status changed. */
  private async writeStatus(
    job: MediaJob,
    status: MediaJobStatus,
    before: MediaJobStatus | undefined,
  ): Promise<MediaJob> {
    const written = await this.d.api.replaceStatus("mediajobs", { ...job, status });
    this.stale.remember(key(job), job.metadata.resourceVersion, written.metadata.resourceVersion);
    if (before?.phase !== status.phase) this.d.onTransition?.(before?.phase, status.phase);
    return {
      ...job,
      status,
      metadata: { ...job.metadata, resourceVersion: written.metadata.resourceVersion },
    };
  }

  /**
   * Writes `change(object)` onto the copy this pass wrote last (no read: the usual case), and on a
   * conflict onto a fresh read, as client-go's RetryOnConflict. Returns the object as stored.
   */
  private async writeOnto(
    stored: MediaJob,
    change: (cur: MediaJob) => MediaJobStatus | undefined,
  ): Promise<MediaJob> {
    const ns = stored.metadata.namespace!;
    const name = stored.metadata.name;
    const now = this.now().toISOString();
    const first = change(stored);
    if (!first) return stored;
    try {
      const status = withPhaseConditions(first, stored.metadata.generation, now);
      const written = await this.d.api.replaceStatus("mediajobs", { ...stored, status });
      this.stale.remember(`${ns}/${name}`, stored.metadata.resourceVersion, written.metadata.resourceVersion);
      return { ...stored, status, metadata: { ...stored.metadata, ...written.metadata } };
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
    const res = await this.d.api.updateStatusWithRetry<MediaJob>("mediajobs", ns, name, (cur) => {
      const next = change(cur);
      return next ? { ...cur, status: withPhaseConditions(next, cur.metadata.generation, now) } : undefined;
    });
    if (res.object)
      this.stale.remember(
        `${ns}/${name}`,
        stored.metadata.resourceVersion,
        res.object.metadata.resourceVersion,
      );
    return res.object ?? stored;
  }

  /** One action after the status write; false when it deleted the job (nothing more to look at). */
  private async finish(job: MediaJob, action: FinishAction, now: string): Promise<boolean> {
    const ns = job.metadata.namespace!;
    switch (action.type) {
      case "reportToPipeline":
        // Before the step's finalizer goes, so a failed write is retried.
        await this.d.api.updateStatusWithRetry<MediaJob>("mediajobs", ns, action.first, (cur) => {
          const status = pipelineReportStatus(cur, action.condition, action.uid, now);
          return status ? { ...cur, status } : undefined;
        });
        return true;
      case "releaseFinalizer":
        if (await this.removeFinalizer(job)) await this.record(job, action.endEvent);
        return true;
      case "deleteExpired":
        if (
          action.unlessStepExists &&
          (await this.d.api.get<MediaJob>("mediajobs", ns, action.unlessStepExists))
        )
          return true;
        await this.deleteExpired(job);
        return false;
    }
  }

  /** Deletes a job past its TTL: this very object (its uid), as Job's TTL controller does. */
  private async deleteExpired(job: MediaJob): Promise<void> {
    const ns = job.metadata.namespace!;
    try {
      await this.d.api.rawJson(
        "DELETE",
        `/apis/${API_VERSION}/namespaces/${ns}/mediajobs/${job.metadata.name}`,
        {
          apiVersion: "v1",
          kind: "DeleteOptions",
          preconditions: { uid: job.metadata.uid },
        },
      );
      this.d.log.info({ job: `${ns}/${job.metadata.name}` }, "deleted: its ttlSecondsAfterFinished expired");
    } catch (err) {
      // Gone already, or a new object of the same name (another uid): nothing of ours to delete.
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
  }

  /** Deletion: cancel at the provider, then let go. */
  private async finalize(job: MediaJob): Promise<PassResult> {
    const plan = planDeletion(job, this.now().getTime(), this.d.settings.cancelGiveUpMs);
    for (const step of plan.steps) {
      if (step.type === "event") await this.record(job, step.event);
      else if (step.type === "removeFinalizer") await this.removeFinalizer(job);
      else {
        if (!this.fenceHolds()) return { error: retry("not the leader: no cancel") };
        try {
          const res = await this.d.provider.cancel(step.endpointId, step.providerJobId);
          await this.record(job, cancelledEvent(step.providerJobId, res.status));
        } catch (err) {
          if (!isProviderError(err, "JOB_NOT_FOUND") && !isProviderError(err, "ENDPOINT_NOT_FOUND")) {
            await this.record(job, cancelFailedEvent(step.providerJobId, describeError(err), step.giveUp));
            if (!step.giveUp) throw err;
          }
        }
      }
    }
    return plan.requeueAfterMs === undefined ? {} : { result: { requeueAfterMs: plan.requeueAfterMs } };
  }

  /** True when this call removed it (false: the job was gone). */
  private async removeFinalizer(job: MediaJob): Promise<boolean> {
    try {
      await this.d.api.mergePatch("mediajobs", job.metadata.namespace!, job.metadata.name, {
        metadata: {
          finalizers: (job.metadata.finalizers ?? []).filter((f) => f !== FINALIZER),
          resourceVersion: job.metadata.resourceVersion,
        },
      });
      return true;
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return false;
    }
  }

  private async record(job: MediaJob, [type, reason, message]: PlannedEvent): Promise<void> {
    await this.d.events.record(job, type, reason, message);
  }
}

const key = (job: MediaJob): string => `${job.metadata.namespace}/${job.metadata.name}`;
