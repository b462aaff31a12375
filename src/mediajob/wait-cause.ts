// Why jobs wait in a provider endpoint's queue, from its /health report and its settings: the
// provider-side cause a user can act on, with the runbook's fix. RunPod's /health reports the
// workers idle, running, initializing, throttled and unhealthy
// (https://docs.runpod.io/serverless/endpoints/send-requests#health); jobs stuck IN_QUEUE come from
// workers that crash as they start more often than from a lack of capacity, so that is told first.
import type { Condition } from "../crds/common.js";

/** The /health counts (as the GpuEndpoint's status.health records them). */
export interface HealthCounts {
  jobsInQueue?: number;
  workersIdle?: number;
  workersRunning?: number;
  workersInitializing?: number;
  workersThrottled?: number;
  workersUnhealthy?: number;
}

/** Every reason providerWaitCause gives: a job's Queued condition with one waits at the provider. */
const PROVIDER_WAIT_REASONS: ReadonlySet<string> = new Set([
  "WorkersUnhealthy",
  "NoWorkersAllowed",
  "WorkersThrottled",
  "ScalingFromZero",
  "ColdStart",
  "WorkersMaxReached",
  "WaitingForScaler",
]);

/** A job's Queued condition that names a provider-side cause (provider-wait.ts writes it). */
export const isProviderWait = (c: Condition | undefined): boolean =>
  c?.type === "Queued" && c.status === "True" && PROVIDER_WAIT_REASONS.has(c.reason);

/** How a job's Queued condition words a provider-side cause: this, then the cause's message. */
export const PROVIDER_WAIT_PREFIX = "waiting in the provider's queue: ";

/** The provider-side cause a job's Queued condition names, as the endpoint's reading gave it. */
export function recordedWaitCause(c: Condition | undefined): WaitCause | undefined {
  if (!c || !isProviderWait(c)) return undefined;
  const message = c.message ?? "";
  return {
    reason: c.reason,
    message: message.startsWith(PROVIDER_WAIT_PREFIX) ? message.slice(PROVIDER_WAIT_PREFIX.length) : message,
  };
}

export interface WaitCause {
  /** CamelCase, as a condition reason. */
  reason: string;
  message: string;
}

/**
 * The provider-side cause of jobs waiting in the endpoint's queue, or undefined when none wait.
 * In order: workers crash-looping (unhealthy), no worker allowed (workersMax 0), workers throttled
 * (no GPU of the requested types), workers starting (a cold start; from zero when none is up),
 * every allowed worker busy (workersMax reached), else waiting for the autoscaler to add workers.
 */
export function providerWaitCause(h: HealthCounts, workersMax: number): WaitCause | undefined {
  const queued = h.jobsInQueue ?? 0;
  if (queued <= 0) return undefined;
  const up = (h.workersIdle ?? 0) + (h.workersRunning ?? 0);
  const starting = h.workersInitializing ?? 0;
  if ((h.workersUnhealthy ?? 0) > 0)
    return {
      reason: "WorkersUnhealthy",
      message:
        `${queued} job(s) queued while ${h.workersUnhealthy} worker(s) are unhealthy: they crash as they start ` +
        "(repeated container restarts), so the jobs wait though workers exist. Fix: read the worker logs (a GPU " +
        "runtime mismatch, a missing model artefact, an import error, out of memory) and fix the worker image",
    };
  if (workersMax <= 0)
    return {
      reason: "NoWorkersAllowed",
      message: `${queued} job(s) queued but maxWorkers is 0. Fix: raise spec.maxWorkers`,
    };
  if ((h.workersThrottled ?? 0) > 0 && up === 0)
    return {
      reason: "WorkersThrottled",
      message:
        `${queued} job(s) queued while ${h.workersThrottled} worker(s) are throttled: no GPU of the requested ` +
        "types is available. Fix: allow more GPU types, or wait",
    };
  if (starting > 0)
    return {
      reason: up === 0 ? "ScalingFromZero" : "ColdStart",
      message:
        `${queued} job(s) queued while ${starting} worker(s) start (a cold start${up === 0 ? ", from zero workers" : ""}). ` +
        "Fix for latency: minWorkers of 1 or more keeps a worker warm; FlashBoot and a smaller image shorten the start",
    };
  if (up >= workersMax)
    return {
      reason: "WorkersMaxReached",
      message: `${queued} job(s) queued with all ${workersMax} allowed worker(s) up: no capacity. Fix: raise spec.maxWorkers`,
    };
  return {
    reason: up === 0 ? "ScalingFromZero" : "WaitingForScaler",
    message:
      `${queued} job(s) queued, ${up} of ${workersMax} worker(s) up: the autoscaler adds workers as the queue ` +
      "waits (QUEUE_DELAY) or grows (REQUEST_COUNT)",
  };
}
