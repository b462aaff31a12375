// What a finished job is billed, as pure rules: the provider's reported times in, whole seconds
// and a meter identifier out. Money is exact: every value here is an integer, and milliseconds are
// summed before the one rounding step, so no fraction of a second is rounded twice.
import { z } from "zod";
import { meterIdentifier } from "../billing/identifier.js";
import type { MediaJob, MediaJobStatus, UsageAttempt } from "../crds/mediajob.js";
import type { ProviderJobStatus } from "../provider/schemas.js";
import type { ProviderResult } from "./job.js";
import { jobAccount } from "./tenancy.js";

/** Which of the provider's reported times are billed. */
const BILLED_TIME = ["execution", "executionAndDelay"] as const;

export const BillingRuleSchema = z.strictObject({
  /**
   * `execution`: the worker's run only (RunPod's `executionTime`). `executionAndDelay`: also the
   * time before a worker picked the job up (`delayTime`: queue wait and cold start).
   */
  billedTime: z.enum(BILLED_TIME).default("execution"),
  /** Seconds billed at least for a job with any billable time; a job with none is billed 0. */
  minimumSeconds: z.int().min(0).max(86_400).default(0),
  /** Whether FAILED and TIMED_OUT jobs are billed (the provider charges for them either way). */
  billFailed: z.boolean().default(true),
});
export type BillingRule = z.infer<typeof BillingRuleSchema>;

export const DEFAULT_BILLING_RULE: BillingRule = BillingRuleSchema.parse({});

/** What the provider's confirmed status reported for one job attempt. */
export interface ReportedUsage {
  status: ProviderJobStatus;
  /** Milliseconds, as the provider reports them. */
  executionTime?: number;
  delayTime?: number;
}

export type BillableSeconds = { ok: true; seconds: number; billedMs: number } | { ok: false; reason: string };

// One job's time is bounded by the provider's longest policy (7 days) many times over; anything
// near MAX_SAFE_INTEGER is not a duration and must not reach an integer sum.
const MAX_REPORTED_MS = 365 * 24 * 3_600_000;

function reportedMs(name: string, v: number | undefined): number | string {
  if (v === undefined) return 0;
  if (!Number.isFinite(v) || v < 0 || v > MAX_REPORTED_MS) return `${name} ${String(v)} is not a duration`;
  // RunPod reports whole milliseconds; a fraction (from another provider) is rounded up, never lost.
  return Math.ceil(v);
}

/**
 * The whole seconds a job attempt is billed under `rule`:
 * 1. billed ms = executionTime, plus delayTime under `executionAndDelay` (absent values are 0);
 * 2. a job still queued or running is not billed yet; a FAILED or TIMED_OUT one is billed 0 unless
 *    `billFailed`; a CANCELLED one is billed what the provider reports (it ran until the cancel);
 * 3. seconds = ceil(billed ms / 1000), in integer arithmetic;
 * 4. seconds > 0 is raised to `minimumSeconds`; 0 stays 0 (a job that never ran costs nothing).
 * A value that is not a duration (negative, NaN, absurdly large) is refused, not guessed at.
 */
export function billableSeconds(
  usage: ReportedUsage,
  rule: BillingRule = DEFAULT_BILLING_RULE,
): BillableSeconds {
  if (usage.status === "IN_QUEUE" || usage.status === "IN_PROGRESS")
    return { ok: false, reason: `job is ${usage.status}: usage is billed once it ends` };
  const execution = reportedMs("executionTime", usage.executionTime);
  if (typeof execution === "string") return { ok: false, reason: execution };
  const delay = reportedMs("delayTime", usage.delayTime);
  if (typeof delay === "string") return { ok: false, reason: delay };
  const failed = usage.status === "FAILED" || usage.status === "TIMED_OUT";
  if (failed && !rule.billFailed) return { ok: true, seconds: 0, billedMs: 0 };
  const billedMs = rule.billedTime === "executionAndDelay" ? execution + delay : execution;
  const rounded = Math.floor((billedMs + 999) / 1000);
  const seconds = rounded > 0 ? Math.max(rounded, rule.minimumSeconds) : 0;
  return { ok: true, seconds, billedMs };
}

/** The meter event identifier of one job attempt (one function, in the billing domain). */
export { meterIdentifier };

// Stripe accepts an event timestamp "within the past 35 calendar days or up to 5 minutes in the
// future" and deduplicates an identifier over "a rolling period of at least 24 hours"
// (https://docs.stripe.com/api/billing/meter-event/create).
const METER_TIMESTAMP_MAX_AGE_S = 35 * 24 * 3600;
const METER_DEDUP_WINDOW_S = 24 * 3600;

export type MeterSendVerdict =
  /** Send as is: a repeat of this identifier within the window is dropped by the provider. */
  | { send: "now"; timestamp: number }
  /** The first attempt may have landed and the provider forgot its identifier since: check the meter's summaries first. */
  | { send: "reconcileFirst"; timestamp: number }
  /** The provider refuses the timestamp: surface it, never send it with another time. */
  | { send: "never"; reason: string };

/**
 * Whether a recorded usage report may be sent now. `endedAt`: when the job ended (the event's
 * timestamp), `firstAttemptAt`: when a send was first tried (undefined: never), both unix seconds.
 */
export function meterSendVerdict(
  endedAt: number,
  firstAttemptAt: number | undefined,
  now: number,
): MeterSendVerdict {
  // A margin of an hour under the provider's limit: the call may be retried for a while.
  if (now - endedAt > METER_TIMESTAMP_MAX_AGE_S - 3600)
    return {
      send: "never",
      reason: "the job ended too long ago for the payment provider to accept its usage",
    };
  const timestamp = Math.min(endedAt, now);
  // The same margin under the dedup window: "at least 24 hours" is all Stripe promises.
  if (firstAttemptAt !== undefined && now - firstAttemptAt > METER_DEDUP_WINDOW_S - 3600)
    return { send: "reconcileFirst", timestamp };
  return { send: "now", timestamp };
}

// ---- Usage on the MediaJob (status.usage): recorded where a result ends an attempt, billed by the
// controller's next pass, then counted and reported by the leader's usage reporter.

/** How recorded usage is billed and metered: the controller's configuration (src/config/env.ts). */
export interface UsageSettings {
  rule: BillingRule;
  /** Whether billed usage is reported to the payment provider's meters (the outbox fills). */
  metering: boolean;
  /** Meter event name per workload; `defaultEventName` for the others. */
  eventNames: Readonly<Record<string, string>>;
  defaultEventName: string;
  /** The worker-cost rule's meter (docs/design.md, "Pricing rules"); undefined: not metered. */
  workerCostEventName?: string | undefined;
}

/** The meter event name when none is configured for a workload. */
export const DEFAULT_METER_EVENT_NAME = "gpu_seconds";

export const DEFAULT_USAGE_SETTINGS: UsageSettings = {
  rule: DEFAULT_BILLING_RULE,
  metering: false,
  eventNames: {},
  defaultEventName: DEFAULT_METER_EVENT_NAME,
};

const ENDED: ReadonlySet<string> = new Set(["COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED"]);

function recordedMs(v: number | undefined): number | undefined | "invalid" {
  const ms = reportedMs("", v);
  if (typeof ms === "string") return "invalid";
  return v === undefined ? undefined : ms;
}

/**
 * The status with the ended attempt's usage recorded, as the provider's confirmed status reports
 * it. Called where a result ends an attempt (provider-result.ts), so the record rides on the one
 * status write of that result. Once per attempt: a repeated result of the same attempt changes
 * nothing. `result` must come from the provider's status API, never from a callback body.
 */
export function withRecordedUsage(
  job: MediaJob,
  status: MediaJobStatus,
  result: ProviderResult,
  now: string,
): MediaJobStatus {
  if (!ENDED.has(result.status)) return status;
  const attempt = status.submission?.attempt ?? Math.max(1, status.attempts ?? 1);
  const prior = status.usage;
  if (prior?.attempts.some((a) => a.attempt === attempt)) return status;
  if ((prior?.attempts.length ?? 0) >= USAGE_ATTEMPTS_MAX) return status;
  const execution = recordedMs(result.executionTime);
  const delay = recordedMs(result.delayTime);
  const entry: UsageAttempt = {
    attempt,
    providerJobId: status.providerJobId ?? result.id,
    ...(status.endpointId !== undefined && { endpointId: status.endpointId }),
    providerStatus: result.status as UsageAttempt["providerStatus"],
    ...(typeof execution === "number" && { executionTimeMs: execution }),
    ...(typeof delay === "number" && { delayTimeMs: delay }),
    endedAt: now,
  };
  if (execution === "invalid" || delay === "invalid") {
    entry.billedSeconds = 0;
    entry.meter = "Refused";
    entry.message = `the provider reported a time that is not a duration (executionTime ${String(
      result.executionTime,
    )}, delayTime ${String(result.delayTime)}): not billed`;
  }
  return {
    ...status,
    usage: {
      workload: job.spec.workload,
      ...(jobAccount(job) !== undefined && { account: jobAccount(job) }),
      ...((prior?.billedSeconds !== undefined || entry.billedSeconds !== undefined) && {
        billedSeconds: (prior?.billedSeconds ?? 0) + (entry.billedSeconds ?? 0),
      }),
      attempts: [...(prior?.attempts ?? []), entry],
    },
  };
}

/** status.usage.attempts' cap in the CRD. */
const USAGE_ATTEMPTS_MAX = 256;

/** The meter event name of a workload. */
function meterEventName(workload: string, settings: UsageSettings): string {
  return Object.hasOwn(settings.eventNames, workload)
    ? (settings.eventNames[workload] as string)
    : settings.defaultEventName;
}

/**
 * Bills the recorded attempts not billed yet under the rule: their whole seconds, and whether they
 * go to the meters (Pending: metering on, an account to bill, seconds to bill; else NotMetered). The
 * sidecar bills in the write that records the attempt (`decideMeter` false: an attempt with an
 * account and seconds is left for the controller to decide, as only the controller meters); the
 * controller's pass bills and decides whatever is left, in its one status write, so a writer
 * without the configuration (the CLI) may record raw facts alone.
 */
export function withBilledUsage(
  job: MediaJob,
  status: MediaJobStatus,
  settings: UsageSettings,
  opts: { decideMeter?: boolean } = {},
): MediaJobStatus {
  const decideMeter = opts.decideMeter ?? true;
  const usage = status.usage;
  const undecided = (a: UsageAttempt): boolean =>
    a.billedSeconds === undefined || (decideMeter && a.meter === undefined);
  if (!usage?.attempts.some(undecided)) return status;
  const uid = job.metadata.uid;
  const attempts = usage.attempts.map((a): UsageAttempt => {
    if (!undecided(a)) return a;
    let seconds = a.billedSeconds;
    if (seconds === undefined) {
      const billed = billableSeconds(
        {
          status: a.providerStatus,
          ...(a.executionTimeMs !== undefined && { executionTime: a.executionTimeMs }),
          ...(a.delayTimeMs !== undefined && { delayTime: a.delayTimeMs }),
        },
        settings.rule,
      );
      seconds = billed.ok ? billed.seconds : 0;
    }
    // Nobody to bill, or nothing: never metered, whoever bills it.
    if (usage.account === undefined || seconds === 0 || uid === undefined)
      return { ...a, billedSeconds: seconds, meter: "NotMetered" };
    // Whether it is metered is the controller's to say (its reporter sends it).
    if (!decideMeter) return { ...a, billedSeconds: seconds };
    if (!settings.metering) return { ...a, billedSeconds: seconds, meter: "NotMetered" };
    return {
      ...a,
      billedSeconds: seconds,
      meter: "Pending",
      eventName: meterEventName(usage.workload, settings),
      identifier: meterIdentifier({ uid, attempt: a.attempt }),
    };
  });
  return {
    ...status,
    usage: {
      ...usage,
      billedSeconds: attempts.reduce((sum, a) => sum + (a.billedSeconds ?? 0), 0),
      attempts,
    },
  };
}
