// Configuration from the environment, parsed once at start by zod. A bad value stops the process
// with a message naming the variable; values themselves are never echoed (some are secrets).
import { z } from "zod";

const bool = z
  .enum(["true", "false", "1", "0", "yes", "no"])
  .transform((v) => v === "true" || v === "1" || v === "yes");
const seconds = (def: number, min = 1) => z.coerce.number().int().min(min).default(def);
const url = z.url({ protocol: /^https?$/ }).transform((u) => u.replace(/\/+$/, ""));
const optionalText = z
  .string()
  .optional()
  .transform((v) => (v && v.trim() !== "" ? v.trim() : undefined));

/** Every variable the product reads. The first six are the service specification's names. */
export const EnvSchema = z.object({
  GPU_PROVIDER_API_KEY: optionalText,
  GPU_PROVIDER_ENDPOINT_ASR: optionalText,
  GPU_PROVIDER_ENDPOINT_TTS: optionalText,
  GPU_PROVIDER_ENDPOINT_RENDER: optionalText,
  PAYMENT_PROVIDER_API_KEY: optionalText,
  /** One signing secret, or several separated by commas while a rotation is under way. */
  PAYMENT_PROVIDER_WEBHOOK_SECRET: optionalText,

  /** The spec's {gpu_api_url}: the job API (/v2/...). */
  GPU_PROVIDER_API_URL: url.default("https://api.runpod.ai"),
  /** The management API (/graphql); defaults to GPU_PROVIDER_API_URL. */
  GPU_PROVIDER_MANAGEMENT_URL: url.optional(),
  /** The spec's {payment_api_url}. */
  PAYMENT_PROVIDER_API_URL: url.default("https://api.stripe.com"),
  /** Environment name: the {env} of the endpoint names <prefix>-<workload>-<env>. */
  MEDIA_ENV: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a lowercase name such as dev, staging or prod")
    .default("dev"),
  /** The fixed short project prefix of the endpoint names. */
  MEDIA_ENDPOINT_PREFIX: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a lowercase name")
    .default("media"),
  /** The sidecar's address as the GPU provider reaches it; callbacks go to <this>/reports/gpu_provider. */
  CALLBACK_BASE_URL: url.optional(),
  /** Key of the per-job callback tokens (HMAC). Required by the controller and the sidecar. */
  CALLBACK_SECRET: optionalText,
  /** Deadline of every Kubernetes API call (a lease renewal's own is shorter). */
  KUBE_API_TIMEOUT_SECONDS: seconds(30),
  /** The reconciliation tick: every object is reconciled at least this often. */
  RESYNC_INTERVAL_SECONDS: seconds(30),
  /** How long a job may stay Processing before the provider is asked (per job: spec.timeoutSeconds). */
  JOB_TIMEOUT_SECONDS: seconds(600),
  /** Namespace to watch; empty means all namespaces. */
  WATCH_NAMESPACE: optionalText,
  MAX_CONCURRENT_RECONCILES: z.coerce.number().int().min(1).max(256).default(8),
  LEADER_ELECTION: bool.default(true),
  LEADER_ELECTION_NAMESPACE: z.string().default("default"),
  LEADER_ELECTION_ID: z.string().default("media-orchestrator-controller"),
  /** Identity in the Lease; defaults to the pod name (HOSTNAME) plus a random suffix. */
  POD_NAME: optionalText,
  WEBHOOKS_HOST: z.string().default("0.0.0.0"),
  WEBHOOKS_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** Port of the controller's own /healthz, /readyz and /metrics. */
  CONTROLLER_METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(8081),
  WEBHOOK_TOLERANCE_SECONDS: seconds(300),
  /** PaymentEvents are kept this long (longer than the provider's 3-day retry window). */
  PAYMENT_EVENT_RETENTION_HOURS: seconds(24 * 7),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});

export type Env = z.output<typeof EnvSchema>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

/** Parses the environment. Messages name the variable and the rule, never the value. */
export function parseEnv(env: NodeJS.ProcessEnv = process.env): Env {
  const input: Record<string, string | undefined> = {};
  for (const key of Object.keys(EnvSchema.shape)) {
    const v = env[key];
    input[key] = v === "" ? undefined : v;
  }
  const res = EnvSchema.safeParse(input);
  if (!res.success) {
    throw new ConfigError(
      res.error.issues.map((i) => `${String(i.path[0])}: ${i.message.replace(/received .*/i, "")}`),
    );
  }
  return res.data;
}

/** The variables a component cannot run without, checked after parsing. */
export function requireVars(env: Env, names: Array<keyof Env>, component: string): void {
  const missing = names.filter((n) => env[n] === undefined);
  if (missing.length) throw new ConfigError(missing.map((n) => `${n}: required by the ${component}`));
}

export function webhookSecrets(env: Env): string[] {
  return (env.PAYMENT_PROVIDER_WEBHOOK_SECRET ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** The env-configured provider endpoint id for a workload (GPU_PROVIDER_ENDPOINT_<WORKLOAD>). */
export function endpointFromEnv(env: Env, workload: "asr" | "tts" | "render"): string | undefined {
  return {
    asr: env.GPU_PROVIDER_ENDPOINT_ASR,
    tts: env.GPU_PROVIDER_ENDPOINT_TTS,
    render: env.GPU_PROVIDER_ENDPOINT_RENDER,
  }[workload];
}

/** The provider-side name convention of the spec: <prefix>-<workload>-<env>. */
export function conventionalEndpointName(env: Env, workload: string): string {
  return `${env.MEDIA_ENDPOINT_PREFIX}-${workload}-${env.MEDIA_ENV}`;
}

/**
 * Where the sidecar keeps PaymentEvents and BillingAccounts, and so where admission looks them
 * up: WATCH_NAMESPACE, else the pod's own (downward API POD_NAMESPACE), else "default".
 */
export function stateNamespace(env: Pick<Env, "WATCH_NAMESPACE">): string {
  return env.WATCH_NAMESPACE ?? process.env.POD_NAMESPACE ?? "default";
}
