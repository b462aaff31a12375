import type { EndpointConfig } from "./engine.js";
import type { EndpointPatch, EndpointSpec } from "./options.js";
import { inferWorkload } from "./outputs.js";
import { endpointIdFor } from "./random.js";

// Endpoint configurations: built from simulator options, patched by tests (drift), replaced whole
// by GraphQL saveEndpoint (omitted fields fall back to defaults like the provider's) and patched
// by REST v2 (rest.ts). Both APIs read and write the same configuration.

/** Defaults of the provider fields the simulator only stores. */
const SETTINGS_DEFAULTS: Record<string, unknown> = {
  templateId: null,
  gpuIds: null,
  gpuCount: 1,
  instanceIds: [],
  locations: null,
  networkVolumeId: null,
  networkVolumeIds: [],
  scalerType: "QUEUE_DELAY",
  scalerValue: 4,
  minCudaVersion: null,
  flashBootType: "OFF",
  modelReferences: [],
  allowedCudaVersions: null,
  type: "QB",
};
export const SETTINGS_FIELDS = Object.keys(SETTINGS_DEFAULTS);
export const ENGINE_FIELDS = ["workersMin", "workersMax", "idleTimeout", "executionTimeoutMs"] as const;

const ENGINE_DEFAULTS = { workersMin: 0, workersMax: 3, idleTimeout: 5, executionTimeoutMs: 600_000 };

export function configFromSpec(spec: EndpointSpec): EndpointConfig {
  const workload = spec.workload ?? inferWorkload(spec.name);
  return {
    id: spec.id ?? endpointIdFor(spec.name),
    name: spec.name,
    workload,
    workersMin: spec.workersMin ?? ENGINE_DEFAULTS.workersMin,
    workersMax: spec.workersMax ?? ENGINE_DEFAULTS.workersMax,
    idleTimeout: spec.idleTimeout ?? ENGINE_DEFAULTS.idleTimeout,
    executionTimeoutMs: ENGINE_DEFAULTS.executionTimeoutMs,
    settings: {
      ...SETTINGS_DEFAULTS,
      templateId: `sim-${workload}-template`,
      gpuIds: "AMPERE_16",
      ...(spec.scalerType !== undefined && { scalerType: spec.scalerType }),
      ...(spec.scalerValue !== undefined && { scalerValue: spec.scalerValue }),
      createdAt: new Date().toISOString(),
      version: 1,
    },
  };
}

export function patchConfig(config: EndpointConfig, patch: EndpointPatch): EndpointConfig {
  return {
    ...config,
    ...(patch.name !== undefined && { name: patch.name }),
    ...(patch.workload !== undefined && { workload: patch.workload }),
    ...(patch.workersMin !== undefined && { workersMin: patch.workersMin }),
    ...(patch.workersMax !== undefined && { workersMax: patch.workersMax }),
    ...(patch.idleTimeout !== undefined && { idleTimeout: patch.idleTimeout }),
    settings: {
      ...config.settings,
      ...(patch.scalerType !== undefined && { scalerType: patch.scalerType }),
      ...(patch.scalerValue !== undefined && { scalerValue: patch.scalerValue }),
    },
  };
}

/** The endpoint as GraphQL returns it (no simulator-only fields). */
export function graphqlView(config: EndpointConfig): Record<string, unknown> {
  const settings = { ...config.settings };
  settings.networkVolumeIds = (Array.isArray(settings.networkVolumeIds) ? settings.networkVolumeIds : []).map(
    (v: unknown) => ({
      networkVolumeId: (v as { networkVolumeId?: unknown }).networkVolumeId ?? null,
      dataCenterId: null,
    }),
  );
  const env = containerOf(config).env ?? {};
  const volumeId = typeof settings.networkVolumeId === "string" ? settings.networkVolumeId : "";
  return {
    id: config.id,
    name: config.name,
    workersMin: config.workersMin,
    workersMax: config.workersMax,
    idleTimeout: config.idleTimeout,
    executionTimeoutMs: config.executionTimeoutMs,
    ...settings,
    // Read-only fields RunPod's Python SDK selects (runpod/api/queries/endpoints.py).
    aiKey: null,
    version: settings.version ?? 1,
    workersStandby: 0,
    createdAt: settings.createdAt ?? null,
    env: Object.entries(env).map(([key, value]) => ({ key, value })),
    networkVolume: volumeId === "" ? null : { id: volumeId, dataCenterId: null },
  };
}

/** Fields GraphQL returns but EndpointInput does not take. */
export const READ_ONLY_FIELDS = ["aiKey", "version", "workersStandby", "createdAt", "userId"] as const;

/** Container settings (REST v2's image, env, ...), kept in `settings.container`. */
export interface Container {
  image?: string;
  args?: string;
  disk?: number;
  env?: Record<string, string>;
  ports?: string[];
  registry?: string | null;
}

export function containerOf(config: EndpointConfig): Container {
  const c = config.settings.container;
  return c !== null && typeof c === "object" ? (c as Container) : {};
}

/**
 * What a replace keeps: the creation time and the container, which EndpointInput cannot set; the
 * configuration version counts every change.
 */
export function carriedOver(existing: EndpointConfig | undefined): Record<string, unknown> {
  if (existing === undefined) return { createdAt: new Date().toISOString(), version: 1 };
  const version = typeof existing.settings.version === "number" ? existing.settings.version : 1;
  return {
    createdAt: existing.settings.createdAt,
    version: version + 1,
    ...(existing.settings.container !== undefined && { container: existing.settings.container }),
  };
}

const INT_FIELDS = new Set([
  "workersMin",
  "workersMax",
  "idleTimeout",
  "executionTimeoutMs",
  "gpuCount",
  "scalerValue",
]);
const REQUIRED_STRINGS = ["name", "templateId", "gpuIds"];

export type InputCheck =
  { ok: true; config: EndpointConfig } | { ok: false; validation: boolean; message: string };

/**
 * saveEndpoint semantics: a full replace. Every field not in `input` goes back to its default;
 * `id` selects the endpoint to replace (absent: create). `validation` errors are what GraphQL
 * variable coercion would reject (HTTP 400); the rest are resolver errors (HTTP 200 + errors).
 */
export function configFromInput(
  input: Record<string, unknown>,
  existing: EndpointConfig | undefined,
  newId: () => string,
): InputCheck {
  const allowed = new Set<string>(["id", "name", ...ENGINE_FIELDS, ...SETTINGS_FIELDS]);
  for (const key of Object.keys(input)) {
    if (!allowed.has(key)) {
      return {
        ok: false,
        validation: true,
        message: `Field "${key}" is not defined by type "EndpointInput".`,
      };
    }
  }
  for (const key of REQUIRED_STRINGS) {
    if (typeof input[key] !== "string" || input[key] === "") {
      return {
        ok: false,
        validation: true,
        message: `Field "${key}" of required type "String!" was not provided.`,
      };
    }
  }
  for (const key of INT_FIELDS) {
    const v = input[key];
    if (v !== undefined && v !== null && (!Number.isInteger(v) || (v as number) < 0)) {
      return { ok: false, validation: true, message: `Field "${key}" expects a non-negative Int.` };
    }
  }
  const name = input.name as string;
  const num = (key: (typeof ENGINE_FIELDS)[number]) =>
    typeof input[key] === "number" ? (input[key] as number) : ENGINE_DEFAULTS[key];
  const config: EndpointConfig = {
    id: existing?.id ?? newId(),
    name,
    workload: existing?.workload ?? inferWorkload(name),
    workersMin: num("workersMin"),
    workersMax: num("workersMax"),
    idleTimeout: num("idleTimeout"),
    executionTimeoutMs: num("executionTimeoutMs"),
    settings: {
      ...Object.fromEntries(
        SETTINGS_FIELDS.map((k) => [k, input[k] === undefined ? SETTINGS_DEFAULTS[k] : input[k]]),
      ),
      ...carriedOver(existing),
    },
  };
  if (config.workersMin > config.workersMax) {
    return { ok: false, validation: false, message: "workersMin cannot be greater than workersMax" };
  }
  return { ok: true, config };
}
