// Jobs that wait: Pending jobs the controller will not submit until something changes, read from
// the conditions the controller writes (Admitted, EndpointReady; Queued and Suspended when set).
// `doctor` lists them with the fix, and `status` gives its verdict from the same reading, so the
// two never disagree with the conditions `kubectl describe` shows.
import type { Condition } from "../crds/common.js";
import type { MediaJob } from "../crds/mediajob.js";
import { holdingCondition } from "../mediajob/holds.js";
import type { Finding } from "./doctor.js";
import { jobAccount } from "../mediajob/tenancy.js";

export interface Wait {
  /** The condition that holds the job, as `kubectl describe` shows it. */
  condition: Condition;
  /** What to do about it. */
  fix: string;
}

function fixFor(job: MediaJob, c: Condition): string {
  const account = jobAccount(job) ?? "";
  switch (c.reason) {
    case "AccountUnknown":
      return (
        `the job runs once a subscription event for ${account} arrives: check the payment webhook ` +
        `(the "Replay a payment webhook" checks of kubectl media doctor; kubectl get paymentevents), ` +
        `and replay a missed one with kubectl media redeliver DELIVERY_ID`
      );
    case "AccountNotBound":
      return job.spec.account
        ? `an operator binds namespace ${job.metadata.namespace} to ${job.spec.account} (kubectl media bind ${job.metadata.namespace} ${job.spec.account}), or set spec.account to an account the namespace is bound to (kubectl media status -n ${job.metadata.namespace})`
        : `set spec.account to one of the namespace's accounts (kubectl media status -n ${job.metadata.namespace}), or an operator binds one (kubectl media bind ${job.metadata.namespace} ACCOUNT)`;
    case "AccountNotActive":
      return `the job runs once ${account}'s subscription is active or trialing again (a customer.subscription.updated event); delete the job otherwise`;
    case "UsageLimitReached":
      return `the job runs once ${account}'s billing period rolls over or its plan grows (a larger price on the subscription; kubectl get bacct -o wide shows used and limit seconds); delete the job otherwise`;
    case "ConcurrencyLimitReached":
      return `the job runs once one of ${account}'s running jobs ends (its plan's maxConcurrentJobs)`;
    case "ExecutionTimeoutAbovePlan":
      return `lower spec.executionTimeoutSeconds to the plan's maxExecutionTimeoutMs (or leave it out: the plan's is used), or move ${account} to a plan that allows it`;
    case "NoPlan":
      return `add a plan for the subscription's price (chart value plans, MEDIA_PLANS), or wait for the subscription's price to be recorded (kubectl get bacct -o wide)`;
    case "EndpointMissing":
      return `apply a GpuEndpoint for workload ${job.spec.workload} in namespace ${job.metadata.namespace}, or set spec.endpointRef to one`;
    case "WindowFull":
    case "Throttled":
      return `nothing to fix: the job is submitted when a slot of its endpoint's in-flight window frees, by fair share between accounts (kubectl media queue shows the window and who waits)`;
    case "NoCapacity":
      return `the endpoint has no workers (maxWorkers 0): raise spec.maxWorkers of its GpuEndpoint`;
    case "LowPriority":
      return `nothing to fix: a low-priority job runs when a worker of its endpoint is up and free (it never makes the endpoint scale); minWorkers above 0 keeps workers up for such jobs`;
    case "ScalerUnknown":
      return `set the endpoint's autoscaler at the provider (QUEUE_DELAY or REQUEST_COUNT with a positive value), or spec.maxInFlight of its GpuEndpoint (kubectl describe gpuendpoint: condition ScalerKnown)`;
    case "WorkloadMismatch":
      return `set spec.endpointRef to a GpuEndpoint of workload ${job.spec.workload}`;
    default:
      if (c.type === "EndpointReady")
        return `kubectl describe gpuendpoint (its conditions say why it is not Ready); kubectl media doctor checks the endpoints`;
      if (c.type === "Suspended") return "set spec.suspend to false when the job may run";
      return `kubectl describe mediajob ${job.metadata.name} -n ${job.metadata.namespace}`;
  }
}

/**
 * Waits that are the product working as configured, not something to fix: a job queued for its
 * endpoint's window or its plan's concurrency, or suspended by its owner. The doctor lists them
 * as ok, so its warnings stay about what needs a hand.
 */
const BY_DESIGN = new Set(["WindowFull", "Throttled", "ConcurrencyLimitReached", "Suspended", "LowPriority"]);

/** Whether a wait is the product working as configured (doctor's ok, status's exit code 0). */
export const waitsByDesign = (wait: Wait): boolean => BY_DESIGN.has(wait.condition.reason ?? "");

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
