import type { EndpointConfig } from "./engine.js";
import type { EndpointPatch, EndpointSpec } from "./options.js";
import { inferWorkload } from "./outputs.js";
import { endpointIdFor } from "./random.js";

// Endpoint configurations: built from simulator options, patched by tests (drift), and replaced
// whole by GraphQL saveEndpoint, whose omitted fields fall back to defaults like the provider's.

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
    settings: { ...SETTINGS_DEFAULTS, templateId: `sim-${workload}-template`, gpuIds: "AMPERE_16" },
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
  return {
    id: config.id,
    name: config.name,
    workersMin: config.workersMin,
    workersMax: config.workersMax,
    idleTimeout: config.idleTimeout,
    executionTimeoutMs: config.executionTimeoutMs,
    ...settings,
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
    settings: Object.fromEntries(
      SETTINGS_FIELDS.map((k) => [k, input[k] === undefined ? SETTINGS_DEFAULTS[k] : input[k]]),
    ),
  };
  if (config.workersMin > config.workersMax) {
    return { ok: false, validation: false, message: "workersMin cannot be greater than workersMax" };
  }
  return { ok: true, config };
}
