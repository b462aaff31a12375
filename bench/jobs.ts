// The MediaJob states the benchmarks write directly, as the controller and the sidecar would leave
// them: one definition for the scale benchmark (bench/run.ts) and the per-holder memory probe
// (bench/cache-cost.ts), so both measure the same objects, and the statuses the throughput
// ceiling writes.
import { randomBytes } from "node:crypto";
import { setCondition, type ConditionInput } from "../src/crds/conditions.js";
import type { MediaJob, MediaJobStatus } from "../src/crds/mediajob.js";
import { initialStatus } from "../src/mediajob/job.js";
import { intentStatus, recordAccepted } from "../src/mediajob/submission.js";
import { withPhaseConditions } from "../src/mediajob/conditions.js";
import { decideResult } from "../src/mediajob/result.js";

/** A finished job with the conditions the controller would write: nothing left to do. */
export function finishedJobStatus(uid: string, now: string): MediaJobStatus {
  return withPhaseConditions(
    {
      phase: "Completed",
      jobId: uid,
      providerJobId: uid,
      attempts: 1,
      submittedAt: now,
      completedAt: now,
      updatedAt: now,
      output: { text: "ok" },
    },
    1,
    now,
  );
}

/**
 * An active job as the controller leaves it after submitting it: Processing at the provider, the
 * accepted submission `submissionId`, its admission and endpoint conditions.
 */
export function activeJobStatus(uid: string, now: string, submissionId: string): MediaJobStatus {
  const conditions = [
    { type: "Admitted", reason: "NoAccount", message: "the job names no billing account" },
    { type: "EndpointReady", reason: "EndpointReady", message: "GpuEndpoint asr (bench-asr) is Ready" },
  ].map((c) => ({ ...c, status: "True" as const, lastTransitionTime: now, observedGeneration: 1 }));
  return withPhaseConditions(
    {
      phase: "Processing",
      jobId: uid,
      providerJobId: `sim-${uid}`,
      endpointId: "bench-asr",
      attempts: 1,
      submission: { attempt: 1, id: submissionId, startedAt: now, state: "Accepted" },
      submittedAt: now,
      updatedAt: now,
      conditions,
    },
    1,
    now,
  );
}

/**
 * The three statuses the product writes for a job that runs without a hitch, in order, computed
 * with the product's own lifecycle and its condition messages: the submission's intent (with the
 * Admitted and EndpointReady conditions of the pass that submits), the provider's id with
 * Processing, and Completed as the sidecar writes it from the provider's answer. The apiserver's
 * cost of a status write grows with the object (validation, managedFields), so a ceiling that
 * wrote smaller statuses than the product would not be making the same writes.
 */
export function productStatuses(
  job: MediaJob,
  o: { now: string; endpoint: string; endpointId: string; providerJobId: string; output: unknown },
): { intent: MediaJobStatus; processing: MediaJobStatus; completed: MediaJobStatus } {
  const { now } = o;
  const generation = job.metadata.generation ?? 1;
  const condition = (s: MediaJobStatus, c: ConditionInput): MediaJobStatus => ({
    ...s,
    conditions: setCondition(s.conditions, c, now, generation),
  });
  let pending = initialStatus(job, now);
  pending = condition(pending, {
    type: "Admitted",
    status: "True",
    reason: "NoAccount",
    message: "the job names no billing account",
  });
  pending = condition(pending, {
    type: "EndpointReady",
    status: "True",
    reason: "EndpointReady",
    message: `GpuEndpoint ${o.endpoint} (${o.endpointId}) is Ready`,
  });
  const intent = withPhaseConditions(
    condition(
      intentStatus(pending, {
        endpointId: o.endpointId,
        submissionId: randomBytes(12).toString("base64url"),
        now,
      }),
      {
        type: "Submitted",
        status: "Unknown",
        reason: "Submitting",
        message: `submitting to endpoint ${o.endpointId}`,
      },
    ),
    generation,
    now,
  );
  const processing = withPhaseConditions(
    condition(recordAccepted(intent, 1, o.providerJobId)!, {
      type: "Submitted",
      status: "True",
      reason: "Submitted",
      message: `submitted as ${o.providerJobId}`,
    }),
    generation,
    now,
  );
  const result = decideResult(
    { ...job, status: processing },
    { result: { id: o.providerJobId, status: "COMPLETED", output: o.output }, now },
  );
  const completed = withPhaseConditions(result.status!, generation, now);
  return { intent, processing, completed };
}
