// Reconciles one MediaJob: read it from the cache, decide with the pure lifecycle, act on the
// provider, write status once. Level-triggered: the same object in the same world always leads to
// the same actions, so a repeated or concurrent trigger is harmless.
import type { Logger } from "pino";
import { ADMITTING_STATES, billingAccountName, type BillingAccount } from "../../crds/billingaccount.js";
import type { GpuEndpoint } from "../../crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../../crds/mediajob.js";
import { callbackUrl } from "../../callback/token.js";
import type { KubeApi } from "../../k8s/api.js";
import { describeError, isAlreadyExists, isConflict, isNotFound } from "../../k8s/errors.js";
import type { EventSink, EventType } from "../../k8s/events.js";
import {
  isProviderError,
  TERMINAL_STATUSES,
  type GpuProviderClient,
  type ProviderJobStatus,
} from "../../provider/index.js";
import { getCondition, setCondition, type ConditionInput } from "../conditions.js";
import type { Informer } from "../informer.js";
import { StaleCacheGuard } from "../stale-cache.js";
import type { ReconcileResult } from "../workqueue.js";
import {
  FINALIZER,
  afterProviderLostJob,
  applyProviderResult,
  effectiveJobId,
  initialStatus,
  isTerminal,
  msUntilStuck,
  nextStepObject,
  recordSubmission,
  resetToPending,
  sameStatus,
  submissionId,
  withPhaseConditions,
  type SubmissionRecord,
} from "./lifecycle.js";

export interface MediaJobSettings {
  callbackBaseUrl: string;
  callbackSecret: string;
  defaultTimeoutSeconds: number;
  /** The reconciliation tick: how often waiting jobs are looked at again. */
  tickMs: number;
}

export interface MediaJobDeps {
  api: KubeApi;
  jobs: Informer<MediaJob>;
  endpoints: Informer<GpuEndpoint>;
  accounts: Informer<BillingAccount>;
  provider: Pick<GpuProviderClient, "submit" | "status" | "cancel">;
  events: EventSink;
  log: Logger;
  settings: MediaJobSettings;
  /** Where the sidecar keeps BillingAccounts; undefined: the job's own namespace. */
  accountNamespace?: string;
  now?: () => Date;
  onTransition?: (from: string | undefined, to: string | undefined) => void;
}

/** Thrown after status was written, to retry the key with backoff (the cause is in a condition). */
export class RetryLater extends Error {
  override readonly name = "RetryLater";
}

type PendingEvent = [EventType, string, string];

/** RunPod's default job TTL (queue plus run), sent explicitly so the contract is visible. */
export const PROVIDER_JOB_TTL_MS = 24 * 3600 * 1000;

/** What one pass decided: the status to write and what happens next. */
interface Outcome {
  status: MediaJobStatus;
  requeueAfterMs?: number;
  retry?: string;
  /** Set when this pass submitted the job: a fact that must reach status even if the write conflicts. */
  submission?: SubmissionRecord;
}

export class MediaJobReconciler {
  private readonly stale = new StaleCacheGuard();

  constructor(private readonly d: MediaJobDeps) {}

  private now(): Date {
    return this.d.now?.() ?? new Date();
  }

  readonly reconcile = async (key: string): Promise<ReconcileResult | void> => {
    let job = this.d.jobs.getByKey(key);
    if (!job) {
      this.stale.forget(key);
      return;
    }
    if (this.stale.isStale(key, job.metadata.resourceVersion)) return { requeueAfterMs: 50 };
    if (job.metadata.deletionTimestamp) return this.finalize(job);

    const nowDate = this.now();
    const now = nowDate.toISOString();
    const events: PendingEvent[] = [];
    const before = job.status;
    let outcome: Outcome = { status: initialStatus(job, now) };

    switch (outcome.status.phase) {
      case "Pending":
        outcome = await this.pending(job, outcome.status, now, events, (j) => (job = j));
        break;
      case "Processing":
        outcome = await this.processing(job, outcome.status, nowDate, events);
        break;
      case "Completed":
        outcome = await this.completed(job, outcome.status, events);
        break;
      default:
        break;
    }

    let status = withPhaseConditions(outcome.status, job.metadata.generation, now);
    if (!sameStatus(status, before)) {
      try {
        const written = await this.d.api.replaceStatus("mediajobs", { ...job, status });
        this.stale.remember(key, job.metadata.resourceVersion, written.metadata.resourceVersion);
        if (before?.phase !== status.phase) this.d.onTransition?.(before?.phase, status.phase);
        job = {
          ...job,
          status,
          metadata: { ...job.metadata, resourceVersion: written.metadata.resourceVersion },
        };
      } catch (err) {
        if (!outcome.submission || !isConflict(err)) throw err;
        const { current, overwritten } = await this.recordLostSubmission(
          job,
          before,
          status,
          outcome.submission,
          now,
        );
        if (!current) return;
        // The cache may still show our old copy or the other writer's: neither is the truth now.
        for (const rv of [job.metadata.resourceVersion, ...overwritten])
          this.stale.remember(key, rv, current.metadata.resourceVersion);
        job = current;
        status = current.status ?? status;
      }
    }
    for (const [type, reason, message] of events) await this.d.events.record(job, type, reason, message);

    if (isTerminal(status.phase) && job.metadata.finalizers?.includes(FINALIZER))
      await this.removeFinalizer(job);
    if (outcome.retry) throw new RetryLater(outcome.retry);
    return outcome.requeueAfterMs === undefined ? undefined : { requeueAfterMs: outcome.requeueAfterMs };
  };

  private condition(status: MediaJobStatus, job: MediaJob, c: ConditionInput, now: string): MediaJobStatus {
    return { ...status, conditions: setCondition(status.conditions, c, now, job.metadata.generation) };
  }

  /** Change a condition, with an Event only when its status or reason changes (no Event storms). */
  private note(
    status: MediaJobStatus,
    job: MediaJob,
    c: ConditionInput,
    now: string,
    events: PendingEvent[],
    eventType: EventType,
  ): MediaJobStatus {
    // Every Event is an apiserver write: record warnings and recoveries from them, not the
    // expected first pass of every job (admitted, endpoint ready).
    const prev = getCondition(status.conditions, c.type);
    const changed = !prev || prev.status !== c.status || prev.reason !== c.reason;
    const worthTelling =
      eventType === "Warning" || (prev !== undefined && prev.status !== "True" && c.status === "True");
    if (changed && worthTelling) events.push([eventType, c.reason, c.message]);
    return this.condition(status, job, c, now);
  }

  // ---- Pending: admit, resolve the endpoint, submit -------------------------------------------

  private admission(job: MediaJob): ConditionInput {
    const account = job.spec.account;
    if (!account)
      return {
        type: "Admitted",
        status: "True",
        reason: "NoAccount",
        message: "the job names no billing account",
      };
    const acct = this.d.accounts.get(
      this.d.accountNamespace ?? job.metadata.namespace ?? "",
      billingAccountName(account),
    );
    const state = acct?.status?.subscriptionStatus;
    if (state && ADMITTING_STATES.has(state)) {
      return {
        type: "Admitted",
        status: "True",
        reason: "AccountActive",
        message: `account ${account} is ${state}`,
      };
    }
    return {
      type: "Admitted",
      status: "False",
      reason: state ? "AccountNotActive" : "AccountUnknown",
      message: state
        ? `account ${account} is ${state}; the job waits until it is active or trialing`
        : `no subscription state is known for account ${account}; the job waits for one`,
    };
  }

  /** spec.endpointRef, else the GpuEndpoint of the namespace whose workload matches (first by name). */
  resolveEndpoint(job: MediaJob): { endpoint?: GpuEndpoint; condition: ConditionInput } {
    const ns = job.metadata.namespace ?? "";
    const ref = job.spec.endpointRef;
    const endpoint = ref
      ? this.d.endpoints.get(ns, ref)
      : this.d.endpoints
          .list(ns)
          .filter((e) => e.spec.workload === job.spec.workload)
          .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))[0];
    if (!endpoint) {
      return {
        condition: {
          type: "EndpointReady",
          status: "False",
          reason: "EndpointMissing",
          message: ref
            ? `GpuEndpoint ${ref} does not exist in namespace ${ns}`
            : `no GpuEndpoint for workload ${job.spec.workload} in namespace ${ns}`,
        },
      };
    }
    if (endpoint.spec.workload !== job.spec.workload) {
      return {
        condition: {
          type: "EndpointReady",
          status: "False",
          reason: "WorkloadMismatch",
          message: `GpuEndpoint ${endpoint.metadata.name} serves ${endpoint.spec.workload}, not ${job.spec.workload}`,
        },
      };
    }
    const ready = getCondition(endpoint.status?.conditions, "Ready");
    if (ready?.status !== "True" || !endpoint.status?.endpointId) {
      return {
        endpoint,
        condition: {
          type: "EndpointReady",
          status: "False",
          reason: ready?.status === "False" ? ready.reason : "EndpointNotReady",
          message: `GpuEndpoint ${endpoint.metadata.name} is not Ready${ready?.message ? `: ${ready.message}` : ""}`,
        },
      };
    }
    return {
      endpoint,
      condition: {
        type: "EndpointReady",
        status: "True",
        reason: "EndpointReady",
        message: `GpuEndpoint ${endpoint.metadata.name} (${endpoint.status.endpointId}) is Ready`,
      },
    };
  }

  private async pending(
    job: MediaJob,
    status: MediaJobStatus,
    now: string,
    events: PendingEvent[],
    setJob: (j: MediaJob) => void,
  ): Promise<Outcome> {
    const admitted = this.admission(job);
    status = this.note(status, job, admitted, now, events, admitted.status === "True" ? "Normal" : "Warning");
    if (admitted.status !== "True") return { status, requeueAfterMs: this.d.settings.tickMs };

    const { endpoint, condition } = this.resolveEndpoint(job);
    status = this.note(
      status,
      job,
      condition,
      now,
      events,
      condition.status === "True" ? "Normal" : "Warning",
    );
    if (condition.status !== "True" || !endpoint?.status?.endpointId)
      return { status, requeueAfterMs: this.d.settings.tickMs };
    const endpointId = endpoint.status.endpointId;

    // The finalizer goes on before the job exists at the provider, so a deletion always cancels it.
    if (!job.metadata.finalizers?.includes(FINALIZER)) {
      const patched = await this.d.api.mergePatch<MediaJob>(
        "mediajobs",
        job.metadata.namespace!,
        job.metadata.name,
        {
          metadata: {
            finalizers: [...(job.metadata.finalizers ?? []), FINALIZER],
            resourceVersion: job.metadata.resourceVersion,
          },
        },
      );
      job = {
        ...job,
        metadata: {
          ...job.metadata,
          finalizers: patched.metadata.finalizers,
          resourceVersion: patched.metadata.resourceVersion,
        },
      };
      setJob(job);
    }

    const jobId = status.jobId ?? effectiveJobId(job);
    const id = submissionId(status, jobId);
    const namespace = job.metadata.namespace!;
    const name = job.metadata.name;
    const timeoutSeconds = job.spec.timeoutSeconds ?? this.d.settings.defaultTimeoutSeconds;
    try {
      const res = await this.d.provider.submit(endpointId, {
        id,
        input: job.spec.input ?? {},
        webhook: callbackUrl(this.d.settings.callbackBaseUrl, this.d.settings.callbackSecret, {
          namespace,
          name,
          jobId,
        }),
        // spec.timeoutSeconds is when *we* look at a job, not an execution limit: a slow job that
        // is still running is left alone. The provider's queue+run TTL is made explicit instead.
        policy: { ttl: PROVIDER_JOB_TTL_MS },
      });
      const { error: _e, ...rest } = status;
      status = {
        ...rest,
        phase: "Processing",
        providerJobId: res.id,
        endpointId,
        submittedAt: now,
        updatedAt: now,
        attempts: (status.attempts ?? 0) + 1,
      };
      status = this.condition(
        status,
        job,
        { type: "Submitted", status: "True", reason: "Submitted", message: `submitted as ${res.id}` },
        now,
      );
      events.push([
        "Normal",
        "Submitted",
        `submitted to endpoint ${endpointId} as ${res.id}${status.replay ? " (replay)" : ""}, attempt ${status.attempts}`,
      ]);
      const submission: SubmissionRecord = {
        providerJobId: res.id,
        endpointId,
        submittedAt: now,
        attempts: status.attempts!,
      };
      // A provider that already has this id answers with that job: if it finished, take its result now.
      if (TERMINAL_STATUSES.has(res.status as ProviderJobStatus)) {
        const result = await this.d.provider.status(endpointId, res.id);
        const applied = applyProviderResult({ ...job, status }, result, now);
        if (applied) status = applied;
      }
      return { status, requeueAfterMs: timeoutSeconds * 1000, submission };
    } catch (err) {
      const reason = isProviderError(err) ? err.code : "SubmitFailed";
      const message = `submission to endpoint ${endpointId} failed: ${describeError(err)}`;
      status = this.note(
        status,
        job,
        { type: "Submitted", status: "False", reason, message },
        now,
        events,
        "Warning",
      );
      return { status, retry: message };
    }
  }

  /**
   * The status write after a submission lost a conflict. The job is at the provider now, so the
   * submission must not be forgotten: if nobody else changed the status (a label or spec edit bumped
   * the resourceVersion), write this pass's status onto the fresh object; if the sidecar already
   * applied a callback, keep its outcome and add the submission's facts. Returns the object as
   * stored (undefined when it is gone) and the resourceVersions this wrote over.
   */
  private async recordLostSubmission(
    job: MediaJob,
    before: MediaJobStatus | undefined,
    status: MediaJobStatus,
    submission: SubmissionRecord,
    now: string,
  ): Promise<{ current: MediaJob | undefined; overwritten: string[] }> {
    const read: string[] = [];
    const submitted: ConditionInput = {
      type: "Submitted",
      status: "True",
      reason: "Submitted",
      message: `submitted as ${submission.providerJobId}`,
    };
    const { object, written } = await this.d.api.updateStatusWithRetry<MediaJob>(
      "mediajobs",
      job.metadata.namespace!,
      job.metadata.name,
      (current) => {
        read.push(current.metadata.resourceVersion ?? "");
        if (sameStatus(current.status, before)) return { ...current, status };
        const recorded = recordSubmission(current.status, submission);
        if (!recorded) return undefined;
        const withCondition =
          recorded.phase === "Pending" ? recorded : this.condition(recorded, current, submitted, now);
        return { ...current, status: withPhaseConditions(withCondition, current.metadata.generation, now) };
      },
    );
    if (written && object) {
      this.d.log.info(
        { job: `${job.metadata.namespace}/${job.metadata.name}`, phase: object.status?.phase },
        "another writer changed the job while it was being submitted; recorded the submission on its status",
      );
    }
    return { current: object, overwritten: written ? read : [] };
  }

  // ---- Processing: the automated "missed callback" runbook ------------------------------------

  private async processing(
    job: MediaJob,
    status: MediaJobStatus,
    nowDate: Date,
    events: PendingEvent[],
  ): Promise<Outcome> {
    const now = nowDate.toISOString();
    const remaining = msUntilStuck(job, nowDate.getTime(), this.d.settings.defaultTimeoutSeconds);
    if (remaining > 0) return { status, requeueAfterMs: remaining };
    const endpointId = status.endpointId;
    const providerId = status.providerJobId ?? submissionId(status, status.jobId ?? effectiveJobId(job));
    if (!endpointId) {
      const reset = resetToPending(status, now)!;
      events.push(["Warning", "ResetToPending", "Processing without an endpoint id; resubmitting"]);
      return { status: reset };
    }
    try {
      const result = await this.d.provider.status(endpointId, providerId);
      if (!TERMINAL_STATUSES.has(result.status)) {
        events.push([
          "Normal",
          "StillRunning",
          `past its timeout, but the provider reports ${result.status}; checking again later`,
        ]);
        return { status, requeueAfterMs: this.d.settings.tickMs };
      }
      const applied = applyProviderResult({ ...job, status }, result, now);
      if (!applied) return { status, requeueAfterMs: this.d.settings.tickMs };
      const what =
        result.status === "COMPLETED"
          ? [
              "Normal",
              "RecoveredMissedCallback",
              "the provider completed the job but its callback never arrived; completed from the status API",
            ]
          : [
              "Warning",
              `Provider${result.status === "TIMED_OUT" ? "TimedOut" : result.status === "CANCELLED" ? "Cancelled" : "Failed"}`,
              `the provider reports ${result.status}${applied.phase === "Pending" ? "; retrying" : ""}`,
            ];
      events.push(what as PendingEvent);
      return { status: applied };
    } catch (err) {
      if (isProviderError(err, "JOB_NOT_FOUND")) {
        const next = afterProviderLostJob(status, now);
        events.push([
          "Warning",
          "ProviderLostJob",
          next.phase === "Failed"
            ? `the provider no longer knows job ${providerId}, for the ${status.attempts}th time; not replaying it again`
            : `the provider no longer knows job ${providerId}; reset to Pending and replayed`,
        ]);
        return { status: next };
      }
      const message = `could not read the job's status at the provider: ${describeError(err)}`;
      events.push(["Warning", "StatusCheckFailed", message]);
      return { status, retry: message };
    }
  }

  // ---- Completed: the next pipeline step, exactly once ----------------------------------------

  private async completed(job: MediaJob, status: MediaJobStatus, events: PendingEvent[]): Promise<Outcome> {
    if (status.nextJob || !job.spec.then?.length) return { status };
    const next = nextStepObject({ ...job, status });
    if (!next) return { status };
    const name = (next.metadata as { name: string }).name;
    const ns = job.metadata.namespace!;
    try {
      await this.d.api.create("mediajobs", ns, next as never);
      events.push(["Normal", "NextStepCreated", `created MediaJob ${name} for the next pipeline step`]);
      return { status: { ...status, nextJob: name } };
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      // Created by an earlier pass whose status write did not land: adopt it if it is ours.
      const existing = await this.d.api.get<MediaJob>("mediajobs", ns, name);
      if (existing?.metadata.ownerReferences?.some((o) => o.uid === job.metadata.uid))
        return { status: { ...status, nextJob: name } };
      const message = `MediaJob ${name} already exists and does not belong to this pipeline`;
      events.push(["Warning", "NextStepNameTaken", message]);
      return { status, retry: message };
    }
  }

  // ---- Deletion: cancel at the provider, then let go ------------------------------------------

  private async finalize(job: MediaJob): Promise<ReconcileResult | void> {
    if (!job.metadata.finalizers?.includes(FINALIZER)) return;
    const status = job.status;
    if (status?.phase === "Processing" && status.endpointId) {
      const id = status.providerJobId ?? submissionId(status, status.jobId ?? effectiveJobId(job));
      try {
        const res = await this.d.provider.cancel(status.endpointId, id);
        await this.d.events.record(
          job,
          "Normal",
          "CancelledAtProvider",
          `cancelled job ${id} at the provider (${res.status})`,
        );
      } catch (err) {
        if (!isProviderError(err, "JOB_NOT_FOUND") && !isProviderError(err, "ENDPOINT_NOT_FOUND")) {
          await this.d.events.record(
            job,
            "Warning",
            "CancelFailed",
            `could not cancel job ${id}: ${describeError(err)}`,
          );
          throw err;
        }
      }
    }
    await this.removeFinalizer(job);
  }

  private async removeFinalizer(job: MediaJob): Promise<void> {
    try {
      await this.d.api.mergePatch("mediajobs", job.metadata.namespace!, job.metadata.name, {
        metadata: {
          finalizers: (job.metadata.finalizers ?? []).filter((f) => f !== FINALIZER),
          resourceVersion: job.metadata.resourceVersion,
        },
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
}
