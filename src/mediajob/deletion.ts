// A MediaJob being deleted: its job cancelled at the provider, then the finalizer let go of.
import type { ConditionInput } from "../crds/conditions.js";
import type { MediaJob } from "../crds/mediajob.js";
import type { PlannedEvent } from "./conditions.js";
import { FINALIZER, SKIP_CANCEL_ANNOTATION } from "./job.js";
import { deletedStepPipelineCondition, pipelineFirstOf } from "./pipeline.js";

/** How long a deletion waits for an unconfirmed submission's provider id, to cancel it. */
const CANCEL_WAIT_FOR_ID_MS = 60_000;
/** How long a deletion keeps trying to cancel at a provider that fails, before letting go. */
export const CANCEL_GIVE_UP_MS = 5 * 60_000;

type DeletionStep =
  | { type: "event"; event: PlannedEvent }
  /** Cancel at the provider; on failure, giveUp says whether the deletion goes on without it. */
  | { type: "cancel"; endpointId: string; providerJobId: string; giveUp: boolean }
  /** A later step's deletion told to its pipeline's first job (PipelineSucceeded), before it goes. */
  | { type: "reportToPipeline"; first: string; uid?: string; condition: ConditionInput }
  | { type: "removeFinalizer" };

export interface DeletionPlan {
  steps: DeletionStep[];
  requeueAfterMs?: number;
}

/** The deletion of a job with our finalizer: cancel what may run at the provider, then let go. */
export function planDeletion(job: MediaJob, nowMs: number, cancelGiveUpMs = CANCEL_GIVE_UP_MS): DeletionPlan {
  if (!job.metadata.finalizers?.includes(FINALIZER)) return { steps: [] };
  const status = job.status;
  const skip = job.metadata.annotations?.[SKIP_CANCEL_ANNOTATION] === "true";
  const steps: DeletionStep[] = [];
  if (status?.phase === "Processing" && status.endpointId && !skip) {
    const deletingForMs = nowMs - new Date(job.metadata.deletionTimestamp ?? 0).getTime();
    const id = status.providerJobId;
    if (!id) {
      // An unconfirmed submission: its provider id may still arrive with its callback.
      if (status.submission && deletingForMs < CANCEL_WAIT_FOR_ID_MS)
        return { steps: [], requeueAfterMs: Math.max(1_000, CANCEL_WAIT_FOR_ID_MS - deletingForMs) };
      steps.push({
        type: "event",
        event: [
          "Warning",
          "CancelSkipped",
          "the provider's id of this job never became known, so it could not be cancelled there",
        ],
      });
    } else {
      // A dead provider must not keep the object forever: give up after a bounded time.
      steps.push({
        type: "cancel",
        endpointId: status.endpointId,
        providerJobId: id,
        giveUp: deletingForMs >= cancelGiveUpMs,
      });
    }
  }
  const pipeline = pipelineFirstOf(job);
  const condition = deletedStepPipelineCondition(job);
  if (pipeline && condition) steps.push({ type: "reportToPipeline", ...pipeline, condition });
  steps.push({ type: "removeFinalizer" });
  return { steps };
}

/** The Events of a deletion's cancel: done, or failed (and whether the deletion goes on). */
export function cancelledEvent(providerJobId: string, providerStatus: string): PlannedEvent {
  return [
    "Normal",
    "CancelledAtProvider",
    `cancelled job ${providerJobId} at the provider (${providerStatus})`,
  ];
}
export function cancelFailedEvent(providerJobId: string, error: string, giveUp: boolean): PlannedEvent {
  return [
    "Warning",
    giveUp ? "CancelAbandoned" : "CancelFailed",
    `could not cancel job ${providerJobId}: ${error}${giveUp ? "; deleting without cancelling" : ""}`,
  ];
}
