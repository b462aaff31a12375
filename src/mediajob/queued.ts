// The in-flight window's gate on a Pending job (src/controller/dispatch/dispatcher.ts decides it):
// a job that may be submitted but gets no slot of its endpoint's window waits here, in Kubernetes,
// with condition Queued=True; it is submitted when the dispatcher grants it a slot.
//
// Writes: Queued=True is written once, when the job starts waiting (its message is not refreshed
// while it waits, so a waiting job costs no write per tick), and Queued=False rides along the
// submission's own first write (the write-ahead intent): no write of its own.
import { getCondition } from "../crds/conditions.js";
import type { MediaJobStatus } from "../crds/mediajob.js";
import { withCondition } from "./conditions.js";
import type { WindowReason } from "./reasons.js";

/** The dispatcher's answer for one job. */
export type SlotFact =
  | { granted: true }
  | {
      granted: false;
      /** WindowFull, Throttled (a 429's Retry-After), NoCapacity (workersMax 0), ScalerUnknown, LowPriority. */
      reason: WindowReason;
      message: string;
    };

/** The job waits for a slot: Queued=True, written once (not again while the reason holds). */
export function queuedStatus(
  status: MediaJobStatus,
  generation: number | undefined,
  slot: Extract<SlotFact, { granted: false }>,
  now: string,
): MediaJobStatus {
  const prev = getCondition(status.conditions, "Queued");
  if (prev?.status === "True" && prev.reason === slot.reason) return status;
  return withCondition(
    status,
    generation,
    { type: "Queued", status: "True", reason: slot.reason, message: slot.message },
    now,
  );
}

/** The job got its slot: Queued=False, in the submission's intent write. */
export function dequeuedStatus(
  status: MediaJobStatus,
  generation: number | undefined,
  now: string,
): MediaJobStatus {
  const prev = getCondition(status.conditions, "Queued");
  if (prev?.status !== "True") return status;
  return withCondition(
    status,
    generation,
    {
      type: "Queued",
      status: "False",
      reason: "Dispatched",
      message: "a slot of the endpoint's in-flight window was free",
    },
    now,
  );
}
