// The "Diagnose failing jobs" table (docs/design.md, Operational procedures) as findings: for each
// condition of a GpuEndpoint, the cause the facts show and the runbook's fix (fixes.ts). Pure; the
// plan (plan.ts) writes them as conditions, and `kubectl media doctor` prints them.
import type { EndpointHealth, GpuEndpointSpec } from "../crds/gpuendpoint.js";
import type { ConditionInput } from "../crds/conditions.js";
import { scalerOf } from "../mediajob/window.js";
import type { HealthReport, KeyRead, LiveEndpoint, ProviderFailure } from "./facts.js";
import { conditionOf, type Finding } from "./findings.js";
import { FIXES } from "./fixes.js";

/** CredentialsValid: the key check's answer, or a refusal of a call made with the key. */
export function credentialsFinding(read: KeyRead | { failed: ProviderFailure }): Finding {
  const type = "CredentialsValid";
  if (!("failed" in read)) {
    const account = read.accountId ? ` (account ${read.accountId})` : "";
    return { type, status: "True", reason: "KeyValid", cause: `the GPU API key is valid${account}` };
  }
  const { refused, message } = read.failed;
  if (refused === "INVALID_API_KEY")
    return {
      type,
      status: "False",
      reason: "InvalidApiKey",
      cause: "the GPU provider rejects the API key",
      fix: FIXES.InvalidApiKey!,
    };
  if (refused === "ACCOUNT_PROBLEM")
    return {
      type,
      status: "False",
      reason: "AccountProblem",
      cause: `the key is valid but the provider account has a problem (billing, quota or suspension): ${message}`,
      fix: FIXES.AccountProblem!,
    };
  return {
    type,
    status: "Unknown",
    reason: "ProviderUnavailable",
    cause: `could not check the GPU API key: ${message}`,
  };
}

/** EndpointFound when the provider's endpoints could not be listed (or one not created). */
export const listingUnavailable = (f: ProviderFailure): Finding => ({
  type: "EndpointFound",
  status: "Unknown",
  reason: "ProviderUnavailable",
  cause: `could not list the provider's endpoints: ${f.message}`,
});

export const endpointFound = (live: LiveEndpoint, by: string): Finding => ({
  type: "EndpointFound",
  status: "True",
  reason: "EndpointFound",
  cause: `provider endpoint ${live.name} (${live.id}), resolved by ${by}`,
});

export const workersInSync = (live: LiveEndpoint): Finding => ({
  type: "WorkersInSync",
  status: "True",
  reason: "InSync",
  cause: `min ${live.workersMin}, max ${live.workersMax}, idle timeout ${live.idleTimeout}s`,
});

export const updateFailed = (f: ProviderFailure): Finding => ({
  type: "WorkersInSync",
  status: "False",
  reason: "UpdateFailed",
  cause: `could not update the workers at the provider: ${f.message}`,
});

/** ScalerKnown: whether the endpoint's autoscaler is one the in-flight window can be sized from. */
export function scalerFinding(live: LiveEndpoint, maxInFlight: number | undefined): Finding {
  const type = "ScalerKnown";
  const scaler = scalerOf(live.scalerType, live.scalerValue);
  if (scaler)
    return {
      type,
      status: "True",
      reason: "ScalerKnown",
      cause: `${scaler.type} ${String(live.scalerValue)}`,
    };
  const seen = `scalerType ${JSON.stringify(live.scalerType ?? null)}, scalerValue ${JSON.stringify(live.scalerValue ?? null)}`;
  const cause = `the provider reports ${seen}: not QUEUE_DELAY or REQUEST_COUNT with a positive value. `;
  // The in-flight window is sized from the scaler: one not known is told, never taken for a
  // default (the jobs wait in Kubernetes meanwhile, unless spec.maxInFlight is set).
  return maxInFlight === undefined
    ? {
        type,
        status: "False",
        reason: "ScalerUnknown",
        cause:
          cause +
          "The in-flight window is sized from the scaler, so jobs wait in Kubernetes (Queued, ScalerUnknown) " +
          "until it is known",
        fix: FIXES.ScalerUnknown!,
      }
    : {
        type,
        status: "False",
        reason: "ScalerUnknown",
        cause: cause + `spec.maxInFlight (${maxInFlight}) sizes the window meanwhile`,
      };
}

/** Worker health from the provider's /health: unhealthy or throttled workers, a queue that does not drain. */
export function healthFinding(
  health: EndpointHealth,
  previous: EndpointHealth | undefined,
  spec: GpuEndpointSpec,
): Finding {
  const type = "WorkersHealthy";
  if ((health.workersUnhealthy ?? 0) > 0)
    return {
      type,
      status: "False",
      reason: "UnhealthyWorkers",
      cause:
        `${health.workersUnhealthy} worker(s) unhealthy (repeated container restarts). Check the worker logs: a GPU runtime ` +
        "version mismatch (rebuild and re-push the worker image, update the endpoint's image tag), a missing model " +
        "artefact (re-upload it to object storage and trigger an endpoint re-pull), an import error, or out of memory " +
        "(move the endpoint to a larger GPU tier)",
    };
  const running =
    (health.workersRunning ?? 0) + (health.workersIdle ?? 0) + (health.workersInitializing ?? 0);
  const queued = health.jobsInQueue ?? 0;
  if (queued > 0 && spec.maxWorkers === 0)
    return {
      type,
      status: "False",
      reason: "NoWorkersAllowed",
      cause: `${queued} job(s) queued but maxWorkers is 0`,
      fix: FIXES.NoWorkersAllowed!,
    };
  if ((health.workersThrottled ?? 0) > 0 && running === 0 && queued > 0)
    return {
      type,
      status: "False",
      reason: "ThrottledWorkers",
      cause: `${health.workersThrottled} worker(s) throttled (no GPU of the requested types available) and ${queued} job(s) queued`,
      fix: FIXES.ThrottledWorkers!,
    };
  const before = previous?.jobsInQueue ?? 0;
  if (queued > 0 && running === 0 && before > 0 && queued >= before)
    return {
      type,
      status: "False",
      reason: "QueueNotDraining",
      cause:
        `${queued} job(s) queued and no worker running since the last check. Check the account's quota and the endpoint's GPU availability` +
        (health.workersUnhealthy === undefined
          ? "; whether workers are crash-looping cannot be known here (RunPod's /health does not report it; with GPU_PROVIDER_MANAGEMENT_API=rest the REST v2 worker summary does)"
          : ""),
    };
  return {
    type,
    status: "True",
    reason: "Healthy",
    cause: `${running} worker(s) up, ${queued} job(s) queued`,
  };
}

/** WorkersHealthy when the health check failed (informational: Ready does not wait on it). */
export const healthUnavailable = (f: ProviderFailure): Finding => ({
  type: "WorkersHealthy",
  status: "Unknown",
  reason: "HealthUnavailable",
  cause: `health check failed: ${f.message}`,
});

const PRODUCTION = new Set(["prod", "production"]);

/** The cold-start row: a production endpoint that scales to zero. */
export function warmWorkersFinding(env: string, spec: GpuEndpointSpec): Finding {
  const type = "WarmWorkers";
  if (PRODUCTION.has(env) && spec.minWorkers === 0)
    return {
      type,
      status: "False",
      reason: "ScalesToZero",
      cause: "this production endpoint scales to zero, so jobs pay cold-start latency",
      fix: FIXES.ScalesToZero!,
    };
  return spec.minWorkers > 0
    ? { type, status: "True", reason: "WarmWorkers", cause: `${spec.minWorkers} warm worker(s)` }
    : {
        type,
        status: "True",
        reason: "ScaleToZeroAllowed",
        cause: `scale to zero is fine outside production (env ${env})`,
      };
}

/** Ready: False with the reason, cause and fix of what holds the endpoint back. */
export const notReady = (why: Finding, reason = why.reason): Finding => ({
  type: "Ready",
  status: "False",
  reason,
  cause: why.cause,
  ...(why.fix !== undefined && { fix: why.fix }),
});

export const ready = (live: LiveEndpoint): Finding => ({
  type: "Ready",
  status: "True",
  reason: "Ready",
  cause: `endpoint ${live.id} is live and in sync`,
});

/** The WorkersHealthy condition (healthFinding's). */
export const healthCondition = (
  health: EndpointHealth,
  previous: EndpointHealth | undefined,
  spec: GpuEndpointSpec,
): ConditionInput => conditionOf(healthFinding(health, previous, spec));

/** The WarmWorkers condition (warmWorkersFinding's). */
export const warmWorkersCondition = (env: string, spec: GpuEndpointSpec): ConditionInput =>
  conditionOf(warmWorkersFinding(env, spec));

/** The health report as GpuEndpoint.status.health records it. */
export function toHealth(report: HealthReport): EndpointHealth {
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
