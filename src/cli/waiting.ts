// Jobs that wait: Pending jobs the controller will not submit until something changes, read from
// the conditions the controller writes (Admitted, EndpointReady; Queued and Suspended when set).
// `doctor` lists them with the fix, and `status` gives its verdict from the same reading, so the
// two never disagree with the conditions `kubectl describe` shows. The fixes and which waits are
// by design come from the domain's reason table (src/mediajob/reasons.ts, docs/reasons.md).
import type { Condition } from "../crds/common.js";
import type { MediaJob } from "../crds/mediajob.js";
import { holdingCondition } from "../mediajob/holds.js";
import type { Finding } from "./doctor.js";
import { fixFor, isByDesign } from "../mediajob/reasons.js";

export interface Wait {
  /** The condition that holds the job, as `kubectl describe` shows it. */
  condition: Condition;
  /** What to do about it. */
  fix: string;
}

/** Whether a wait is the product working as configured (doctor's ok, status's exit code 0). */
export const waitsByDesign = (wait: Wait): boolean => isByDesign(wait.condition.reason);

/** Why a job waits (the domain's holding condition) and the fix, or undefined when nothing holds it. */
export function waitOf(job: MediaJob): Wait | undefined {
  const holding = holdingCondition(job.status);
  return holding ? { condition: holding, fix: fixFor(job, holding) } : undefined;
}

/** One finding per reason a job waits (the first jobs named), or one ok when none waits. */
export function waitingFindings(jobs: MediaJob[]): Array<Omit<Finding, "section">> {
  const byReason = new Map<string, Array<{ job: MediaJob; wait: Wait }>>();
  for (const job of jobs) {
    const wait = waitOf(job);
    if (!wait) continue;
    const { type, status, reason } = wait.condition;
    const key = `${type}=${status} (${reason})`;
    byReason.set(key, [...(byReason.get(key) ?? []), { job, wait }]);
  }
  if (byReason.size === 0)
    return [{ check: "waiting jobs", result: "ok", message: "no Pending MediaJob is held by a condition" }];
  return [...byReason.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, held]) => {
      const names = held
        .slice(0, 5)
        .map(({ job }) => `${job.metadata.namespace}/${job.metadata.name}`)
        .join(", ");
      const first = held[0]!;
      return {
        check: "waiting jobs",
        target: key,
        result: waitsByDesign(first.wait) ? "ok" : "warn",
        message: `${held.length} MediaJob(s) Pending: ${names}${held.length > 5 ? ", ..." : ""} (${first.wait.condition.message})`,
        fix: first.wait.fix,
      };
    });
}
