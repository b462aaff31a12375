// Why a Pending job waits: the condition that holds it back, as the controller writes it.
import type { Condition } from "../crds/common.js";
import type { MediaJobStatus } from "../crds/mediajob.js";
import { isPending } from "./job.js";

/** A condition that holds a Pending job back: False for these types (pending.ts writes them)... */
const HOLDING_WHEN_FALSE = ["Admitted", "EndpointReady"];
/** ...True for these (a queueing tool's or a suspension's hold). */
const HOLDING_WHEN_TRUE = ["Queued", "Suspended"];

/** The condition that holds a Pending job, or undefined when it is not Pending or nothing holds it. */
export function holdingCondition(status: MediaJobStatus | undefined): Condition | undefined {
  if (!isPending(status)) return undefined;
  return (status?.conditions ?? []).find(
    (c) =>
      (HOLDING_WHEN_FALSE.includes(c.type) && c.status === "False") ||
      (HOLDING_WHEN_TRUE.includes(c.type) && c.status === "True"),
  );
}
