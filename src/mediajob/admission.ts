// What a Pending job waits for before it is submitted: its billing account's subscription (the
// Admitted condition) and a Ready GpuEndpoint for its workload (the EndpointReady condition).
import { ADMITTING_STATES } from "../crds/billingaccount.js";
import { getCondition, type ConditionInput } from "../crds/conditions.js";
import type { GpuEndpoint } from "../crds/gpuendpoint.js";
import type { MediaJob } from "../crds/mediajob.js";
import type { AccountFacts } from "./pass.js";
import { admission as planVerdict, type Plans } from "./plans.js";

/**
 * Admitted: no account billed, or the account's subscription is active or trialing. `account` is
 * the one the namespace's binding allows (tenancy.ts resolveAccount), checked before this.
 */
export function admission(
  account: string | undefined,
  subscriptionState: string | undefined,
): ConditionInput {
  if (!account)
    return {
      type: "Admitted",
      status: "True",
      reason: "NoAccount",
      message: "the job names no billing account",
    };
  const state = subscriptionState;
  if (state && ADMITTING_STATES.has(state)) {
    return {
      type: "Admitted",
      status: "True",
      reason: "AccountActive",
      message: `account ${account} is ${state}`,
    };
  }
  return {
    type: "Admitted",
    status: "False",
    reason: state ? "AccountNotActive" : "AccountUnknown",
    message: state
      ? `account ${account} is ${state}; the job waits until it is active or trialing`
      : `no subscription state is known for account ${account}; the job waits for one`,
  };
}

/** What the plans say of a job its subscription admits: wait (a condition), or go with this timeout. */
export type LimitsVerdict =
  { admitted: true; executionTimeoutMs?: number } | { admitted: false; condition: ConditionInput };

/** The job's own policy.executionTimeout, ms (spec.executionTimeoutSeconds). */
const ownExecutionTimeoutMs = (job: MediaJob): number | undefined =>
  job.spec.executionTimeoutSeconds === undefined ? undefined : job.spec.executionTimeoutSeconds * 1000;

/**
 * The account's plan applied to a job its subscription admits (plans.ts admission): a job that
 * names no account, or any job while no plans are configured, goes with its own timeout only.
 */
export function planLimits(
  job: MediaJob,
  name: string | undefined,
  plans: Plans | undefined,
  account: AccountFacts | undefined,
): LimitsVerdict {
  const own = ownExecutionTimeoutMs(job);
  if (!name || !plans || Object.keys(plans).length === 0)
    return { admitted: true, ...(own !== undefined && { executionTimeoutMs: own }) };
  const verdict = planVerdict({
    plans,
    priceIds: account?.priceIds ?? [],
    usedSeconds: account?.usedSeconds ?? 0,
    runningJobs: account?.runningJobs ?? 0,
    ...(own !== undefined && { executionTimeoutMs: own }),
  });
  if (verdict.admitted) return verdict;
  return {
    admitted: false,
    condition: {
      type: "Admitted",
      status: "False",
      reason: verdict.reason,
      message: `account ${name}: ${verdict.message}`,
    },
  };
}

/** Whether a job would run on this endpoint: the one it names, else one serving its workload. */
export function endpointMatches(job: MediaJob, endpoint: GpuEndpoint): boolean {
  return job.spec.endpointRef
    ? job.spec.endpointRef === endpoint.metadata.name
    : job.spec.workload === endpoint.spec.workload;
}

/**
 * The job's endpoint among those of its namespace: spec.endpointRef, else the GpuEndpoint whose
 * workload matches (first by name).
 */
export function pickEndpoint(job: MediaJob, endpoints: readonly GpuEndpoint[]): GpuEndpoint | undefined {
  return endpoints
    .filter((e) => endpointMatches(job, e))
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))[0];
}

/** EndpointReady for the picked endpoint: it exists, serves the job's workload, and is Ready. */
export function endpointReadiness(job: MediaJob, endpoint: GpuEndpoint | undefined): ConditionInput {
  const ns = job.metadata.namespace ?? "";
  const ref = job.spec.endpointRef;
  if (!endpoint) {
    return {
      type: "EndpointReady",
      status: "False",
      reason: "EndpointMissing",
      message: ref
        ? `GpuEndpoint ${ref} does not exist in namespace ${ns}`
        : `no GpuEndpoint for workload ${job.spec.workload} in namespace ${ns}`,
    };
  }
  if (endpoint.spec.workload !== job.spec.workload) {
    return {
      type: "EndpointReady",
      status: "False",
      reason: "WorkloadMismatch",
      message: `GpuEndpoint ${endpoint.metadata.name} serves ${endpoint.spec.workload}, not ${job.spec.workload}`,
    };
  }
  const ready = getCondition(endpoint.status?.conditions, "Ready");
  if (ready?.status !== "True" || !endpoint.status?.endpointId) {
    return {
      type: "EndpointReady",
      status: "False",
      reason: ready?.status === "False" ? ready.reason : "EndpointNotReady",
      message: `GpuEndpoint ${endpoint.metadata.name} is not Ready${ready?.message ? `: ${ready.message}` : ""}`,
    };
  }
  return {
    type: "EndpointReady",
    status: "True",
    reason: "EndpointReady",
    message: `GpuEndpoint ${endpoint.metadata.name} (${endpoint.status.endpointId}) is Ready`,
  };
}
