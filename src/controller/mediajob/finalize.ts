// A MediaJob being deleted: the domain's deletion plan (src/mediajob/deletion.ts) carried out:
// cancel at the provider and record what it billed, wait (bounded) for that usage's report, tell
// the pipeline, then let go.
import type { MediaJob } from "../../crds/mediajob.js";
import { describeError } from "../../k8s/errors.js";
import type { PlannedEvent } from "../../mediajob/conditions.js";
import {
  CANCEL_GIVE_UP_MS,
  cancelFailedEvent,
  cancelledEvent,
  deletionUsageWait,
  leftRunningEvent,
  planDeletion,
} from "../../mediajob/deletion.js";
import { SKIP_CANCEL_ANNOTATION } from "../../mediajob/job.js";
import { orphanOf } from "../../mediajob/orphan.js";
import type { OrphanedRun } from "../../crds/billingaccount.js";
import { writtenStatus } from "../../mediajob/plan.js";
import { retry } from "../../mediajob/pass.js";
import { afterDeletionCancel } from "../../mediajob/stop.js";
import { DEFAULT_USAGE_SETTINGS } from "../../mediajob/usage.js";
import { isProviderError } from "../../provider/index.js";
import type { MediaJobDeps, PassResult } from "./deps.js";
import { cancelAtProvider } from "./cancel.js";
import type { JobWrites } from "./writes.js";

export interface Finalizer {
  d: MediaJobDeps;
  writes: JobWrites;
  now: () => Date;
  fenceHolds: () => boolean;
  record: (job: MediaJob, event: PlannedEvent) => Promise<void>;
}

/** One pass over a job with a deletionTimestamp: cancel at the provider, then let go. */
export async function finalize(f: Finalizer, job: MediaJob): Promise<PassResult> {
  const { d, writes } = f;
  const usage = d.settings.usage ?? DEFAULT_USAGE_SETTINGS;
  const settings = { cancelGiveUpMs: d.settings.cancelGiveUpMs, usage, usageWaitMs: d.settings.usageWaitMs };
  const plan = planDeletion(job, f.now().getTime(), settings);
  // Usage let go of is counted by the pass whose finalizer removal lands: a pass retried after a
  // conflict tells its Event again, but the seconds are dropped once.
  let dropped: number | undefined;
  for (const step of plan.steps) {
    if (step.type === "event") {
      await f.record(job, step.event);
      if (step.droppedSeconds !== undefined) dropped = step.droppedSeconds;
    } else if (step.type === "billUsage") job = await writes.replaceStatus(job, step.status);
    else if (step.type === "leaveRunning")
      await leaveRunning(f, job, step.orphan, `as ${SKIP_CANCEL_ANNOTATION} asks`);
    else if (step.type === "removeFinalizer") {
      if ((await writes.removeFinalizer(job)) && dropped !== undefined) d.onUsageDropped?.(dropped);
    } else if (step.type === "reportToPipeline")
      await writes.reportToPipeline(
        job.metadata.namespace!,
        step.first,
        step.uid,
        step.condition,
        f.now().toISOString(),
      );
    else {
      const cancelled = await cancelAtProvider(d, f.fenceHolds, step.endpointId, step.providerJobId);
      if ("fenced" in cancelled) return { error: retry("not the leader: no cancel") };
      try {
        const { answer } = cancelled;
        if ("lost" in answer) continue;
        if ("error" in answer) throw cancelled.err;
        // The job's own status after the cancel: whether it has ended there, and its final figures.
        const final = answer.result;
        const nowDate = f.now();
        const outcome = afterDeletionCancel(job, final, {
          now: nowDate,
          deletingForMs: nowDate.getTime() - new Date(job.metadata.deletionTimestamp ?? 0).getTime(),
          giveUpMs: d.settings.cancelGiveUpMs ?? CANCEL_GIVE_UP_MS,
          warnMs: d.settings.cancelFollowWarningMs,
          tickMs: d.settings.tickMs,
          confirmed: answer.confirmed === true,
        });
        if (outcome.status)
          job = await writes.replaceStatus(
            job,
            writtenStatus(job, outcome.status, usage, nowDate.toISOString()),
          );
        for (const e of outcome.events) await f.record(job, e);
        if (!outcome.letGo)
          return { result: { requeueAfterMs: outcome.requeueAfterMs ?? d.settings.tickMs } };
        await f.record(job, cancelledEvent(step.providerJobId, final.status));
        // The usage the cancel recorded is reported before the finalizer goes: a later pass's wait.
        const wait = deletionUsageWait(job, nowDate.getTime(), settings);
        if (wait.event) await f.record(job, wait.event);
        if (wait.wait) return { result: { requeueAfterMs: wait.requeueAfterMs } };
        if (wait.droppedSeconds !== undefined) dropped = wait.droppedSeconds;
      } catch (err) {
        if (isProviderError(err, "JOB_NOT_FOUND") || isProviderError(err, "ENDPOINT_NOT_FOUND")) continue;
        await f.record(job, cancelFailedEvent(step.providerJobId, describeError(err), step.giveUp));
        if (!step.giveUp) throw err;
        await leaveRunning(
          f,
          job,
          orphanOf(job, f.now().toISOString()),
          "after the cancel failed for too long",
        );
      }
    }
  }
  return plan.requeueAfterMs === undefined ? {} : { result: { requeueAfterMs: plan.requeueAfterMs } };
}

/**
 * A job let go while its run may go on at the provider: its record goes on its BillingAccount
 * first (the write must land, or the pass is retried and the finalizer stays), then a Warning.
 */
async function leaveRunning(
  f: Finalizer,
  job: MediaJob,
  orphan: OrphanedRun | undefined,
  why: string,
): Promise<void> {
  if (orphan) {
    const recorded = await f.d.recordOrphan(orphan);
    if (recorded === "present") return; // told by the pass that recorded it
    if (recorded === "missing") orphan = undefined; // no BillingAccount to hold it: told as unbilled
  }
  f.d.onRunLeft?.(orphan !== undefined);
  await f.record(job, leftRunningEvent(job, orphan, why));
}
