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
import { WINDOW_REASONS, type WindowReason } from "./reasons.js";

/** The dispatcher's answer for one job. */
export type SlotFact =
  | { granted: true }
  | {
      granted: false;
      /** WindowFull, Throttled (a 429's Retry-After), NoCapacity (workersMax 0), ScalerUnknown, LowPriority. */
      reason: WindowReason;
      message: string;
    };

type Wait = Extract<SlotFact, { granted: false }>;

/**
 * The dispatcher's answers to a job that gets no slot, worded here once: the reason (the table of
 * reasons.ts gives its meaning and fix) and a message with the endpoint's numbers.
 */
export const windowWait = {
  scalerUnknown: (id: string, scalerType: string | undefined, scalerValue: number | undefined): Wait => ({
    granted: false,
    reason: WINDOW_REASONS.scalerUnknown,
    message:
      `the autoscaler of endpoint ${id} is not known yet (scalerType ${scalerType ?? "not reported"}, ` +
      `scalerValue ${scalerValue ?? "not reported"}): the in-flight window is sized from it, so the ` +
      "job waits here until the endpoint is read (or spec.maxInFlight is set)",
  }),
  lowPriority: (id: string, n: { up: number; normal: number; low: number }): Wait => ({
    granted: false,
    reason: WINDOW_REASONS.lowPriority,
    message:
      `a low-priority job does not make endpoint ${id} scale up (policy.lowPriority), so it takes only workers ` +
      `that are up and free: ${n.up} up, ${n.normal} of our normal jobs and ${n.low} low ones in flight. It ` +
      "waits here, not at the provider, so no normal job waits behind it there",
  }),
  throttled: (id: string, until: string): Wait => ({
    granted: false,
    reason: WINDOW_REASONS.throttled,
    message: `the provider refused submissions to endpoint ${id} (429): held until ${until}, then submitted by fair share between accounts`,
  }),
  noCapacity: (id: string): Wait => ({
    granted: false,
    reason: WINDOW_REASONS.noCapacity,
    message: `endpoint ${id} has no workers (workersMax 0): the job waits here, not at the provider`,
  }),
  windowFull: (id: string, used: number, size: number, position: number): Wait => ({
    granted: false,
    reason: WINDOW_REASONS.windowFull,
    message:
      `the in-flight window of endpoint ${id} is full (${used} of ${size}): submitted when a slot frees, by fair share between accounts` +
      (position > 0 ? `; ${position} older jobs of its account were waiting when it came` : ""),
  }),
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
