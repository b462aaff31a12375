// The MediaJob states the benchmarks write directly, as the controller and the sidecar would leave
// them: one definition for the scale benchmark (bench/run.ts) and the per-holder memory probe
// (bench/cache-cost.ts), so both measure the same objects.
import type { MediaJobStatus } from "../src/crds/mediajob.js";
import { withPhaseConditions } from "../src/mediajob/lifecycle.js";

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
