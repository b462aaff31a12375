// A plan's GPU-seconds cap holds at the provider too: when an account has used its plan's seconds
// for the period, its jobs still waiting in the provider's queue would start anyway and run up to
// their execution timeout. So each such job is read once at the provider: still IN_QUEUE, it is
// marked held (Admitted=False, UsageLimitReached), then, read again still queued, cancelled there
// (a queued job costs nothing) and returned to Pending, where its plan holds it until the period
// rolls over or the plan grows. A job a worker already runs is left to end: the overshoot is
// bounded by the jobs actually running. The mark comes before the cancel so that the cancel's
// callback, which may reach the sidecar first, ends the job the same way (provider-result.ts).
import { getCondition } from "../crds/conditions.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { withCondition } from "./conditions.js";
import { jobAccount } from "./tenancy.js";

const REASON = "UsageLimitReached";

/** Whether the job is marked held by its account's usage cap while submitted (its cancel may follow). */
export const heldForUsage = (status: MediaJobStatus | undefined): boolean => {
  const c = getCondition(status?.conditions, "Admitted");
  return status?.phase === "Processing" && c?.status === "False" && c.reason === REASON;
};

/** The mark: queued at the provider while its account is at its cap; cancelled there next. */
export function markHeldForUsage(job: MediaJob, status: MediaJobStatus, now: string): MediaJobStatus {
  return withCondition(
    status,
    job.metadata.generation,
    {
      type: "Admitted",
      status: "False",
      reason: REASON,
      message:
        `account ${jobAccount(job) ?? ""} has used the GPU seconds its plan allows this billing period: the job, ` +
        "still queued at the provider, is cancelled there and waits here for the next period or a larger plan",
    },
    now,
  );
}

/**
 * Cancelled in the provider's queue for its account's cap: Pending again, a new submission once
 * its plan admits it (not a failed attempt; the deadline keeps counting from the first submission).
 */
export function heldStatus(status: MediaJobStatus, now: string): MediaJobStatus {
  const { submission: _s, providerJobId: _p, submittedAt: _t, ...rest } = status;
  return { ...rest, phase: "Pending", updatedAt: now };
}
