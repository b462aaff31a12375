// The worker settings a GpuEndpoint wants at the provider, which of them differ there (drift: the
// provider lowers maxWorkers on its own, or the spec changed), and what the status records of the
// endpoint's settings as the provider has them.
import type { GpuEndpointSpec, GpuEndpointStatus } from "../crds/gpuendpoint.js";
import type { LiveEndpoint } from "./facts.js";

/** The provider's names for the worker settings a GpuEndpoint sets. */
export interface WorkersChange {
  workersMin: number;
  workersMax: number;
  idleTimeout: number;
}

export interface Drift {
  setting: keyof WorkersChange;
  /** As the provider has it. */
  was: unknown;
  want: number;
}

export const wantedWorkers = (spec: GpuEndpointSpec): WorkersChange => ({
  workersMin: spec.minWorkers,
  workersMax: spec.maxWorkers,
  idleTimeout: spec.idleTimeoutSeconds,
});

/** The settings that differ at the provider, in a fixed order; none: in sync. */
export function driftOf(live: LiveEndpoint, want: WorkersChange): Drift[] {
  return (Object.keys(want) as Array<keyof WorkersChange>)
    .filter((k) => live[k] !== want[k])
    .map((setting) => ({ setting, was: live[setting], want: want[setting] }));
}

/** The WorkersSynced Event's message: each setting's value before and after. */
export const driftRestored = (drift: readonly Drift[]): string =>
  `set at the provider: ${drift.map((d) => `${d.setting} ${String(d.was)} -> ${d.want}`).join(", ")}`;

/**
 * The status with the endpoint's settings as the provider reports them: its workers, and its
 * execution timeout and autoscaler when reported (absent: not reported, so not kept either).
 */
export function withProviderSettings(status: GpuEndpointStatus, live: LiveEndpoint): GpuEndpointStatus {
  const { executionTimeoutMs: _t, scalerType: _s, scalerValue: _v, ...kept } = status;
  const num = (v: unknown): number | undefined =>
    typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined;
  const timeout = num(live.executionTimeoutMs);
  const value = num(live.scalerValue);
  return {
    ...kept,
    workersMin: live.workersMin,
    workersMax: live.workersMax,
    idleTimeoutSeconds: live.idleTimeout,
    ...(timeout !== undefined && { executionTimeoutMs: Math.floor(timeout) }),
    ...(typeof live.scalerType === "string" && live.scalerType && { scalerType: live.scalerType }),
    ...(value !== undefined && { scalerValue: value }),
  };
}
