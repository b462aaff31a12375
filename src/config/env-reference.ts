// What each variable of the environment schema (env.ts) is for, and which process reads it: the
// source of the configuration table in docs/configuration.md (scripts/config-table.ts writes it,
// test/docs/configuration.test.ts fails when they differ). Typed by the schema, so a variable
// added to it without an entry here does not compile. Defaults come from the schema itself;
// `default` here only words one the schema computes.
// One piece: one entry per variable in a single object typed by the whole schema, which is what
// makes a missing entry a compile error; split by topic, each part would need a check of its own.
import type { EnvSchema } from "./env.js";

export interface EnvReference {
  /** The processes that read it (kubectl media reads the same variables from the shell). */
  readBy: Array<"controller" | "sidecar" | "kubectl media">;
  meaning: string;
  /** Required, or a computed default, in words; else the schema's default is shown. */
  default?: string;
}

export const ENV_REFERENCE: Record<keyof typeof EnvSchema.shape, EnvReference> = {
  GPU_PROVIDER_API_KEY: {
    readBy: ["controller", "sidecar", "kubectl media"],
    default: "required by the controller and the sidecar",
    meaning:
      "the GPU provider's key, sent as a bearer credential; the sidecar confirms every GPU callback with the provider's status API",
  },
  GPU_PROVIDER_ENDPOINT_ASR: {
    readBy: ["controller", "kubectl media"],
    meaning: "the provider endpoint id of the asr workload; else the endpoint named `<prefix>-asr-<env>`",
  },
  GPU_PROVIDER_ENDPOINT_TTS: {
    readBy: ["controller", "kubectl media"],
    meaning: "the provider endpoint id of the tts workload; else the endpoint named `<prefix>-tts-<env>`",
  },
  GPU_PROVIDER_ENDPOINT_RENDER: {
    readBy: ["controller", "kubectl media"],
    meaning:
      "the provider endpoint id of the render workload; else the endpoint named `<prefix>-render-<env>`",
  },
  PAYMENT_PROVIDER_API_KEY: {
    readBy: ["controller", "sidecar", "kubectl media"],
    meaning:
      "the payment provider's key: redelivery (sidecar, `kubectl media redeliver`) and the controller's meter events",
  },
  PAYMENT_PROVIDER_WEBHOOK_SECRET: {
    readBy: ["sidecar", "kubectl media"],
    default: "required by the sidecar unless `PAYMENT_WEBHOOKS_ENABLED=false`",
    meaning: "the payment webhooks' signing secret; several, comma-separated, during a rotation",
  },
  PAYMENT_WEBHOOKS_ENABLED: {
    readBy: ["sidecar"],
    meaning:
      "`false` lets the sidecar start without a signing secret, where no payment events are taken (the payment route then answers 400)",
  },
  GPU_PROVIDER_API_URL: {
    readBy: ["controller", "sidecar", "kubectl media"],
    meaning: "`{gpu_api_url}` in [design](design.md#gpu-provider-apis): the provider's job API",
  },
  GPU_PROVIDER_MANAGEMENT_URL: {
    readBy: ["controller", "kubectl media"],
    default: "`https://api.runpod.io` with RunPod's job API, else `GPU_PROVIDER_API_URL`",
    meaning: "the host of the management APIs (REST v2 under `/v2/serverless`, GraphQL under `/graphql`)",
  },
  GPU_PROVIDER_MANAGEMENT_API: {
    readBy: ["controller", "kubectl media"],
    meaning:
      "how GpuEndpoints are managed: `rest` (RunPod's REST API v2) or `graphql` (deprecated by RunPod) ([provider](provider.md))",
  },
  PAYMENT_PROVIDER_API_URL: {
    readBy: ["controller", "sidecar", "kubectl media"],
    meaning: "`{payment_api_url}`: the payment provider's API (redelivery, meter events)",
  },
  MEDIA_ENV: {
    readBy: ["controller", "kubectl media"],
    meaning: "the `<env>` of the provider endpoint names `<prefix>-<workload>-<env>`",
  },
  MEDIA_ENDPOINT_PREFIX: {
    readBy: ["controller", "kubectl media"],
    meaning: "the `<prefix>` of the provider endpoint names",
  },
  CALLBACK_BASE_URL: {
    readBy: ["controller"],
    default: "required by the controller",
    meaning:
      "the sidecar's address as the GPU provider reaches it; callbacks go to `<this>/reports/gpu_provider`",
  },
  CALLBACK_SECRET: {
    readBy: ["controller", "sidecar", "kubectl media"],
    default: "required by the controller and the sidecar",
    meaning: "the key of the per-job callback tokens (HMAC), at least 32 bytes",
  },
  CALLBACK_SECRET_PREVIOUS: {
    readBy: ["sidecar"],
    meaning:
      "the key `CALLBACK_SECRET` replaced, during a rotation: URLs it signed stay valid until they expire",
  },
  KUBE_API_TIMEOUT_SECONDS: {
    readBy: ["controller", "sidecar"],
    meaning: "the deadline of every Kubernetes API call",
  },
  RESYNC_INTERVAL_SECONDS: {
    readBy: ["controller"],
    meaning: "the reconciliation tick: every object is reconciled at least this often",
  },
  PROVIDER_DRIFT_CHECK_SECONDS: {
    readBy: ["controller"],
    meaning:
      "how often the provider's endpoint settings are listed to restore drift (a GpuEndpoint spec change is carried at once)",
  },
  JOB_TIMEOUT_SECONDS: {
    readBy: ["controller", "kubectl media"],
    meaning: "how long a job may be Processing before the provider is asked (per job: `spec.timeoutSeconds`)",
  },
  JOB_START_DEADLINE_SECONDS: {
    readBy: ["controller"],
    meaning:
      "how long a submitted job may wait in the provider's queue before it is cancelled there and ends `StartDeadlineExceeded` (per job: `spec.startDeadlineSeconds`); 0: none ([design](design.md#deadline))",
  },
  CALLBACK_CONFIRMATION_SECONDS: {
    readBy: ["controller"],
    meaning:
      "how long past its timeout a submission whose `/run` answer was lost waits for its callback before `UNCONFIRMED_SUBMISSION_POLICY` applies",
  },
  UNCONFIRMED_SUBMISSION_POLICY: {
    readBy: ["controller"],
    meaning:
      "`fail` ends such a job `Failed` (`SubmissionUnconfirmed`), so no attempt runs twice; `resubmit` submits it again, counted, and it may run twice ([controller](controller.md#at-most-once-what-is-guaranteed))",
  },
  FAIR_SHARE_WINDOW: {
    readBy: ["controller"],
    meaning:
      "the in-flight window per GpuEndpoint and fair share between accounts ([design](design.md#fair-share)); `false` submits every job that may go at once",
  },
  FAIR_SHARE_JOB_SECONDS: {
    readBy: ["controller"],
    meaning: "a job's typical run until the controller has seen some finish: the window's headroom",
  },
  FAIR_SHARE_TICK_SECONDS: {
    readBy: ["controller"],
    meaning: "the longest from a slot freeing to the next submission, for the window's headroom",
  },
  FAIR_SHARE_WEIGHTS: {
    readBy: ["controller"],
    meaning: "per-account weights, `account=weight,...`; an account not listed weighs 1",
  },
  DELETE_CANCEL_TIMEOUT_SECONDS: {
    readBy: ["controller"],
    meaning: "how long a deleted job keeps trying to cancel at a failing provider before it is let go",
  },
  DELETE_USAGE_TIMEOUT_SECONDS: {
    readBy: ["controller"],
    meaning:
      "how long a deleted job whose usage is not yet reported waits for the report (metering on); `0`: no wait ([design](design.md#deletion-and-usage))",
  },
  MEDIA_PLANS: {
    readBy: ["controller", "kubectl media"],
    default: "none",
    meaning:
      "plans that cap an account's spend, JSON keyed by price id (GPU seconds per period, concurrent jobs, longest execution timeout; [design](design.md#plans))",
  },
  CANCEL_FOLLOW_WARNING_SECONDS: {
    readBy: ["controller"],
    meaning:
      "a cancelled job the provider still runs this long gets a Warning Event with its provider job id ([design](design.md#cancellations))",
  },
  WATCH_NAMESPACE: {
    readBy: ["controller", "sidecar"],
    default: "all namespaces",
    meaning:
      "the namespace watched; also where PaymentEvents and BillingAccounts live (else `POD_NAMESPACE`)",
  },
  MAX_CONCURRENT_RECONCILES: { readBy: ["controller"], meaning: "MediaJob workers" },
  LEADER_ELECTION: {
    readBy: ["controller", "sidecar"],
    meaning: "whether the controller takes a Lease before leading",
  },
  LEADER_ELECTION_NAMESPACE: { readBy: ["controller", "sidecar"], meaning: "the Lease's namespace" },
  LEADER_ELECTION_ID: { readBy: ["controller", "sidecar"], meaning: "the Lease's name" },
  LEADER_ELECTION_LEASE_DURATION_SECONDS: {
    readBy: ["controller"],
    meaning: "a follower takes over when the leader has not renewed the Lease for this long",
  },
  LEADER_ELECTION_RENEW_DEADLINE_SECONDS: {
    readBy: ["controller"],
    meaning: "the leader stops leading when it could not renew for this long",
  },
  LEADER_ELECTION_RETRY_PERIOD_SECONDS: {
    readBy: ["controller"],
    meaning: "how often the leader renews and candidates try to acquire",
  },
  POD_NAME: {
    readBy: ["controller", "sidecar"],
    default: "`HOSTNAME`",
    meaning: "the identity in the Lease and in Events (a random suffix is added)",
  },
  WEBHOOKS_HOST: { readBy: ["sidecar"], meaning: "the sidecar's listen address" },
  WEBHOOKS_PORT: { readBy: ["sidecar"], meaning: "the sidecar's port (webhooks, probes, `/metrics`)" },
  CONTROLLER_METRICS_PORT: {
    readBy: ["controller"],
    meaning: "the controller's `/healthz`, `/readyz` and `/metrics`",
  },
  WEBHOOK_TOLERANCE_SECONDS: {
    readBy: ["sidecar", "kubectl media"],
    meaning: "the payment signature's timestamp tolerance, both directions",
  },
  WEBHOOKS_TRUSTED_PROXIES: {
    readBy: ["sidecar"],
    default: "none",
    meaning:
      "the proxies in front of the sidecar whose `X-Forwarded-For` it believes: addresses or CIDRs, comma-separated ([webhooks](webhooks.md))",
  },
  WEBHOOKS_RATE_LIMITS: {
    readBy: ["sidecar"],
    default: "built in",
    meaning:
      "rate limits, `name=rate/burst` comma-separated ([webhooks](webhooks.md)); unnamed ones keep their defaults",
  },
  WEBHOOKS_MAX_CONNECTIONS: {
    readBy: ["sidecar"],
    meaning: "open connections to the sidecar, all together; beyond it new ones are closed at once",
  },
  WEBHOOKS_MAX_CONNECTIONS_PER_SOURCE: {
    readBy: ["sidecar"],
    meaning: "open connections from one peer address (IPv6: one /64)",
  },
  WEBHOOKS_HEADERS_TIMEOUT_SECONDS: {
    readBy: ["sidecar"],
    meaning: "a request's headers must have arrived this long after its first byte (else 408)",
  },
  WEBHOOKS_REQUEST_TIMEOUT_SECONDS: {
    readBy: ["sidecar"],
    meaning: "a whole request must have arrived this long after its first byte (else 408)",
  },
  WEBHOOKS_UNVERIFIED_IN_FLIGHT_PER_SOURCE: {
    readBy: ["sidecar"],
    meaning: "payment deliveries of one source in flight before their signature is checked (429 beyond)",
  },
  WEBHOOKS_UNVERIFIED_IN_FLIGHT: {
    readBy: ["sidecar"],
    meaning: "payment deliveries of all sources in flight before their signature is checked (429 beyond)",
  },
  WEBHOOKS_PAYMENT_BODY_LIMIT_KIB: {
    readBy: ["sidecar"],
    meaning: "the payment route's body limit (413 above it)",
  },
  WEBHOOKS_REPLAY_MEMORY: {
    readBy: ["sidecar"],
    meaning:
      "finished payment event ids each replica remembers (replays of them cost no I/O); `0` turns it off",
  },
  PAYMENT_EVENT_RETENTION_HOURS: {
    readBy: ["sidecar", "kubectl media"],
    meaning: "PaymentEvents older than this are garbage-collected (the provider retries for 3 days)",
  },
  USAGE_METERING: {
    readBy: ["controller"],
    default: "on when `PAYMENT_PROVIDER_API_KEY` is set",
    meaning:
      "report each job attempt's billed GPU seconds to the payment provider's meters ([design](design.md#usage-and-plans))",
  },
  TENANCY_REQUIRE_ACCOUNT: {
    readBy: ["controller"],
    default: "on when plans (`MEDIA_PLANS`) or metering are configured",
    meaning:
      "every MediaJob must bill an account: one whose namespace is bound to none, or to several while it names none, is refused ([design](design.md#tenancy))",
  },
  USAGE_BILLED_TIME: {
    readBy: ["controller"],
    meaning: "which of the provider's times are billed: `execution` or `executionAndDelay`",
  },
  USAGE_QUEUE_WAIT_BILLING_ACKNOWLEDGED: {
    readBy: ["controller"],
    meaning:
      "`true` lets `USAGE_BILLED_TIME=executionAndDelay` start: queue wait is not the provider's cost and grows with other customers' traffic ([design](design.md#provider-billing-facts))",
  },
  USAGE_MINIMUM_SECONDS: {
    readBy: ["controller"],
    meaning: "seconds billed at least for a job attempt with any billable time",
  },
  USAGE_BILL_FAILED: { readBy: ["controller"], meaning: "whether FAILED and TIMED_OUT attempts are billed" },
  USAGE_METER_EVENT_NAME: {
    readBy: ["controller"],
    meaning: "the meter event name of workloads without their own in `USAGE_METER_EVENT_NAMES`",
  },
  USAGE_METER_EVENT_NAMES: {
    readBy: ["controller"],
    meaning: "meter event names per workload, `workload=event_name` comma-separated",
  },
  USAGE_WORKER_COST_METER_EVENT_NAME: {
    readBy: ["controller"],
    meaning:
      "the meter event name of the worker-cost rule: each account's share of the GPU provider's bill, micro-USD per settled hourly bucket; unset: not metered ([design](design.md#pricing-rules))",
  },
  COST_RECONCILE_INTERVAL_SECONDS: {
    readBy: ["controller"],
    meaning:
      "how often the leader reads the GPU provider's billing history and allocates it to accounts (`status.cost`, [design](design.md#cost-allocation))",
  },
  COST_SETTLE_AFTER_SECONDS: {
    readBy: ["controller"],
    meaning: "how long after an hourly billing bucket ends its allocation is settled: counted once, for good",
  },
  COST_PRICE_PER_SECOND_MICROS: {
    readBy: ["controller"],
    default: "none: no recovery ratio",
    meaning:
      "what a metered GPU second is charged, micro-USD: each account's recovery ratio (its metered seconds times this, over its allocated provider cost) is then a metric and an alert",
  },
  USAGE_REPORT_INTERVAL_SECONDS: {
    readBy: ["controller"],
    meaning:
      "how often the usage loop resyncs: every customer's meter with unreported or uncounted usage is reconciled (a job's end also enqueues its own)",
  },
  USAGE_SETTLE_WAIT_SECONDS: {
    readBy: ["controller"],
    meaning:
      "how long a finished job's own finalizer waits for its usage report before the usage report's finalizer takes its place (metering on); `0`: no wait ([design](design.md#deletion-and-usage))",
  },
  USAGE_INVOICE_GRACE_SECONDS: {
    readBy: ["controller"],
    meaning:
      "the payment provider's invoice finalization grace period (Stripe: 1 h by default, up to 72 h): usage accepted later is marked `afterInvoice` ([design](design.md#usage-after-the-invoice))",
  },
  STORAGE_SWEEP_INTERVAL_SECONDS: {
    readBy: ["controller"],
    meaning:
      "how often the leader sweeps the media bucket: objects of jobs that are gone are deleted, each namespace's use measured ([design](design.md#retention))",
  },
  STORAGE_CACHE_TTL_SECONDS: {
    readBy: ["controller"],
    meaning:
      "how long a stage cache entry keeps its outputs reusable, and stored after their job is gone, from when it was written; 0: the cache keeps nothing past its jobs ([design](design.md#the-stage-cache))",
  },
  STORAGE_ORPHAN_MIN_AGE_SECONDS: {
    readBy: ["controller"],
    meaning: "how old an object of a job the controller does not know must be before the sweep deletes it",
  },
  STORAGE_BUCKET: {
    readBy: ["controller"],
    default: "none: storage off",
    meaning:
      "the S3-compatible bucket that holds media ([design](design.md#media-and-storage)); set, the controller mints presigned URLs per attempt",
  },
  STORAGE_ENDPOINT: {
    readBy: ["controller"],
    default: "`https://s3.<STORAGE_REGION>.amazonaws.com`",
    meaning: "the store's URL (any S3-compatible server)",
  },
  STORAGE_REGION: {
    readBy: ["controller"],
    meaning: "the bucket's region, signed into every request and URL",
  },
  STORAGE_ADDRESSING: {
    readBy: ["controller"],
    default: "`virtual` on AWS S3, else `path`",
    meaning: "`path` (`<endpoint>/<bucket>/<key>`) or `virtual` (`<bucket>.<endpoint host>/<key>`)",
  },
  STORAGE_CREDENTIALS: {
    readBy: ["controller"],
    default: "`keys` when `STORAGE_ACCESS_KEY_ID` is set, else `pod`",
    meaning:
      "`keys`: the access keys below (a Secret's files); `pod`: the pod's cloud identity (EKS Pod Identity, else IRSA's web identity token)",
  },
  STORAGE_KEEP_ALLOWED_HOSTS: {
    readBy: ["controller"],
    default: "none: any public https host",
    meaning:
      "hosts the controller may copy a worker's hosted output from, comma-separated, `.example.com` for a domain ([design](design.md#outputs-kept-before-the-provider-forgets-them))",
  },
  STORAGE_KEEP_ALLOW_PRIVATE: {
    readBy: ["controller"],
    meaning:
      "`true` lets that copy use plain http and private, loopback and link-local addresses: tests and dev only (SSRF)",
  },
  STORAGE_KEEP_MAX_BYTES: {
    readBy: ["controller"],
    meaning:
      "the largest hosted output the controller copies into the store, bytes (at most S3's single PUT, 5 GiB)",
  },
  STORAGE_KEEP_TIMEOUT_SECONDS: {
    readBy: ["controller"],
    meaning:
      "the longest one hosted output's copy may take; a copy cut short is tried again while the provider keeps the result",
  },
  STORAGE_ACCESS_KEY_ID: { readBy: ["controller"], meaning: "the store's access key id (secret file)" },
  STORAGE_SECRET_ACCESS_KEY: {
    readBy: ["controller"],
    meaning: "the store's secret access key (secret file)",
  },
  STORAGE_SESSION_TOKEN: {
    readBy: ["controller"],
    meaning: "a session token that goes with temporary access keys (secret file)",
  },
  LOG_LEVEL: { readBy: ["controller", "sidecar"], meaning: "pino level; secrets and tokens are redacted" },
  SECRETS_DIR: {
    readBy: ["controller", "sidecar", "kubectl media"],
    meaning:
      "a directory of secret files named after the variables they supply (a mounted Secret); `<VARIABLE>_FILE` names one file",
  },
  SECRET_FILES_RELOAD_SECONDS: {
    readBy: ["controller", "sidecar"],
    meaning: "how often the secret files are re-read: a rotated secret takes effect without a restart",
  },
};
