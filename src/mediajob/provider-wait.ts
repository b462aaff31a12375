// A submitted job that waits in its endpoint's queue at the provider says why, on itself: its
// Queued condition is True with the endpoint's cause (wait-cause.ts, from the GpuEndpoint's last
// /health and its workersMax: crash-looping workers, a cold start, workersMax reached, throttled)
// and the runbook's fix, so `kubectl get mj` and `kubectl describe mj` show it in the REASON column.
//
// /health counts the whole endpoint, so a job is not told a cause before the provider says it is
// one of the queued jobs: when its endpoint's cause differs from what its condition names (and it
// is not known to have started), its status is read once, IN_QUEUE writes the cause, anything else
// marks it started (Started=True) and it is never read for this again. Reads and writes therefore
// happen only when the cause changes, never per tick while it holds, and at rest (no queue) never.
// When the endpoint's queue empties, a job whose condition named a cause is no longer queued
// there (a worker took it): Queued=False, without a read. Leaving Processing clears it too
// (conditions.ts, withPhaseConditions), so a Pending job's Queued always means the window's wait.
import { getCondition } from "../crds/conditions.js";
import type { MediaJobStatus } from "../crds/mediajob.js";
import { withCondition } from "./conditions.js";
import { startedAtProvider, startedStatus } from "./start-deadline.js";
import { isProviderWait, type WaitCause } from "./wait-cause.js";

/**
 * Whether the job's status at the provider is to be read for its wait: confirmed (its provider id
 * known), not seen started, and its endpoint has a cause its Queued condition does not name yet.
 */
export function waitReadDue(status: MediaJobStatus | undefined, cause: WaitCause | undefined): boolean {
  if (!cause || !status?.providerJobId || startedAtProvider(status)) return false;
  const q = getCondition(status.conditions, "Queued");
  return !(isProviderWait(q) && q?.reason === cause.reason);
}

/**
 * The job's Queued condition from its endpoint's cause and, when one was read, its status at the
 * provider: IN_QUEUE names the cause, started or ended marks it started; no cause any more ends a
 * wait its condition named. Unchanged when nothing is new (no write).
 */
export function withProviderWait(
  status: MediaJobStatus,
  generation: number | undefined,
  cause: WaitCause | undefined,
  providerStatus: string | undefined,
  now: string,
): MediaJobStatus {
  if (startedAtProvider(status)) return status;
  const waiting = isProviderWait(getCondition(status.conditions, "Queued"));
  if (!cause)
    return waiting
      ? withCondition(
          status,
          generation,
          {
            type: "Queued",
            status: "False",
            reason: "LeftProviderQueue",
            message: "the endpoint's queue at the provider is empty: a worker took the job",
          },
          now,
        )
      : status;
  if (providerStatus === undefined) return status;
  if (providerStatus === "IN_QUEUE")
    return withCondition(
      status,
      generation,
      {
        type: "Queued",
        status: "True",
        reason: cause.reason,
        message: `waiting in the provider's queue: ${cause.message}`,
      },
      now,
    );
  return startedStatus(status, generation, providerStatus, now);
}
