// A submitted job that waits in its endpoint's queue at the provider says why, on itself: its
// Queued condition is True with the endpoint's cause (wait-cause.ts, from the GpuEndpoint's last
// /health and its workersMax: crash-looping workers, a cold start, workersMax reached, throttled)
// and the runbook's fix, so `kubectl get mj` and `kubectl describe mj` show it in the REASON column.
//
// /health counts the whole endpoint, so a job is not told a cause before the provider says it is
// one of the queued jobs: when its endpoint has a cause its condition does not name (and it is not
// known to have started), its status is read; IN_QUEUE writes the cause, anything else marks it
// started (Started=True) and it is never read for this again. A job whose condition names a cause
// is read at each pass (the resync tick) until a worker starts it, so its condition does not say
// it waits while it runs; it is written only when the cause's reason changes or the wait ends, not
// per tick while it holds (the message's counts are those of the reason's first reading). At rest
// (no queue at its endpoint, no job waiting in one) nothing is read or written. Started, the wait
// ends (Queued=False, reason Started); leaving Processing ends it too (conditions.ts,
// withPhaseConditions), so a Pending job's Queued always means the window's wait.
import { getCondition } from "../crds/conditions.js";
import type { MediaJobStatus } from "../crds/mediajob.js";
import { withCondition } from "./conditions.js";
import { startedAtProvider, startedStatus } from "./start-deadline.js";
import { PROVIDER_WAIT_PREFIX, isProviderWait, type WaitCause } from "./wait-cause.js";

/**
 * Whether the job's status at the provider is to be read for its wait: confirmed (its provider id
 * known), not seen started, and either its endpoint has a cause its Queued condition does not name
 * yet, or its condition names one (read until a worker starts it).
 */
export function waitReadDue(status: MediaJobStatus | undefined, cause: WaitCause | undefined): boolean {
  if (!status?.providerJobId || startedAtProvider(status)) return false;
  const q = getCondition(status.conditions, "Queued");
  return isProviderWait(q) || cause !== undefined;
}

/**
 * The job's Queued condition from its endpoint's cause and, when one was read, its status at the
 * provider: started or ended marks it started; IN_QUEUE names a cause whose reason is new; no cause
 * any more ends a wait its condition named. Unchanged when nothing is new (no write).
 */
export function withProviderWait(
  status: MediaJobStatus,
  generation: number | undefined,
  cause: WaitCause | undefined,
  providerStatus: string | undefined,
  now: string,
): MediaJobStatus {
  if (startedAtProvider(status)) return status;
  const q = getCondition(status.conditions, "Queued");
  const waiting = isProviderWait(q);
  // A worker started it (or it ended): it waits no more, and is not read for its wait again.
  if (providerStatus !== undefined && providerStatus !== "IN_QUEUE")
    return startedStatus(status, generation, providerStatus, now);
  // Not read (the read failed), no cause in the endpoint's last reading (up to a tick old: the
  // reason named stays until a reading gives one), or the reason named still holds: no write.
  if (providerStatus === undefined || !cause || (waiting && q?.reason === cause.reason)) return status;
  return withCondition(
    status,
    generation,
    {
      type: "Queued",
      status: "True",
      reason: cause.reason,
      message: `${PROVIDER_WAIT_PREFIX}${cause.message}`,
    },
    now,
  );
}
