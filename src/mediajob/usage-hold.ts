// What a job's usage still needs from the controller once the job has ended: seconds to count
// into its account, a report in the outbox, and so the finalizer that keeps the object (and its
// outbox) until both are done, and how long the run's own finalizer waits for that first.
import { attemptIdentifier } from "../billing/identifier.js";
import type { JobUsage, MediaJob, UsageAttempt } from "../crds/mediajob.js";

/** Whether an attempt's billed (or reported) seconds still have to reach the BillingAccount's period usage. */
export const awaitsCount = (usage: JobUsage, a: UsageAttempt): boolean =>
  usage.account !== undefined &&
  (a.billedSeconds ?? 0) > 0 &&
  (a.counted !== true || (a.meter === "Reported" && a.countedReported !== true));

/**
 * Whether the job's usage still needs the controller: an attempt not billed yet, a report in the
 * outbox, or seconds not yet counted into its account. Such a job is not settled (its status
 * stays whole in the cache, where the usage reporter finds it) and its TTL waits.
 */
export function usageOutstanding(job: MediaJob): boolean {
  const usage = job.status?.usage;
  if (!usage) return false;
  return usage.attempts.some(
    (a) =>
      a.billedSeconds === undefined ||
      a.meter === undefined ||
      a.meter === "Pending" ||
      awaitsCount(usage, a),
  );
}

/**
 * The finalizer that keeps a finished job whose usage is not yet reported: the job's status.usage
 * is the outbox of its meter report, so deleting the object before the report would lose the GPU
 * seconds. Set (in place of the finalizer that guards the run) when a finished job is let go of
 * with usage outstanding and metering on; removed once its usage is reported and counted. A
 * deletion waits for it a bounded time (deletion.ts).
 */
export const USAGE_FINALIZER = "media-orchestrator.io/usage-report";

/** Whether the job's usage keeps it (USAGE_FINALIZER): metering on and its usage outstanding. */
export const usageHoldsJob = (job: MediaJob, metering: boolean): boolean => metering && usageOutstanding(job);

/**
 * How long after its end a finished job whose usage is outstanding keeps the run's finalizer
 * (FINALIZER) instead of USAGE_FINALIZER: the usage reporter settles a report in a pass or two
 * (the send, then one write of the account and one of the job), so the finalizer usually goes in
 * one write once it has, as on a job without usage, and USAGE_FINALIZER (a write to put it in
 * place, another to remove it) is left to reports that wait longer (the payment provider failing,
 * a meter held, the account missing, a backlog of the reporter longer than this). The job's end
 * Event and its pipeline's are told when the run's finalizer goes, so they wait as long, at most
 * this. 30 s: a burst of 1,000 metered jobs on two cores settles within it (docs/benchmarks.md);
 * a minute's Event latency is what `kubectl get events` users would notice. The default of
 * USAGE_SETTLE_WAIT_SECONDS.
 */
export const USAGE_SETTLE_WAIT_MS = 30_000;

/**
 * Milliseconds the run's finalizer still waits for the job's usage to be settled (see
 * USAGE_SETTLE_WAIT_MS); 0 when it no longer does: nothing holds the job for its usage, or its
 * end is that long past (its completedAt, else its last update).
 */
export function msUntilUsageSettleWaitEnds(
  job: MediaJob,
  metering: boolean,
  nowMs: number,
  waitMs = USAGE_SETTLE_WAIT_MS,
): number {
  if (!usageHoldsJob(job, metering)) return 0;
  const ended = Date.parse(job.status?.completedAt ?? job.status?.updatedAt ?? "");
  if (Number.isNaN(ended)) return 0;
  return Math.max(0, ended + waitMs - nowMs);
}

/** What a job's outstanding usage amounts to: unreported meter events, seconds not yet counted. */
export interface UnsettledUsage {
  /** Billed seconds of attempts in the outbox (meter Pending) or not billed yet. */
  unreportedSeconds: number;
  /** The meter identifiers of those attempts (an operator can report them by hand). */
  identifiers: string[];
  /** Billed seconds not yet counted into the account's period usage. */
  uncountedSeconds: number;
}

export function unsettledUsage(job: MediaJob): UnsettledUsage {
  const usage = job.status?.usage;
  const out: UnsettledUsage = { unreportedSeconds: 0, identifiers: [], uncountedSeconds: 0 };
  if (!usage) return out;
  for (const a of usage.attempts) {
    if (a.meter === "Pending" || a.meter === undefined) {
      out.unreportedSeconds += a.billedSeconds ?? 0;
      const id =
        job.metadata.uid === undefined && a.identifier === undefined
          ? undefined
          : attemptIdentifier(job.metadata.uid, a);
      if (id !== undefined) out.identifiers.push(id);
    }
    if (usage.account !== undefined && a.counted !== true) out.uncountedSeconds += a.billedSeconds ?? 0;
  }
  return out;
}
