// The MediaJob executor: gathers the facts of one job (the caches, the clock, a provider status
// only when one is due), asks the domain for the pass (src/mediajob/plan.ts), takes the endpoint
// window's slot its plan read (gather.ts, takeSlot), and carries out its actions in order.
// Level-triggered: the same object in the same world always leads to the same actions, so a
// repeated or concurrent trigger is harmless. Only the write-ahead submission (submit.ts) writes
// status more than once in a pass, and it does so by name.
import { describeError } from "../../k8s/errors.js";
import { stageEntryFor } from "../../mediajob/stage-cache.js";
import type { MediaJob } from "../../crds/mediajob.js";
import { isAlreadyExists } from "../../k8s/errors.js";
import type { PlannedEvent } from "../../mediajob/conditions.js";
import type { SlotFact } from "../../mediajob/queued.js";
import { afterNextStep, type CreateAnswer } from "../../mediajob/next-step.js";
import { writtenStatus, planFinish, planJob, type FinishAction } from "../../mediajob/plan.js";
import { retry, type Action, type Plan, type SubmissionOutcome } from "../../mediajob/pass.js";
import { afterStop } from "../../mediajob/stop.js";
import { acceptedStatus } from "../../mediajob/write-ahead.js";
import { sameStatus } from "../../runtime/same-status.js";
import { StaleCacheGuard } from "../../runtime/stale-cache.js";
import type { MediaJobDeps, PassResult } from "./deps.js";
import { cancelAtProvider } from "./cancel.js";
import { finalize, type Finalizer } from "./finalize.js";
import {
  addPlaces,
  gatherFacts,
  reserveAccountPlace,
  settleSlot,
  takeSlot,
  type Unrecorded,
} from "./gather.js";
import { heldElsewhere, refuseHeldAnswer, submit } from "./submit.js";
import { JobWrites, jobKey } from "./writes.js";

/** A pass whose take disagreed with its plan runs again this soon (not at once: no busy loop). */
const SLOT_MOVED_REQUEUE_MS = 50;

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
  private readonly unrecorded: Unrecorded = new Map();
  private readonly writes: JobWrites;
  private readonly finalizer: Finalizer;

  constructor(private readonly d: MediaJobDeps) {
    this.writes = new JobWrites(d.api, this.stale, () => this.now(), d.log);
    this.finalizer = {
      d,
      writes: this.writes,
      now: () => this.now(),
      fenceHolds: () => this.fenceHolds(),
      record: (job, event) => this.record(job, event),
    };
  }

  private now(): Date {
    return this.d.now?.() ?? new Date();
  }

  private fenceHolds = (): boolean => this.d.fence?.() ?? true;

  /**
   * One pass: gather, plan, execute. The work queue's entry: its error, retryable or terminal, is
   * the runtime's to act on and count (src/runtime/workqueue.ts).
   */
  readonly pass = async (key: string): Promise<PassResult> => {
    let job = this.d.jobs.getByKey(key);
    if (!job) {
      this.stale.forget(key);
      return {};
    }
    if (this.stale.isStale(key, job.metadata.resourceVersion)) return { result: { requeueAfterMs: 50 } };
    if (job.metadata.deletionTimestamp) return finalize(this.finalizer, job);

    const nowDate = this.now();
    const now = nowDate.toISOString();
    const before = job.status;
    const facts = await gatherFacts(this.d, job, nowDate, this.unrecorded);
    // Places read, planned on, taken and reserved with no await between (gather.ts, addPlaces).
    const ask = addPlaces(this.d, job, facts, nowDate.getTime());
    let plan = planJob(job, facts);
    const slot = takeSlot(this.d, ask);
    if (slot && slot.granted !== facts.slot?.granted) return this.slotMoved(key, slot);
    const reservation = reserveAccountPlace(this.d, job, plan);
    let written: MediaJob | undefined;
    let submitted: SubmissionOutcome | undefined;
    let threw = true;
    try {
      for (const action of plan.actions) {
        ({ job, plan, written, submitted } = await this.execute(job, plan, action, now));
        if (written) break;
      }
      threw = false;
    } finally {
      // A write that threw may have landed (a timeout, a reset): the account's place stays taken
      // until the cache shows the job, or its retried pass decides again and gives it back.
      if (reservation && !threw && written?.status?.phase !== "Processing")
        this.d.accountJobs?.release(...reservation);
      settleSlot(this.d, key, ask, slot, submitted);
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
      metering: this.d.settings.usage?.metering ?? false,
      ...(this.d.settings.usageSettleWaitMs !== undefined && {
        usageSettleWaitMs: this.d.settings.usageSettleWaitMs,
      }),
    });
    let kept = true;
    for (const action of finish.actions) kept = (await this.finish(job, action, now)) && kept;
    const result =
      kept && finish.requeueAfterMs !== undefined ? { requeueAfterMs: finish.requeueAfterMs } : undefined;
    return { ...(result && { result }), ...(plan.error && { error: plan.error }) };
  };

  /**
   * The window answered the take otherwise than the plan read it (nothing awaits between them, so
   * this is a guard): the plan is dropped, nothing is written or submitted, and the job's next pass
   * decides again. A slot the take granted stays the job's for that pass (the grant's TTL bounds
   * it); a job the take left waiting keeps its place among the waiting jobs and is woken when granted.
   */
  private slotMoved(key: string, slot: SlotFact): PassResult {
    this.d.log.warn({ job: key, granted: slot.granted }, "the window's answer changed between plan and take");
    return { result: { requeueAfterMs: SLOT_MOVED_REQUEUE_MS } };
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
        if (await heldElsewhere(this.d, job, providerJobId)) {
          const held = await refuseHeldAnswer(
            this.submitDeps(() => undefined),
            job,
            attempt,
            providerJobId,
            now,
          );
          return { job, plan: { ...plan, events: [...plan.events, ...held.events] }, written: held.written };
        }
        const written = await this.writes.writeOnto(job, (cur) =>
          acceptedStatus(cur, attempt, providerJobId, now),
        );
        this.unrecorded.delete(jobKey(job));
        return { job, plan, written };
      }
      case "cancel": {
        const cancelled = await cancelAtProvider(
          this.d,
          this.fenceHolds,
          action.endpointId,
          action.providerJobId,
        );
        if ("fenced" in cancelled)
          return { job, plan: { ...plan, error: retry("not the leader: no cancel") } };
        const next = afterStop(job, plan.status, action.why, cancelled.answer, now, this.d.settings.tickMs);
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
      status: writtenStatus(job, next.status, this.d.settings.usage, now),
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
      ...(this.d.holders && { holders: this.d.holders }),
      ...(this.d.store && { store: this.d.store }),
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
        await this.recordStage(job);
        if (await this.writes.removeFinalizer(job, action.keepForUsage))
          await this.record(job, action.endEvent);
        return true;
      case "releaseUsageFinalizer":
        await this.writes.removeFinalizer(job);
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

  /**
   * A completed stage's outputs go into the stage cache (stage-cache.ts) before its finalizer goes:
   * one PUT to the store, no Kubernetes write. A failure only costs a later job of the same stage
   * its run; it is logged, never retried at the job's expense.
   */
  private async recordStage(job: MediaJob): Promise<void> {
    const entry = stageEntryFor(job);
    const store = entry && this.d.store?.();
    if (!entry || !store) return;
    await store.client
      .put(entry.key, Buffer.from(JSON.stringify(entry.body)), "application/json")
      .catch((err: unknown) =>
        this.d.log.warn({ job: jobKey(job), err: describeError(err) }, "stage cache entry not written"),
      );
  }

  private async record(job: MediaJob, [type, reason, message]: PlannedEvent): Promise<void> {
    await this.d.events.record(job, type, reason, message);
  }
}
