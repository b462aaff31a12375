// Reconciles one MediaJob: read it from the cache, decide with the pure lifecycle, act on the
// provider, write status once. Level-triggered: the same object in the same world always leads to
// the same actions, so a repeated or concurrent trigger is harmless.
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { ADMITTING_STATES, billingAccountName, type BillingAccount } from "../../crds/billingaccount.js";
import type { GpuEndpoint } from "../../crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../../crds/mediajob.js";
import { API_VERSION } from "../../crds/common.js";
import { adoptedWithoutEvidence, confirmAdoption } from "../../callback/adoption.js";
import { callbackExpiry, callbackUrl } from "../../callback/token.js";
import type { KubeApi } from "../../k8s/api.js";
import { describeError, isAlreadyExists, isConflict, isNotFound } from "../../k8s/errors.js";
import type { EventSink, EventType } from "../../k8s/events.js";
import { isProviderError, TERMINAL_STATUSES, type GpuProviderClient } from "../../provider/index.js";
import { getCondition, setCondition, type ConditionInput } from "../../crds/conditions.js";
import type { Informer } from "../informer.js";
import { StaleCacheGuard } from "../stale-cache.js";
import type { ReconcileResult } from "../workqueue.js";
import {
  FINALIZER,
  SKIP_CANCEL_ANNOTATION,
  effectiveJobId,
  initialStatus,
  isTerminal,
  submissionId,
} from "../../mediajob/job.js";
import {
  PIPELINE_ANNOTATION,
  PIPELINE_LABEL,
  PIPELINE_SUCCEEDED,
  PIPELINE_UID_ANNOTATION,
  firstStepMetadata,
  ownPipelineCondition,
  stepPipelineCondition,
  nextStepObject,
} from "../../mediajob/pipeline.js";
import { afterProviderLostJob, msUntilStuck, resetToPending } from "../../mediajob/recovery.js";
import {
  deadlineExceeded,
  msUntilDeadline,
  providerPolicy,
  suspendedStatus,
} from "../../mediajob/deadline.js";
import { failureText, withPhaseConditions } from "../../mediajob/conditions.js";
import { msUntilExpiry } from "../../mediajob/ttl.js";
import { applyProviderResult } from "../../mediajob/provider-result.js";
import { decideUnconfirmed, type UnconfirmedSubmissionPolicy } from "../../mediajob/unconfirmed.js";
import {
  intentStatus,
  isUnconfirmed,
  markUnconfirmed,
  msUntilConfirmationDeadline,
  recordAccepted,
  withdrawIntent,
} from "../../mediajob/submission.js";
import { sameStatus } from "../same-status.js";

export interface MediaJobSettings {
  callbackBaseUrl: string;
  callbackSecret: string;
  defaultTimeoutSeconds: number;
  /** How long past its timeout an unconfirmed submission waits for its callback. */
  confirmationWindowMs?: number;
  /** What becomes of a submission still unconfirmed at its deadline. Default "fail" (at most once). */
  unconfirmedPolicy?: UnconfirmedSubmissionPolicy;
  /** How long a deletion keeps trying to cancel at a failing provider. Default CANCEL_GIVE_UP_MS. */
  cancelGiveUpMs?: number;
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

/** What the controller recovered: a missed callback, a job the provider lost, an unconfirmed submission. */
export type RecoveryKind = "missed_callback" | "provider_lost_job" | "unconfirmed_resubmission";

/** Thrown after status was written, to retry the key with backoff (the cause is in a condition). */
export class RetryLater extends Error {
  override readonly name = "RetryLater";
}

type PendingEvent = [EventType, string, string];

/** What became of one submission: for metrics and logs. */
export type SubmissionOutcome =
  | "accepted"
  | "refused"
  | "unconfirmed"
  | "unconfirmed-resubmission"
  | "unconfirmed-failed"
  | "fenced"
  | "intent-conflict";

/** How long a deletion waits for an unconfirmed submission's provider id, to cancel it. */
export const CANCEL_WAIT_FOR_ID_MS = 60_000;
/** How long a deletion keeps trying to cancel at a provider that fails, before letting go. */
export const CANCEL_GIVE_UP_MS = 5 * 60_000;

/** RunPod's default job TTL (queue plus run), sent explicitly so the contract is visible. */
export const PROVIDER_JOB_TTL_MS = 24 * 3600 * 1000;

/** What one pass decided: the status to write and what happens next. */
interface Outcome {
  status: MediaJobStatus;
  requeueAfterMs?: number;
  retry?: string;
  /** The pass already wrote status itself (the submission protocol's own writes). */
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

    let status = this.withPipeline(
      job,
      withPhaseConditions(outcome.status, job.metadata.generation, now),
      now,
    );
    if (outcome.written) {
      job = outcome.written;
      status = job.status ?? status;
    } else if (!sameStatus(status, before)) {
      const written = await this.d.api.replaceStatus("mediajobs", { ...job, status });
      this.stale.remember(key, job.metadata.resourceVersion, written.metadata.resourceVersion);
      if (before?.phase !== status.phase) this.d.onTransition?.(before?.phase, status.phase);
      job = {
        ...job,
        status,
        metadata: { ...job.metadata, resourceVersion: written.metadata.resourceVersion },
      };
    }
    for (const [type, reason, message] of events) await this.d.events.record(job, type, reason, message);

    // The end of a job, whoever wrote it (this controller, or the sidecar from a callback), is
    // told once: in the pass that lets go of the job (its finalizer), which no later pass repeats.
    if (isTerminal(status.phase) && job.metadata.finalizers?.includes(FINALIZER)) {
      await this.reportToPipeline(job, status, now);
      if (await this.removeFinalizer(job)) await this.recordEnd(job, status);
    }
    if (outcome.retry) throw new RetryLater(outcome.retry);
    // A running job is looked at again by its deadline at the latest.
    const untilDeadline = msUntilDeadline(job.spec, status, nowDate.getTime());
    let requeueAfterMs =
      status.phase === "Processing" && Number.isFinite(untilDeadline)
        ? Math.max(50, Math.min(outcome.requeueAfterMs ?? Infinity, untilDeadline + 50))
        : outcome.requeueAfterMs;
    // A finished job with spec.ttlSecondsAfterFinished: deleted once it has expired.
    const untilExpiry = isTerminal(status.phase)
      ? await this.msUntilExpiry({ ...job, status }, nowDate.getTime())
      : undefined;
    if (untilExpiry !== undefined) {
      if (untilExpiry <= 0) {
        await this.deleteExpired(job);
        return;
      }
      requeueAfterMs = Math.min(requeueAfterMs ?? Infinity, untilExpiry + 50);
    }
    return requeueAfterMs === undefined ? undefined : { requeueAfterMs };
  };

  /**
   * msUntilExpiry, with the next step's existence read from the cache, and confirmed by a read
   * before a deletion is decided on its absence (a step just created may not be cached yet).
   */
  private async msUntilExpiry(job: MediaJob, nowMs: number): Promise<number | undefined> {
    const next = job.status?.nextJob;
    const ns = job.metadata.namespace!;
    const cached = next !== undefined && this.d.jobs.get(ns, next) !== undefined;
    const left = msUntilExpiry(job, nowMs, cached);
    if (left === undefined || left > 0 || next === undefined) return left;
    const stored = await this.d.api.get<MediaJob>("mediajobs", ns, next);
    return stored ? undefined : left;
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

  /** PipelineSucceeded on a pipeline's first job, from what the job itself knows. */
  private withPipeline(job: MediaJob, status: MediaJobStatus, now: string): MediaJobStatus {
    // Only pipelines (a first job with later steps), and only once the first job has ended, so
    // that a job on its own costs no write more.
    if (!job.spec.then?.length || !isTerminal(status.phase)) return status;
    const c = ownPipelineCondition(job, status);
    return c ? this.condition(status, job, c, now) : status;
  }

  /**
   * A later step that ended tells the pipeline's first job: PipelineSucceeded False when it failed,
   * True when it was the last and completed. Before the step's finalizer goes, so a failed write
   * is retried; the first failure told stays (a pipeline stops at its first failed step anyway).
   */
  private async reportToPipeline(job: MediaJob, status: MediaJobStatus, now: string): Promise<void> {
    const c = stepPipelineCondition(job, status);
    const first = job.metadata.annotations?.[PIPELINE_ANNOTATION] ?? job.metadata.labels?.[PIPELINE_LABEL];
    if (!c || !first) return;
    const uid = job.metadata.annotations?.[PIPELINE_UID_ANNOTATION];
    await this.d.api.updateStatusWithRetry<MediaJob>("mediajobs", job.metadata.namespace!, first, (cur) => {
      if (uid && cur.metadata.uid !== uid) return undefined; // a namesake, not this pipeline's first job
      const told = getCondition(cur.status?.conditions, PIPELINE_SUCCEEDED);
      if (told?.status === "False" || (told?.status === c.status && told.reason === c.reason))
        return undefined;
      const conditions = setCondition(cur.status?.conditions, c, now, cur.metadata.generation);
      return { ...cur, status: { ...cur.status, conditions } };
    });
  }

  /** The Event that says how a job ended: Normal Completed, or Warning Failed with the reason. */
  private async recordEnd(job: MediaJob, status: MediaJobStatus): Promise<void> {
    if (status.phase === "Completed") {
      await this.d.events.record(
        job,
        "Normal",
        "Completed",
        `completed at the provider${status.providerJobId ? ` as ${status.providerJobId}` : ""}, attempt ${status.attempts ?? 1}`,
      );
      return;
    }
    await this.d.events.record(job, "Warning", "Failed", failureText(status));
  }

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
    // A suspended job is not submitted; it waits for spec.suspend to be false (a watch event).
    const suspended = getCondition(status.conditions, "Suspended");
    if (job.spec.suspend) {
      if (suspended?.status !== "True") {
        const message = "spec.suspend is true: the job is not submitted until it is false";
        events.push(["Normal", "Suspended", message]);
        status = this.condition(
          status,
          job,
          { type: "Suspended", status: "True", reason: "Suspended", message },
          now,
        );
      }
      return { status };
    }
    if (suspended && suspended.status !== "False") {
      const message = "spec.suspend is false: the job is submitted again";
      events.push(["Normal", "Resumed", message]);
      status = this.condition(
        status,
        job,
        { type: "Suspended", status: "False", reason: "Resumed", message },
        now,
      );
    }
    // Waiting to be retried past its deadline: it ends here, it is not submitted again.
    if (msUntilDeadline(job.spec, status, Date.parse(now)) <= 0) {
      const failed = deadlineExceeded(status, now, "waiting to be submitted again");
      events.push(["Warning", "DeadlineExceeded", failed.error!]);
      return { status: failed };
    }
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
    // A pipeline's first job gets the pipeline's label in the same write, as its later steps have.
    if (!job.metadata.finalizers?.includes(FINALIZER)) {
      const pipeline = firstStepMetadata(job);
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
      job = {
        ...job,
        metadata: {
          ...job.metadata,
          finalizers: patched.metadata.finalizers,
          resourceVersion: patched.metadata.resourceVersion,
          ...(pipeline && { labels: patched.metadata.labels, annotations: patched.metadata.annotations }),
        },
      };
      setJob(job);
    }

    return this.submit(job, status, endpointId, now, events);
  }

  private fenceHolds(): boolean {
    return this.d.fence?.() ?? true;
  }

  /**
   * The write-ahead submission: (1) persist the intent with the resourceVersion this pass read, so
   * a stale cache or a deposed leader loses the race before the provider hears of the job; (2) check
   * the leader fence; (3) POST /run once (the client retries only what the provider provably did not
   * take); (4) record the provider's id. An answer lost at (3) leaves the job Processing and
   * Unconfirmed: its callback adopts it, and it is not sent again before its confirmation deadline.
   */
  private async submit(
    job: MediaJob,
    status: MediaJobStatus,
    endpointId: string,
    now: string,
    events: PendingEvent[],
  ): Promise<Outcome> {
    const namespace = job.metadata.namespace!;
    const name = job.metadata.name;
    const key = `${namespace}/${name}`;
    const jobId = status.jobId ?? effectiveJobId(job);
    const timeoutSeconds = job.spec.timeoutSeconds ?? this.d.settings.defaultTimeoutSeconds;
    const generation = job.metadata.generation;
    if (!this.fenceHolds()) {
      this.d.onSubmission?.("fenced");
      return { status, retry: "not the leader: no submission" };
    }

    // (1) The intent.
    const intent = withPhaseConditions(
      this.condition(
        intentStatus(status, { endpointId, submissionId: randomBytes(12).toString("base64url"), now }),
        job,
        {
          type: "Submitted",
          status: "Unknown",
          reason: "Submitting",
          message: `submitting to endpoint ${endpointId}`,
        },
        now,
      ),
      generation,
      now,
    );
    let stored: MediaJob;
    try {
      const written = await this.d.api.replaceStatus("mediajobs", { ...job, status: intent });
      stored = { ...job, status: intent, metadata: { ...job.metadata, ...written.metadata } };
    } catch (err) {
      if (!isConflict(err)) throw err;
      // Someone else wrote first (the sidecar, another replica, an operator): decide again from
      // their version, which the watch delivers.
      this.d.onSubmission?.("intent-conflict");
      return { status, written: job, requeueAfterMs: 1_000 };
    }
    this.stale.remember(key, job.metadata.resourceVersion, stored.metadata.resourceVersion);
    this.d.onTransition?.(status.phase, "Processing");
    const attempt = intent.submission!.attempt;

    // (2) The fence, immediately before the side effect. Nothing was sent: withdraw the intent.
    if (!this.fenceHolds()) {
      this.d.onSubmission?.("fenced");
      const withdrawn = withdrawIntent(stored.status, status, attempt, now);
      if (withdrawn)
        await this.d.api
          .replaceStatus("mediajobs", { ...stored, status: withPhaseConditions(withdrawn, generation, now) })
          .catch(() => undefined); // left as it is, it is resubmitted after its deadline: late, not twice
      return { status, written: stored, retry: "lost the leadership before submitting" };
    }

    // (3) /run, once.
    let providerJobId: string;
    try {
      const res = await this.d.provider.submit(
        endpointId,
        {
          id: submissionId(status, jobId),
          input: job.spec.input ?? {},
          webhook: callbackUrl(
            this.d.settings.callbackBaseUrl,
            this.d.settings.callbackSecret,
            {
              namespace,
              name,
              uid: job.metadata.uid ?? "",
              jobId,
              attempt,
              submission: intent.submission!.id,
            },
            { expiresAt: callbackExpiry(Date.parse(now), timeoutSeconds) },
          ),
          // spec.timeoutSeconds is when *we* look at a job, not an execution limit: a slow job that
          // is still running is left alone. The provider's queue+run TTL is made explicit instead,
          // and spec.activeDeadlineSeconds, a hard limit, is handed to the provider where it fits.
          policy: providerPolicy(job.spec, intent, Date.parse(now), PROVIDER_JOB_TTL_MS),
        },
        { ...(this.d.leadership?.() && { signal: this.d.leadership()! }) },
      );
      providerJobId = res.id;
    } catch (err) {
      const refused = isProviderError(err) && !err.mayHaveBeenAccepted;
      const message = `submission to endpoint ${endpointId} ${refused ? "failed" : "is unconfirmed"}: ${describeError(err)}`;
      if (refused) {
        this.d.onSubmission?.("refused");
        const reason = isProviderError(err) ? err.code : "SubmitFailed";
        events.push(["Warning", reason, message]);
        const written = await this.writeOnto(stored, (cur) => {
          const back = withdrawIntent(cur.status, status, attempt, now);
          return back
            ? this.condition(back, cur, { type: "Submitted", status: "False", reason, message }, now)
            : undefined;
        });
        return { status, written, retry: message };
      }
      this.d.onSubmission?.("unconfirmed");
      const deadline = new Date(
        Date.parse(now) +
          msUntilConfirmationDeadline(
            stored,
            Date.parse(now),
            this.d.settings.defaultTimeoutSeconds,
            this.d.settings.confirmationWindowMs,
          ),
      ).toISOString();
      const note = `${message}; the job may be running: waiting for its callback until ${deadline}, no resubmission before then`;
      events.push(["Warning", "SubmissionUnconfirmed", note]);
      const written = await this.writeOnto(stored, (cur) => this.unconfirmed(cur, attempt, note, now)).catch(
        (e: unknown) => {
          this.d.log.warn({ job: key, err: describeError(e) }, "could not record an unconfirmed submission");
          return stored;
        },
      );
      return {
        status,
        written,
        requeueAfterMs: Math.max(1_000, Date.parse(deadline) - Date.parse(now)),
      };
    }

    // (4) The provider's id. A failed write here does not resubmit: the job stays Processing.
    this.d.onSubmission?.("accepted");
    events.push([
      "Normal",
      "Submitted",
      `submitted to endpoint ${endpointId} as ${providerJobId}${status.replay ? " (replay)" : ""}, attempt ${attempt}`,
    ]);
    try {
      const written = await this.recordProviderId(stored, attempt, providerJobId, now);
      this.unrecorded.delete(key);
      return { status, written, requeueAfterMs: timeoutSeconds * 1000 };
    } catch (err) {
      this.unrecorded.set(key, { attempt, providerJobId });
      this.d.log.warn(
        { job: key, providerJobId, err: describeError(err) },
        "submitted, but could not record the provider's job id yet; retrying the record (never the submission)",
      );
      return { status, written: stored, requeueAfterMs: 1_000 };
    }
  }

  private unconfirmed(
    cur: MediaJob,
    attempt: number,
    message: string,
    now: string,
  ): MediaJobStatus | undefined {
    const marked = markUnconfirmed(cur.status ?? {}, attempt);
    if (!marked) return undefined;
    return this.condition(
      marked,
      cur,
      { type: "Submitted", status: "Unknown", reason: "SubmissionUnconfirmed", message },
      now,
    );
  }

  private async recordProviderId(
    stored: MediaJob,
    attempt: number,
    providerJobId: string,
    now: string,
  ): Promise<MediaJob> {
    return this.writeOnto(stored, (cur) => {
      const accepted = recordAccepted(cur.status, attempt, providerJobId);
      // A callback that adopted this very id is confirmed by the answer: its next step may go on.
      const confirmed = confirmAdoption(accepted ?? cur.status, providerJobId, now, cur.metadata.generation);
      const recorded = confirmed ?? accepted;
      if (!recorded) return undefined;
      return recorded.phase === "Processing"
        ? this.condition(
            recorded,
            cur,
            {
              type: "Submitted",
              status: "True",
              reason: "Submitted",
              message: `submitted as ${providerJobId}`,
            },
            now,
          )
        : recorded;
    });
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

  // ---- Processing: the automated "missed callback" runbook ------------------------------------

  private async processing(
    job: MediaJob,
    status: MediaJobStatus,
    nowDate: Date,
    events: PendingEvent[],
  ): Promise<Outcome> {
    const now = nowDate.toISOString();
    if (msUntilDeadline(job.spec, status, nowDate.getTime()) <= 0)
      return this.stopAtProvider(job, status, now, events, "deadline");
    if (job.spec.suspend) {
      if (!isUnconfirmed(status)) return this.stopAtProvider(job, status, now, events, "suspend");
      // Its provider id is unknown, so it cannot be cancelled, and it may be running: it is not
      // submitted again either. It is cancelled once its id arrives (its callback), or ends as
      // any unconfirmed submission does at its deadline.
      const o = await this.unconfirmedPass(job, status, nowDate, events);
      if (o.written || o.status.phase !== "Processing") return o;
      return {
        ...o,
        status: this.condition(
          o.status,
          job,
          {
            type: "Suspended",
            status: "Unknown",
            reason: "SuspendPending",
            message:
              "spec.suspend is true, but the submission is unconfirmed (its provider id is unknown): it " +
              "is cancelled once its id arrives with its callback, and never submitted again meanwhile",
          },
          now,
        ),
      };
    }
    // Resumed before a suspension could cancel anything (its submission was unconfirmed).
    if (getCondition(status.conditions, "Suspended")?.status === "Unknown")
      status = this.condition(
        status,
        job,
        { type: "Suspended", status: "False", reason: "Resumed", message: "spec.suspend is false again" },
        now,
      );
    if (isUnconfirmed(status)) return this.unconfirmedPass(job, status, nowDate, events);
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
        // Told once, as a condition and one Event, not on every tick it stays that way.
        const overdue = getCondition(status.conditions, "Overdue");
        const next =
          overdue?.status === "True"
            ? status
            : this.condition(
                status,
                job,
                {
                  type: "Overdue",
                  status: "True",
                  reason: "StillRunning",
                  message: `past its timeout, but the provider reports ${result.status}; checking again every tick`,
                },
                now,
              );
        if (next !== status)
          events.push([
            "Normal",
            "StillRunning",
            `past its timeout, but the provider reports ${result.status}; checking again later`,
          ]);
        return { status: next, requeueAfterMs: this.d.settings.tickMs };
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
      if (result.status === "COMPLETED") this.d.onRecovery?.("missed_callback");
      return { status: applied };
    } catch (err) {
      if (isProviderError(err, "JOB_NOT_FOUND")) {
        const next = afterProviderLostJob(status, now);
        events.push([
          "Warning",
          "ProviderLostJob",
          next.phase === "Failed"
            ? `the provider no longer knows job ${providerId}, for the ${next.providerLosses}th time; not replaying it again`
            : `the provider no longer knows job ${providerId}; reset to Pending and replayed`,
        ]);
        if (next.phase !== "Failed") this.d.onRecovery?.("provider_lost_job");
        return { status: next };
      }
      const message = `could not read the job's status at the provider: ${describeError(err)}`;
      events.push(["Warning", "StatusCheckFailed", message]);
      return { status, retry: message };
    }
  }

  /**
   * Cancels a running job at the provider because it was suspended or ran past its deadline, as
   * batch/v1 Job does. A job the provider finished meanwhile keeps its result (it ran once; it is not
   * run again). Suspended: Pending until resumed. Past the deadline: Failed (DeadlineExceeded), even
   * when the cancel fails or cannot be made (no provider id): the provider was given the deadline as
   * the job's TTL where it could be.
   */
  private async stopAtProvider(
    job: MediaJob,
    status: MediaJobStatus,
    now: string,
    events: PendingEvent[],
    why: "suspend" | "deadline",
  ): Promise<Outcome> {
    const id = status.providerJobId;
    let cancelled = "its provider id is unknown, so it could not be cancelled there";
    if (id && status.endpointId) {
      if (!this.fenceHolds()) return { status, retry: "not the leader: no cancel" };
      try {
        const res = await this.d.provider.cancel(status.endpointId, id);
        if (TERMINAL_STATUSES.has(res.status) && res.status !== "CANCELLED") {
          // It finished before the cancel: its own end, not the suspension's or the deadline's.
          const applied = applyProviderResult({ ...job, status }, res, now);
          if (applied && why === "suspend") return { status: applied };
          if (applied?.phase === "Completed") return { status: applied };
        }
        cancelled = `cancelled job ${id} at the provider (${res.status})`;
      } catch (err) {
        if (!isProviderError(err, "JOB_NOT_FOUND")) {
          const message = `could not cancel job ${id} at the provider: ${describeError(err)}`;
          events.push(["Warning", "CancelFailed", message]);
          if (why === "suspend") return { status, retry: message };
          cancelled = message;
        } else cancelled = `the provider no longer knows job ${id}`;
      }
    }
    if (why === "deadline") {
      const failed = deadlineExceeded(status, now, cancelled);
      events.push(["Warning", "DeadlineExceeded", failed.error!]);
      return { status: failed };
    }
    const message = `spec.suspend is true: ${cancelled}; the job is submitted again once it is false`;
    events.push(["Normal", "Suspended", message]);
    return {
      status: this.condition(
        suspendedStatus(status, now),
        job,
        { type: "Suspended", status: "True", reason: "Suspended", message },
        now,
      ),
    };
  }

  /**
   * A submission whose provider id is unknown: its /run answer was lost, the process died between
   * /run and the record, or the record write failed. It may be running, so it is never submitted
   * again while its callback can still arrive (the sidecar adopts it by its attempt-bound token);
   * past that, UNCONFIRMED_SUBMISSION_POLICY decides (decideUnconfirmed).
   */
  private async unconfirmedPass(
    job: MediaJob,
    status: MediaJobStatus,
    nowDate: Date,
    events: PendingEvent[],
  ): Promise<Outcome> {
    const now = nowDate.toISOString();
    const key = `${job.metadata.namespace}/${job.metadata.name}`;
    const attempt = status.submission!.attempt;
    const known = this.unrecorded.get(key);
    if (known?.attempt === attempt) {
      const written = await this.recordProviderId(job, attempt, known.providerJobId, now);
      this.unrecorded.delete(key);
      return { status, written, requeueAfterMs: 1_000 };
    }
    const decision = decideUnconfirmed(
      { ...job, status },
      {
        nowMs: nowDate.getTime(),
        defaultTimeoutSeconds: this.d.settings.defaultTimeoutSeconds,
        windowMs: this.d.settings.confirmationWindowMs,
        policy: this.d.settings.unconfirmedPolicy ?? "fail",
      },
    );
    if (decision.action === "wait") {
      const remaining = decision.remainingMs;
      // Seen in Sending by a pass that did not send it: the sending pass ended without an answer.
      const marked = this.unconfirmed(
        job,
        attempt,
        `the submission's answer was never recorded; the job may be running: waiting for its callback until ${new Date(nowDate.getTime() + remaining).toISOString()}`,
        now,
      );
      return { status: marked ?? status, requeueAfterMs: remaining };
    }
    this.d.onSubmission?.(decision.outcome);
    events.push(["Warning", decision.reason, decision.message]);
    if (decision.action === "resubmit") this.d.onRecovery?.("unconfirmed_resubmission");
    return { status: decision.status };
  }

  // ---- Completed: the next pipeline step, exactly once ----------------------------------------

  private async completed(job: MediaJob, status: MediaJobStatus, events: PendingEvent[]): Promise<Outcome> {
    if (status.nextJob || !job.spec.then?.length) return { status };
    // An output adopted from a callback alone is not fed forward until the /run answer or an
    // operator (kubectl media accept) vouches for it: it may be another tenant's job.
    if (adoptedWithoutEvidence({ ...job, status })) return { status };
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
    const skip = job.metadata.annotations?.[SKIP_CANCEL_ANNOTATION] === "true";
    if (status?.phase === "Processing" && status.endpointId && !skip) {
      const deletingForMs = this.now().getTime() - new Date(job.metadata.deletionTimestamp ?? 0).getTime();
      const id = status.providerJobId;
      if (!id) {
        // An unconfirmed submission: its provider id may still arrive with its callback.
        if (status.submission && deletingForMs < CANCEL_WAIT_FOR_ID_MS)
          return { requeueAfterMs: Math.max(1_000, CANCEL_WAIT_FOR_ID_MS - deletingForMs) };
        await this.d.events.record(
          job,
          "Warning",
          "CancelSkipped",
          "the provider's id of this job never became known, so it could not be cancelled there",
        );
      } else if (!this.fenceHolds()) {
        throw new RetryLater("not the leader: no cancel");
      } else {
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
            // A dead provider must not keep the object forever: give up after a bounded time.
            const giveUp = deletingForMs >= (this.d.settings.cancelGiveUpMs ?? CANCEL_GIVE_UP_MS);
            await this.d.events.record(
              job,
              "Warning",
              giveUp ? "CancelAbandoned" : "CancelFailed",
              `could not cancel job ${id}: ${describeError(err)}${giveUp ? "; deleting without cancelling" : ""}`,
            );
            if (!giveUp) throw err;
          }
        }
      }
    }
    await this.removeFinalizer(job);
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
}
