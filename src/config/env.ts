// Configuration from the environment, parsed once at start by zod. A bad value stops the process
// with a message naming the variable; values themselves are never echoed (some are secrets).
// One piece: one schema for every variable, so each is defined, defaulted and checked once.
import { DEFAULT_INVOICE_GRACE_SECONDS, MAX_INVOICE_GRACE_SECONDS } from "../billing/invoice-grace.js";
import type { Logger } from "pino";
import { z } from "zod";
import { CALLBACK_SECRET_MIN_BYTES } from "../callback/token.js";
import { PlansSchema } from "../mediajob/plans.js";
import { UNCONFIRMED_SUBMISSION_POLICIES } from "../mediajob/unconfirmed.js";
import { DEFAULT_METER_EVENT_NAME } from "../mediajob/usage.js";
import { parseRateLimits } from "./rate-limits.js";
import {
  SecretFileError,
  rememberSecretFiles,
  watchSecretFiles,
  withSecretFiles,
  type SecretFilesWatch,
} from "./secret-files.js";
import { trustedProxiesProblem } from "./trusted-proxies.js";
import { METER_EVENT_NAME, parseEventNames } from "./meter-event-names.js";

const bool = z
  .enum(["true", "false", "1", "0", "yes", "no"])
  .transform((v) => v === "true" || v === "1" || v === "yes");
const seconds = (def: number, min = 1) => z.coerce.number().int().min(min).default(def);
const url = z.url({ protocol: /^https?$/ }).transform((u) => u.replace(/\/+$/, ""));
const optionalText = z
  .string()
  .optional()
  .transform((v) => (v && v.trim() !== "" ? v.trim() : undefined));

/** Every variable the product reads. The first six are the providers' keys and endpoint ids. */
export const EnvSchema = z.object({
  GPU_PROVIDER_API_KEY: optionalText,
  GPU_PROVIDER_ENDPOINT_ASR: optionalText,
  GPU_PROVIDER_ENDPOINT_TTS: optionalText,
  GPU_PROVIDER_ENDPOINT_RENDER: optionalText,
  PAYMENT_PROVIDER_API_KEY: optionalText,
  /** One signing secret, or several separated by commas while a rotation is under way. */
  PAYMENT_PROVIDER_WEBHOOK_SECRET: optionalText,
  /** false: the sidecar runs without a signing secret, for installations that take no payment events. */
  PAYMENT_WEBHOOKS_ENABLED: bool.default(true),

  /** {gpu_api_url} in docs/design.md: the job API (/v2/...). */
  GPU_PROVIDER_API_URL: url.default("https://api.runpod.ai"),
  /**
   * Host of the management API (REST v2 under /v2/serverless, GraphQL under /graphql). Default:
   * RunPod's management host when the job API is RunPod's, else GPU_PROVIDER_API_URL (a simulator
   * or proxy serving both). See managementUrl().
   */
  GPU_PROVIDER_MANAGEMENT_URL: url.optional(),
  /** Which management API manages endpoints: RunPod's REST API v2 (default) or its deprecated GraphQL API. */
  GPU_PROVIDER_MANAGEMENT_API: z.enum(["rest", "graphql"]).default("rest"),
  /** {payment_api_url} in docs/design.md. */
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
  /**
   * The secret CALLBACK_SECRET replaced, during a rotation: URLs it signed stay valid until they
   * expire. Read by the sidecar only (the controller signs with CALLBACK_SECRET).
   */
  CALLBACK_SECRET_PREVIOUS: optionalText,
  /** Deadline of every Kubernetes API call (a lease renewal's own is shorter). */
  KUBE_API_TIMEOUT_SECONDS: seconds(30),
  /** The reconciliation tick: every object is reconciled at least this often. */
  RESYNC_INTERVAL_SECONDS: seconds(30),
  /**
   * How often the provider's endpoint settings are listed to find drift (workers changed at the
   * provider behind our back). A spec change, or a change we made, lists them at once.
   */
  PROVIDER_DRIFT_CHECK_SECONDS: seconds(120),
  /** How long a job may stay Processing before the provider is asked (per job: spec.timeoutSeconds). */
  JOB_TIMEOUT_SECONDS: seconds(600),
  /**
   * The start deadline of jobs that set no spec.startDeadlineSeconds: how long a submitted job may
   * wait in the provider's queue before it is cancelled there. 0: none.
   */
  JOB_START_DEADLINE_SECONDS: z.coerce
    .number()
    .int()
    .min(0)
    .max(7 * 24 * 3600)
    .default(0),
  /**
   * How long after a job's timeout an unconfirmed submission (its /run answer was lost) still waits
   * for its callback before it is submitted again. At least the provider's callback retry window
   * (RunPod: 3 attempts, 10 s apart).
   */
  CALLBACK_CONFIRMATION_SECONDS: seconds(60),
  /**
   * What becomes of a submission still unconfirmed at that deadline (docs/controller.md, "At most
   * once"): `fail` ends the job Failed (SubmissionUnconfirmed), never running it twice; `resubmit`
   * submits it again, counted, and a job whose first submission did run then runs twice.
   */
  UNCONFIRMED_SUBMISSION_POLICY: z
    .enum(UNCONFIRMED_SUBMISSION_POLICIES, {
      error: "must be fail (at most once, the default) or resubmit (at least once; a job may run twice)",
    })
    .default("fail"),
  /**
   * The in-flight window per GpuEndpoint (docs/design.md, "Fair share"): at most that many jobs of
   * an endpoint are at the provider at once, the others wait Pending (Queued) and go by weighted
   * fair share between accounts. false: every job that may go is submitted at once.
   */
  FAIR_SHARE_WINDOW: bool.default(true),
  /** A job's typical run, seconds, for the window's headroom until the controller has seen some. */
  FAIR_SHARE_JOB_SECONDS: seconds(30),
  /** How long, at worst, from a slot freeing to the next job's submission, seconds (the window's headroom). */
  FAIR_SHARE_TICK_SECONDS: seconds(2),
  /**
   * Per-account weights of the fair share, `account=weight` comma-separated (e.g. `cus_A=2,cus_B=1`);
   * an account not listed has weight 1.
   */
  FAIR_SHARE_WEIGHTS: optionalText.superRefine((v, ctx) => {
    const problem = v === undefined ? undefined : weightsProblem(v);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  }),
  /**
   * How long a deleted MediaJob keeps trying to cancel its job at a provider that fails, before it
   * is let go without the cancel (a dead provider must not keep objects forever).
   */
  DELETE_CANCEL_TIMEOUT_SECONDS: seconds(300),
  /**
   * How long a deleted MediaJob whose usage is not yet reported to the payment provider waits for
   * the report (metering on), before it goes with a Warning naming the seconds lost. 0: no wait.
   */
  DELETE_USAGE_TIMEOUT_SECONDS: seconds(3600, 0),
  /**
   * Plans that cap an account's spend, as JSON keyed by price id (docs/design.md, "Usage and
   * plans"): `{"price_...": {"gpuSecondsPerPeriod": 3600, "maxConcurrentJobs": 2,
   * "maxExecutionTimeoutMs": 600000}}`. Empty or `{}`: no plans, no limits.
   */
  MEDIA_PLANS: z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v.trim() === "") return {};
      let json: unknown;
      try {
        json = JSON.parse(v);
      } catch {
        ctx.addIssue({ code: "custom", message: "must be a JSON object of plans keyed by price id" });
        return z.NEVER;
      }
      const plans = PlansSchema.safeParse(json);
      if (plans.success) return plans.data;
      const where = plans.error.issues.map((i) => `${i.path.join(".") || "plans"}: ${i.message}`);
      ctx.addIssue({ code: "custom", message: `invalid plans (${where.join("; ").slice(0, 512)})` });
      return z.NEVER;
    }),
  /**
   * How long a cancelled job may keep running at the provider (still billed) before a Warning
   * Event and the jobs-running-after-cancel gauge say so.
   */
  CANCEL_FOLLOW_WARNING_SECONDS: seconds(120),
  /** Namespace to watch; empty means all namespaces. */
  WATCH_NAMESPACE: optionalText,
  MAX_CONCURRENT_RECONCILES: z.coerce.number().int().min(1).max(256).default(8),
  LEADER_ELECTION: bool.default(true),
  LEADER_ELECTION_NAMESPACE: z.string().default("default"),
  LEADER_ELECTION_ID: z.string().default("media-orchestrator-controller"),
  /** A follower takes over when the leader has not renewed the Lease for this long. */
  LEADER_ELECTION_LEASE_DURATION_SECONDS: seconds(15),
  /** The leader stops leading when it could not renew for this long (less than the lease duration). */
  LEADER_ELECTION_RENEW_DEADLINE_SECONDS: seconds(10),
  /** How often the leader renews and candidates try to acquire. */
  LEADER_ELECTION_RETRY_PERIOD_SECONDS: seconds(2),
  /** Identity in the Lease; defaults to the pod name (HOSTNAME) plus a random suffix. */
  POD_NAME: optionalText,
  WEBHOOKS_HOST: z.string().default("0.0.0.0"),
  WEBHOOKS_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** Port of the controller's own /healthz, /readyz and /metrics. */
  CONTROLLER_METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(8081),
  WEBHOOK_TOLERANCE_SECONDS: seconds(300),
  /**
   * The proxies (ingress, load balancer) in front of the sidecar whose X-Forwarded-For it believes:
   * addresses or CIDRs, comma-separated. Empty: the peer address is the source (rate limits of
   * failed checks are per source; behind an unlisted ingress every sender shares one source).
   * Nothing wider than a private range: 0.0.0.0/0, ::/0 and the like are refused (ratelimit.ts).
   */
  WEBHOOKS_TRUSTED_PROXIES: optionalText.superRefine((v, ctx) => {
    const problem = v === undefined ? undefined : trustedProxiesProblem(v);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  }),
  /** Rate limits, `name=rate/burst` comma-separated (docs/webhooks.md); unnamed ones keep defaults. */
  WEBHOOKS_RATE_LIMITS: optionalText.refine((v) => {
    try {
      parseRateLimits(v);
      return true;
    } catch {
      return false;
    }
  }, "must be name=rate/burst entries (payment, callbackGlobal, callbackPerJob, failuresPerSource)"),
  /** Open connections to the sidecar, all together; beyond it new ones are closed at once. */
  WEBHOOKS_MAX_CONNECTIONS: z.coerce.number().int().min(1).default(512),
  /**
   * Open connections from one peer address (IPv6: one /64); the trusted proxies are not counted,
   * every sender behind them shares their addresses. Half of WEBHOOKS_MAX_CONNECTIONS: a provider
   * that delivers a burst of callbacks from one address, each on its own connection, still gets
   * in, while one address cannot take every connection (what an unverified sender can hold is
   * bounded by the headers and request timeouts and the unverified in-flight caps).
   */
  WEBHOOKS_MAX_CONNECTIONS_PER_SOURCE: z.coerce.number().int().min(1).default(256),
  /** A request's headers must have arrived this long after its first byte (else 408, closed). */
  WEBHOOKS_HEADERS_TIMEOUT_SECONDS: seconds(10),
  /** A whole request, headers and body, must have arrived this long after its first byte (else 408). */
  WEBHOOKS_REQUEST_TIMEOUT_SECONDS: seconds(30),
  /** Payment deliveries of one source in flight before their signature is checked (429 beyond). */
  WEBHOOKS_UNVERIFIED_IN_FLIGHT_PER_SOURCE: z.coerce.number().int().min(1).default(8),
  /** Payment deliveries of all sources in flight before their signature is checked (429 beyond). */
  WEBHOOKS_UNVERIFIED_IN_FLIGHT: z.coerce.number().int().min(1).default(64),
  /** The payment route's body limit, in KiB (413 above it). */
  WEBHOOKS_PAYMENT_BODY_LIMIT_KIB: z.coerce
    .number()
    .int()
    .min(1)
    .max(16 * 1024)
    .default(256),
  /** Finished payment event ids each sidecar replica remembers (replays of them cost no I/O). */
  WEBHOOKS_REPLAY_MEMORY: z.coerce.number().int().min(0).default(100_000),
  /** PaymentEvents are kept this long (longer than the provider's 3-day retry window). */
  PAYMENT_EVENT_RETENTION_HOURS: seconds(24 * 7),
  /**
   * Whether the controller reports billed usage to the payment provider's meters (docs/design.md,
   * "Usage and plans"). Default: on when PAYMENT_PROVIDER_API_KEY is set, as the rest of payments.
   */
  USAGE_METERING: bool.optional(),
  /**
   * Every MediaJob must bill an account (docs/design.md, "Tenancy"): one whose namespace is bound
   * to none (or to several, naming none) is refused. Default: on when plans or metering are.
   */
  TENANCY_REQUIRE_ACCOUNT: bool.optional(),
  /** Which of the provider's times are billed: `execution` (the default) or `executionAndDelay`. */
  USAGE_BILLED_TIME: z.enum(["execution", "executionAndDelay"]).default("execution"),
  /** `executionAndDelay` bills queue wait: refused unless this says it is meant (src/config/usage.ts). */
  USAGE_QUEUE_WAIT_BILLING_ACKNOWLEDGED: bool.default(false),
  /** Seconds billed at least for a job attempt with any billable time. */
  USAGE_MINIMUM_SECONDS: z.coerce.number().int().min(0).max(86_400).default(0),
  /** Whether FAILED and TIMED_OUT attempts are billed (the GPU provider charges them either way). */
  USAGE_BILL_FAILED: bool.default(true),
  /** The meter event name of workloads without their own in USAGE_METER_EVENT_NAMES. */
  USAGE_METER_EVENT_NAME: z
    .string()
    .regex(METER_EVENT_NAME, "must be 1-100 letters, digits, '_', '-', '.' or ':'")
    .default(DEFAULT_METER_EVENT_NAME),
  /** Meter event names per workload, `workload=event_name` comma-separated (e.g. `render=render_seconds`). */
  USAGE_METER_EVENT_NAMES: optionalText.refine(
    (v) => v === undefined || parseEventNames(v) !== undefined,
    "must be workload=event_name entries, comma-separated",
  ),
  /**
   * The meter event name of the worker-cost rule: each account's allocated share of the provider's
   * bill, micro-USD per settled hourly bucket (src/billing/worker-cost.ts). Unset: not metered.
   */
  USAGE_WORKER_COST_METER_EVENT_NAME: z
    .string()
    .regex(METER_EVENT_NAME, "must be 1-100 letters, digits, '_', '-', '.' or ':'")
    .optional(),
  /** How often the leader reads the GPU provider's billing history and allocates it to accounts. */
  COST_RECONCILE_INTERVAL_SECONDS: seconds(300),
  /** How long after an hourly bucket ends its allocation is settled (counted once, for good). */
  COST_SETTLE_AFTER_SECONDS: seconds(3_600, 0),
  /** What a metered GPU second is charged, micro-USD: with it, each account's recovery ratio. */
  COST_PRICE_PER_SECOND_MICROS: z.coerce.number().int().min(1).optional(),
  /** How often the usage reporter looks for unreported usage (a job's end also wakes it). */
  USAGE_REPORT_INTERVAL_SECONDS: seconds(10),
  /**
   * How long the run's finalizer of a finished job waits for its usage report before the usage
   * report's finalizer takes its place (docs/design.md, "Deletion and usage"). 0: no wait.
   */
  USAGE_SETTLE_WAIT_SECONDS: seconds(30, 0),
  /** The payment provider's invoice finalization grace period (Stripe: 1 h by default, up to 72 h). */
  USAGE_INVOICE_GRACE_SECONDS: z.coerce
    .number()
    .int()
    .min(0)
    .max(MAX_INVOICE_GRACE_SECONDS)
    .default(DEFAULT_INVOICE_GRACE_SECONDS),
  /**
   * Object storage for media (docs/design.md, "Media and storage"): an S3-compatible bucket. Set
   * STORAGE_BUCKET to turn it on; unset, the product keeps media out of its hands (inline JSON only).
   */
  STORAGE_BUCKET: optionalText.refine(
    (v) => v === undefined || /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(v),
    "must be an S3 bucket name: 3-63 lowercase letters, digits, '.' and '-'",
  ),
  /** The store's URL; default AWS S3's regional endpoint (https://s3.<region>.amazonaws.com). */
  STORAGE_ENDPOINT: url.optional(),
  /** The bucket's region (SigV4 signs it into every request and URL). */
  STORAGE_REGION: z
    .string()
    .regex(/^[a-z0-9-]{2,32}$/, "must be a region name such as us-east-1")
    .default("us-east-1"),
  /** path: <endpoint>/<bucket>/<key>; virtual: <bucket>.<endpoint host>/<key>. Default: virtual on AWS. */
  STORAGE_ADDRESSING: z.enum(["path", "virtual"]).optional(),
  /**
   * Where the controller's storage credentials come from: `keys` (STORAGE_ACCESS_KEY_ID and
   * STORAGE_SECRET_ACCESS_KEY, a mounted Secret's files) or `pod` (the pod's cloud identity: EKS
   * Pod Identity, else IRSA's web identity token). Default: keys when they are set, else pod.
   */
  STORAGE_CREDENTIALS: z.enum(["keys", "pod"]).optional(),
  /** How often the leader sweeps the bucket for objects no job owns. */
  STORAGE_SWEEP_INTERVAL_SECONDS: seconds(3_600),
  /** How old an object of a job the cache does not show must be before the sweep deletes it. */
  STORAGE_ORPHAN_MIN_AGE_SECONDS: seconds(3_600, 0),
  /** How long a stage cache entry keeps its outputs reusable (and stored), from when it was written. */
  STORAGE_CACHE_TTL_SECONDS: seconds(7 * 86_400, 0),
  /**
   * Outputs a worker leaves behind a URL of its own are copied into the store (docs/design.md,
   * "Outputs kept before the provider forgets them"): the hosts the copy may fetch from (comma-
   * separated, `.suffix` for a domain; empty: any public https host), whether plain http and
   * private, loopback and link-local addresses are allowed (tests and dev only), the largest
   * output kept and the longest one copy may take.
   */
  STORAGE_KEEP_ALLOWED_HOSTS: optionalText,
  STORAGE_KEEP_ALLOW_PRIVATE: bool.default(false),
  /** S3's largest single PUT (5 GiB) by default. */
  STORAGE_KEEP_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .max(5 * 1024 ** 3)
    .default(5 * 1024 ** 3),
  STORAGE_KEEP_TIMEOUT_SECONDS: seconds(900),
  STORAGE_ACCESS_KEY_ID: optionalText,
  STORAGE_SECRET_ACCESS_KEY: optionalText,
  /** A temporary session's token, with temporary keys. */
  STORAGE_SESSION_TOKEN: optionalText,
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /**
   * A directory of secret files named after the variables they supply (GPU_PROVIDER_API_KEY, ...):
   * a mounted Kubernetes Secret. <VARIABLE>_FILE names one file. See secret-files.ts.
   */
  SECRETS_DIR: optionalText,
  /** How often the secret files are re-read, so a rotated secret takes effect without a restart. */
  SECRET_FILES_RELOAD_SECONDS: seconds(10),
});

export type Env = z.output<typeof EnvSchema>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

/** Parses the environment. Messages name the variable and the rule, never the value. */
export function parseEnv(source: NodeJS.ProcessEnv = process.env): Env {
  let env: NodeJS.ProcessEnv;
  let files: Map<string, string>;
  try {
    ({ env, files } = withSecretFiles(source, Object.keys(EnvSchema.shape)));
  } catch (err) {
    if (err instanceof SecretFileError) throw new ConfigError(err.problems);
    throw err;
  }
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
  const le = res.data;
  // As client-go requires: otherwise a follower could take over while the leader still reconciles.
  if (le.LEADER_ELECTION_LEASE_DURATION_SECONDS <= le.LEADER_ELECTION_RENEW_DEADLINE_SECONDS)
    throw new ConfigError([
      "LEADER_ELECTION_LEASE_DURATION_SECONDS: must be greater than LEADER_ELECTION_RENEW_DEADLINE_SECONDS",
    ]);
  if (le.LEADER_ELECTION_RENEW_DEADLINE_SECONDS <= le.LEADER_ELECTION_RETRY_PERIOD_SECONDS)
    throw new ConfigError([
      "LEADER_ELECTION_RENEW_DEADLINE_SECONDS: must be greater than LEADER_ELECTION_RETRY_PERIOD_SECONDS",
    ]);
  rememberSecretFiles(res.data, files);
  return res.data;
}

/**
 * Keeps the secrets of `env` that came from files (SECRETS_DIR, <VARIABLE>_FILE) equal to their
 * files, re-read every SECRET_FILES_RELOAD_SECONDS. A new value is checked as parseEnv checks it;
 * an empty or invalid file keeps the value in use.
 */
export function watchEnvSecretFiles(env: Env, log: Logger): SecretFilesWatch {
  return watchSecretFiles(env, {
    intervalMs: env.SECRET_FILES_RELOAD_SECONDS * 1000,
    log,
    parse: (name, text) => {
      const schema = EnvSchema.shape[name as keyof typeof EnvSchema.shape];
      const res = schema.safeParse(text === "" ? undefined : text);
      if (!res.success)
        return { ok: false, problem: res.error.issues[0]?.message.replace(/received .*/i, "") ?? "invalid" };
      if (res.data === undefined) return { ok: false, problem: "empty" };
      // As at start (requireStrongCallbackSecrets): a rotation cannot bring in a weak callback key.
      if (
        (name === "CALLBACK_SECRET" || name === "CALLBACK_SECRET_PREVIOUS") &&
        Buffer.byteLength(text, "utf8") < CALLBACK_SECRET_MIN_BYTES
      )
        return { ok: false, problem: `must be at least ${CALLBACK_SECRET_MIN_BYTES} bytes` };
      return { ok: true, value: res.data };
    },
  });
}

/** The variables a component cannot run without, checked after parsing. */
export function requireVars(env: Env, names: Array<keyof Env>, component: string): void {
  const missing = names.filter((n) => env[n] === undefined);
  if (missing.length) throw new ConfigError(missing.map((n) => `${n}: required by the ${component}`));
}

/**
 * What the webhooks sidecar cannot run without. A sidecar without a signing secret would answer
 * every payment webhook 400 and look healthy, so it refuses to start unless payment webhooks are
 * switched off on purpose.
 */
export function requireSidecarVars(env: Env): void {
  requireVars(env, ["CALLBACK_SECRET", "GPU_PROVIDER_API_KEY"], "webhooks sidecar");
  requireStrongCallbackSecrets(env, "webhooks sidecar");
  if (env.PAYMENT_WEBHOOKS_ENABLED && webhookSecrets(env).length === 0)
    throw new ConfigError([
      "PAYMENT_PROVIDER_WEBHOOK_SECRET: required by the webhooks sidecar (set PAYMENT_WEBHOOKS_ENABLED=false to run without payment webhooks)",
    ]);
}

/**
 * CALLBACK_SECRET (and CALLBACK_SECRET_PREVIOUS) keys the HMAC of every callback URL: shorter
 * than 32 bytes, it is easier to guess than the token it signs. Checked at start by both
 * components that read it; the message names the variable, never the value.
 */
export function requireStrongCallbackSecrets(env: Env, component: string): void {
  const weak = (["CALLBACK_SECRET", "CALLBACK_SECRET_PREVIOUS"] as const).filter(
    (n) => env[n] !== undefined && Buffer.byteLength(env[n], "utf8") < CALLBACK_SECRET_MIN_BYTES,
  );
  if (weak.length)
    throw new ConfigError(
      weak.map(
        (n) =>
          `${n}: must be at least ${CALLBACK_SECRET_MIN_BYTES} bytes for the ${component} (e.g. openssl rand -base64 48)`,
      ),
    );
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

/** The provider-side name convention (docs/design.md, GpuEndpoint): <prefix>-<workload>-<env>. */
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

/** RunPod's job API host and the host that serves its management APIs (REST v2 and GraphQL). */
const RUNPOD_JOB_API_URL = "https://api.runpod.ai";
const RUNPOD_MANAGEMENT_URL = "https://api.runpod.io";

/** GPU_PROVIDER_MANAGEMENT_URL, else RunPod's management host for RunPod's job API, else the job API's URL. */
export function managementUrl(
  env: Pick<Env, "GPU_PROVIDER_API_URL" | "GPU_PROVIDER_MANAGEMENT_URL">,
): string {
  if (env.GPU_PROVIDER_MANAGEMENT_URL !== undefined) return env.GPU_PROVIDER_MANAGEMENT_URL;
  return env.GPU_PROVIDER_API_URL === RUNPOD_JOB_API_URL ? RUNPOD_MANAGEMENT_URL : env.GPU_PROVIDER_API_URL;
}

/** FAIR_SHARE_WEIGHTS as a map: account -> weight. */
export function fairShareWeights(env: Pick<Env, "FAIR_SHARE_WEIGHTS">): Map<string, number> {
  const weights = new Map<string, number>();
  for (const part of (env.FAIR_SHARE_WEIGHTS ?? "").split(",")) {
    const [account, weight] = part.split("=").map((x) => x.trim());
    if (account && weight) weights.set(account, Number(weight));
  }
  return weights;
}

function weightsProblem(v: string): string | undefined {
  for (const part of v.split(",")) {
    if (part.trim() === "") continue;
    const [account, weight, extra] = part.split("=").map((x) => x.trim());
    const w = Number(weight);
    if (!account || extra !== undefined || !Number.isFinite(w) || w <= 0 || w > 1000)
      return `"${part.trim()}": expected account=weight, a weight above 0 and at most 1000`;
  }
  return undefined;
}
