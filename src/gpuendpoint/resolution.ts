// Which provider endpoint a GpuEndpoint is: spec.endpointId, else GPU_PROVIDER_ENDPOINT_<WORKLOAD>,
// else the endpoint named <prefix>-<workload>-<env>, else one created from spec.create. An id that
// matches no live endpoint is ENDPOINT_NOT_FOUND, with the runbook's fix (fixes.ts).
import type { GpuEndpoint, GpuEndpointStatus } from "../crds/gpuendpoint.js";
import type { EndpointNaming, LiveEndpoint } from "./facts.js";
import type { Finding } from "./findings.js";
import { FIX_ENDPOINT } from "./fixes.js";

export type ResolvedBy = NonNullable<GpuEndpointStatus["resolvedBy"]>;

export type Resolution =
  | { found: LiveEndpoint; by: ResolvedBy }
  /** The EndpointFound finding that says what was looked for. */
  | { missing: Finding }
  /** None has the conventional name, and spec.create says how to make it. */
  | { create: string };

const notFound = (cause: string, fix: string): { missing: Finding } => ({
  missing: { type: "EndpointFound", status: "False", reason: "ENDPOINT_NOT_FOUND", cause, fix },
});

export function resolveEndpoint(
  ep: GpuEndpoint,
  naming: EndpointNaming,
  endpoints: readonly LiveEndpoint[],
): Resolution {
  const variable = `GPU_PROVIDER_ENDPOINT_${ep.spec.workload.toUpperCase()}`;
  const byId = (id: string, by: "spec" | "environment", source: string): Resolution => {
    const found = endpoints.find((e) => e.id === id);
    return found
      ? { found, by }
      : notFound(`endpoint id ${id} (from ${source}) does not match a live endpoint`, FIX_ENDPOINT);
  };
  if (ep.spec.endpointId) return byId(ep.spec.endpointId, "spec", "spec.endpointId");
  if (naming.fromEnv) return byId(naming.fromEnv, "environment", variable);
  const name = naming.conventionalName;
  const named = endpoints.find((e) => e.name === name);
  if (named) return { found: named, by: createdEarlier(ep, named) ? "created" : "name" };
  if (ep.spec.create) return { create: name };
  return notFound(
    `no endpoint id is set (spec.endpointId, ${variable}) and no provider endpoint is named ${name}`,
    `${FIX_ENDPOINT}, or set spec.create`,
  );
}

/** An endpoint we created is found by its name afterwards; it stays "created" while it is the same one. */
const createdEarlier = (ep: GpuEndpoint, named: LiveEndpoint): boolean =>
  ep.status?.resolvedBy === "created" && ep.status.endpointId === named.id;

/** What the provider is asked to create for spec.create: the spec's workers from the start. */
export interface EndpointCreation {
  name: string;
  templateId: string;
  /** The GPU types in order of preference, comma-separated (the provider's gpuIds). */
  gpuIds: string;
  workersMin: number;
  workersMax: number;
  idleTimeout: number;
  gpuCount?: number;
}

export function creationOf(ep: GpuEndpoint, name: string): EndpointCreation {
  const create = ep.spec.create!;
  return {
    name,
    templateId: create.templateId,
    gpuIds: create.gpuTypeIds.join(","),
    workersMin: ep.spec.minWorkers,
    workersMax: ep.spec.maxWorkers,
    idleTimeout: ep.spec.idleTimeoutSeconds,
    ...(create.gpuCount ? { gpuCount: create.gpuCount } : {}),
  };
}
