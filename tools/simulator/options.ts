import type { Logger } from "pino";
import { z } from "zod";
import { WORKLOADS } from "./outputs.js";
import { DEFAULT_GPU_PRICES_MICROS } from "./worker-ledger.js";

// The simulator's options, and the zod schemas that check the ones arriving over HTTP or from the
// command line. Durations are simulated milliseconds (multiplied by timeScale) unless a name says
// "real".

const rate = z.number().min(0).max(1);

export const FaultsSchema = z.strictObject({
  /** Probability that a job's callback is never sent (all attempts). */
  dropCallback: rate.optional(),
  /** Probability that a job's callback is sent twice (each copy with its own retries). */
  duplicateCallback: rate.optional(),
  /**
   * Simulated ms between a callback and its duplicate. Default 1000; 0 sends both copies at once,
   * so the second reaches the receiver while the first is still being handled.
   */
  duplicateGapMs: z.number().min(0).optional(),
  /** Extra delay before every callback, simulated ms. */
  delayCallbackMs: z.number().min(0).optional(),
  /** Hold callbacks for a short window and send them in reverse order of their terminal states. */
  reorderCallbacks: z.boolean().optional(),
  /** Probability that one delivery attempt fails without reaching the receiver (then retried). */
  failCallbackDelivery: rate.optional(),
  /** Token bucket on the job API and /graphql, real time; over it: 429 with Retry-After. */
  rateLimit: z.strictObject({ requestsPerSecond: z.number().positive() }).optional(),
  /** Probability that a job API or /graphql request answers 5xx. For /run, half of these accept the job first. */
  serverErrors: rate.optional(),
  /**
   * The next N job API, REST v2 or /graphql requests answer 503 (refused: nothing is accepted), then
   * the provider answers again: a short outage of a known length, for tests of retries that must not
   * depend on timing.
   */
  serverErrorsFirst: z.number().int().min(0).optional(),
  /**
   * Probability that a /run request is accepted (the job is queued and will run) and its answer is
   * then lost: the connection is reset before any response. The client cannot tell it from a job
   * that was never accepted.
   */
  lostRunAnswers: rate.optional(),
  /** Probability that a job ends FAILED instead of COMPLETED. */
  failJob: rate.optional(),
  /**
   * Cancels of running jobs are answered with the job's status and change nothing: the worker runs
   * on (and is billed) until it ends on its own, as RunPod users report of some cancels.
   */
  ignoreCancel: z.boolean().optional(),
  /**
   * RunPod ignores unknown keys on /run, the client's `id` among them, and makes up its own
   * `<uuid>-u1` id, so every submission runs (https://docs.runpod.io/serverless/endpoints/send-requests).
   * That is the default here too. `honourClientId: true` (or `ignoreClientId: false`) makes the
   * simulator deduplicate on the client's `id`: kinder than RunPod, for tests that say why they need it.
   */
  honourClientId: z.boolean().optional(),
  /** Kept for existing scripts: `true` is the default behaviour, `false` is `honourClientId: true`. */
  ignoreClientId: z.boolean().optional(),
  /**
   * Workers crash as they start: past its cold start a worker is unhealthy (RunPod's /health
   * workers.unhealthy) and restarts, taking no job, until the fault is cleared. Jobs stay IN_QUEUE
   * meanwhile though workers exist, as users report of crash-looping workers.
   */
  crashLoopWorkers: z.boolean().optional(),
  /** /graphql answers 410 Gone, as RunPod's GraphQL API will once retired; REST v2 keeps working. */
  graphqlRetired: z.boolean().optional(),
  /**
   * Delay answers by `ms` real milliseconds (probability `rate`, default 1; only the next `first`
   * requests when given): to test client timeouts.
   */
  responseDelay: z
    .strictObject({ ms: z.number().min(0), rate: rate.optional(), first: z.number().int().min(0).optional() })
    .optional(),
  /**
   * Payment API (Billing Meters): probability of a 500 answer. Half fail before any work, half
   * after the work was done (a meter event recorded, its answer a 500). Either way the API began
   * executing: a meter event call's 500 is saved under its Idempotency-Key and replayed to every
   * request with that key for 24 hours, as Stripe does (https://docs.stripe.com/api/idempotent_requests).
   */
  paymentServerErrors: rate.optional(),
  /**
   * The next N payment API requests answer 500 with nothing recorded: an outage of a known length.
   * A meter event call's 500 is saved under its Idempotency-Key as above.
   */
  paymentServerErrorsFirst: z.number().int().min(0).optional(),
  /** Probability that a meter event call (v1 event or v2 batch) is recorded and its answer lost (connection reset). */
  lostMeterEventAnswers: rate.optional(),
  /** Token bucket on the payment API, real time; over it: 429 with Stripe's rate_limit error. */
  paymentRateLimit: z.strictObject({ requestsPerSecond: z.number().positive() }).optional(),
  /**
   * Real ms a meter event call (v1 event or v2 stream batch) takes; a v1 call holds its customer
   * and meter the while: a second call for them meanwhile is refused 429, as Stripe allows one
   * concurrent call per customer and meter.
   */
  meterEventLatencyMs: z.number().min(0).max(60_000).optional(),
});
export type Faults = z.infer<typeof FaultsSchema>;

/** Whether the client's `id` on /run is honoured (deduplicated): only when a test opts in. */
export const honoursClientId = (f: Faults): boolean =>
  f.ignoreClientId !== true && (f.honourClientId === true || f.ignoreClientId === false);

export const EndpointSpecSchema = z.strictObject({
  id: z.string().min(1).optional(),
  name: z.string().min(1),
  workload: z.enum(WORKLOADS as ["asr", "tts", "render"]).optional(),
  workersMin: z.number().int().min(0).optional(),
  workersMax: z.number().int().min(0).optional(),
  /** Seconds, like the provider's field. */
  idleTimeout: z.number().min(0).optional(),
  /** RunPod's autoscaler (scaler.ts). Default QUEUE_DELAY, as on RunPod. */
  scalerType: z.enum(["QUEUE_DELAY", "REQUEST_COUNT"]).optional(),
  /** Seconds of queue delay, or requests per worker. Default 4, as on RunPod. */
  scalerValue: z.number().int().min(1).optional(),
});
export type EndpointSpec = z.infer<typeof EndpointSpecSchema>;

/** A change to an existing endpoint (drift, scale-down) or a new one when `name` is given. */
export const EndpointPatchSchema = EndpointSpecSchema.partial().omit({ id: true });
export type EndpointPatch = z.infer<typeof EndpointPatchSchema>;

export const PaymentWebhookSchema = z.strictObject({ url: z.url(), secret: z.string().min(1) });
export type PaymentWebhook = z.infer<typeof PaymentWebhookSchema>;

export const MeterSpecSchema = z.strictObject({
  id: z
    .string()
    .regex(/^mtr_[A-Za-z0-9_]+$/)
    .optional(),
  event_name: z.string().min(1).max(100),
  display_name: z.string().min(1).max(250).optional(),
  formula: z.enum(["sum", "count", "last"]).optional(),
  /** customer_mapping.event_payload_key (default stripe_customer_id). */
  customer_key: z.string().min(1).max(100).optional(),
  /** value_settings.event_payload_key (default value). */
  value_key: z.string().min(1).max(100).optional(),
  /** Pre-aggregation: only the latest event of each hour or day counts (default none). */
  event_time_window: z.enum(["hour", "day"]).optional(),
});
export type MeterSpec = z.infer<typeof MeterSpecSchema>;

export interface SimulatorOptions {
  /** 0 (default) = a free port; the host is always 127.0.0.1. */
  port?: number;
  /** Accepted GPU provider keys, as `Bearer <key>` or bare (like RunPod). Default ["sim-key"]. */
  apiKeys?: string[];
  /** Keys that authenticate but whose account is suspended: /v2 answers 403, myself answers an error. */
  accountProblemKeys?: string[];
  /** Keys accepted by the payment provider's redeliver call. Default ["sim-payment-key"]. */
  paymentApiKeys?: string[];
  endpoints?: EndpointSpec[];
  /** Multiplies every simulated delay; 0.01 runs the provider 100x faster. Default 1. */
  timeScale?: number;
  /** Seeds every random choice (faults, generated ids, jitter). Default 1. */
  seed?: number;
  /** Worker cold start, simulated ms. Default 2000. */
  coldStartMs?: number;
  /** Job execution, simulated ms (+-20% per job, derived from the seed). Default 3000. */
  executionMs?: number;
  /**
   * Per-second price of one GPU by pool id (gpuIds / gpu.pools), integer micro-USD; merged over
   * the defaults (worker-ledger.ts). The provider bills worker time at the endpoint's first pool.
   */
  gpuPricesMicros?: Record<string, number>;
  /** How long a terminal job stays readable before status answers 404. Default 30 min (RunPod /run). */
  statusRetentionMs?: number;
  /** Gap between callback attempts, simulated ms. Default 10000 (RunPod: 3 attempts, 10 s apart). */
  callbackRetryDelayMs?: number;
  /** Total callback attempts. Default 3. */
  callbackAttempts?: number;
  /** Timeout of one callback attempt, real ms. Default 5000. */
  callbackTimeoutMs?: number;
  faults?: Faults;
  /**
   * How QUEUE_DELAY adds workers (scaler.ts), where RunPod's pages can be read two ways:
   * "perOverdueJob" (default) adds one worker per job waiting past the threshold; "onePerDelay",
   * the earlier documented reading, adds one worker for the first request and then at most one
   * more per threshold period while requests wait past it.
   */
  queueDelayReading?: QueueDelayReading;
  paymentWebhook?: PaymentWebhook;
  /** Billing meters the payment provider has from the start (more: POST /v1/billing/meters). */
  meters?: MeterSpec[];
  logger?: Logger;
}

type QueueDelayReading = "perOverdueJob" | "onePerDelay";

export interface ResolvedOptions {
  port: number;
  queueDelayReading: QueueDelayReading;
  apiKeys: ReadonlySet<string>;
  accountProblemKeys: ReadonlySet<string>;
  paymentApiKeys: ReadonlySet<string>;
  timeScale: number;
  seed: number;
  coldStartMs: number;
  executionMs: number;
  gpuPricesMicros: Readonly<Record<string, number>>;
  statusRetentionMs: number;
  callbackRetryDelayMs: number;
  callbackAttempts: number;
  callbackTimeoutMs: number;
}

export function resolveOptions(opts: SimulatorOptions): ResolvedOptions {
  return {
    port: opts.port ?? 0,
    queueDelayReading: opts.queueDelayReading ?? "perOverdueJob",
    apiKeys: new Set(opts.apiKeys ?? ["sim-key"]),
    accountProblemKeys: new Set(opts.accountProblemKeys ?? []),
    paymentApiKeys: new Set(opts.paymentApiKeys ?? ["sim-payment-key"]),
    timeScale: opts.timeScale ?? 1,
    seed: opts.seed ?? 1,
    coldStartMs: opts.coldStartMs ?? 2_000,
    executionMs: opts.executionMs ?? 3_000,
    gpuPricesMicros: { ...DEFAULT_GPU_PRICES_MICROS, ...opts.gpuPricesMicros },
    statusRetentionMs: opts.statusRetentionMs ?? 30 * 60_000,
    callbackRetryDelayMs: opts.callbackRetryDelayMs ?? 10_000,
    callbackAttempts: Math.max(1, opts.callbackAttempts ?? 3),
    callbackTimeoutMs: opts.callbackTimeoutMs ?? 5_000,
  };
}
