// The "Diagnose failing jobs" table (docs/design.md, Operational procedures) as pure functions:
// each finding a condition with the cause and the fix the runbook gives.
import type { EndpointHealth, GpuEndpointSpec } from "../../crds/gpuendpoint.js";
import type { ProviderError } from "../../provider/index.js";
import type { ConditionInput } from "../../crds/conditions.js";

export const FIX_KEY =
  "rotate the key in the provider's API-key settings and update GPU_PROVIDER_API_KEY in the orchestrator's environment";
export const FIX_ENDPOINT =
  "re-deploy the endpoint, then update the id (spec.endpointId or GPU_PROVIDER_ENDPOINT_<WORKLOAD>)";

export function credentialsCondition(err: ProviderError | undefined, accountId?: string): ConditionInput {
  if (!err)
    return {
      type: "CredentialsValid",
      status: "True",
      reason: "KeyValid",
      message: `the GPU API key is valid${accountId ? ` (account ${accountId})` : ""}`,
    };
  if (err.code === "INVALID_API_KEY") {
    return {
      type: "CredentialsValid",
      status: "False",
      reason: "InvalidApiKey",
      message: `the GPU provider rejects the API key. Fix: ${FIX_KEY}`,
    };
  }
  if (err.code === "ACCOUNT_PROBLEM") {
    return {
      type: "CredentialsValid",
      status: "False",
      reason: "AccountProblem",
      message: `the key is valid but the provider account has a problem (billing, quota or suspension): ${err.message}. Fix: resolve it in the provider's account settings`,
    };
  }
  return {
    type: "CredentialsValid",
    status: "Unknown",
    reason: "ProviderUnavailable",
    message: `could not check the GPU API key: ${err.message}`,
  };
}

/** Worker health from the provider's /health: unhealthy or throttled workers, a queue that does not drain. */
export function healthCondition(
  health: EndpointHealth,
  previous: EndpointHealth | undefined,
  spec: GpuEndpointSpec,
): ConditionInput {
  if ((health.workersUnhealthy ?? 0) > 0) {
    return {
      type: "WorkersHealthy",
      status: "False",
      reason: "UnhealthyWorkers",
      message:
        `${health.workersUnhealthy} worker(s) unhealthy (repeated container restarts). Check the worker logs: a GPU runtime ` +
        "version mismatch (rebuild and re-push the worker image, update the endpoint's image tag), a missing model " +
        "artefact (re-upload it to object storage and trigger an endpoint re-pull), an import error, or out of memory " +
        "(move the endpoint to a larger GPU tier)",
    };
  }
  const running =
    (health.workersRunning ?? 0) + (health.workersIdle ?? 0) + (health.workersInitializing ?? 0);
  const queued = health.jobsInQueue ?? 0;
  if (queued > 0 && spec.maxWorkers === 0) {
    return {
      type: "WorkersHealthy",
      status: "False",
      reason: "NoWorkersAllowed",
      message: `${queued} job(s) queued but maxWorkers is 0. Fix: raise spec.maxWorkers`,
    };
  }
  if ((health.workersThrottled ?? 0) > 0 && running === 0 && queued > 0) {
    return {
      type: "WorkersHealthy",
      status: "False",
      reason: "ThrottledWorkers",
      message: `${health.workersThrottled} worker(s) throttled (no GPU of the requested types available) and ${queued} job(s) queued. Fix: allow more GPU types`,
    };
  }
  if (
    queued > 0 &&
    running === 0 &&
    (previous?.jobsInQueue ?? 0) > 0 &&
    queued >= (previous?.jobsInQueue ?? 0)
  ) {
    return {
      type: "WorkersHealthy",
      status: "False",
      reason: "QueueNotDraining",
      message: `${queued} job(s) queued and no worker running since the last check. Check the account's quota and the endpoint's GPU availability${health.workersUnhealthy === undefined ? "; whether workers are crash-looping cannot be known here (RunPod's /health does not report it; with GPU_PROVIDER_MANAGEMENT_API=rest the REST v2 worker summary does)" : ""}`,
    };
  }
  return {
    type: "WorkersHealthy",
    status: "True",
    reason: "Healthy",
    message: `${running} worker(s) up, ${queued} job(s) queued`,
  };
}

const PRODUCTION = new Set(["prod", "production"]);

/** The cold-start row: a production endpoint that scales to zero. */
export function warmWorkersCondition(env: string, spec: GpuEndpointSpec): ConditionInput {
  if (PRODUCTION.has(env) && spec.minWorkers === 0) {
    return {
      type: "WarmWorkers",
      status: "False",
      reason: "ScalesToZero",
      message:
        "this production endpoint scales to zero, so jobs pay cold-start latency. Fix: set spec.minWorkers to 1; use spec.maxWorkers to cap cost",
    };
  }
  return {
    type: "WarmWorkers",
    status: "True",
    reason: spec.minWorkers > 0 ? "WarmWorkers" : "ScaleToZeroAllowed",
    message:
      spec.minWorkers > 0
        ? `${spec.minWorkers} warm worker(s)`
        : `scale to zero is fine outside production (env ${env})`,
  };
}

export function toHealth(report: {
  jobs: { completed: number; failed: number; inProgress: number; inQueue: number };
  workers: { idle: number; initializing?: number; running: number; throttled?: number; unhealthy?: number };
}): EndpointHealth {
  return {
    jobsInQueue: report.jobs.inQueue,
    jobsInProgress: report.jobs.inProgress,
    jobsCompleted: report.jobs.completed,
    jobsFailed: report.jobs.failed,
    workersIdle: report.workers.idle,
    workersRunning: report.workers.running,
    workersInitializing: report.workers.initializing,
    workersUnhealthy: report.workers.unhealthy,
    workersThrottled: report.workers.throttled,
  };
}
