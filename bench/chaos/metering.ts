// Usage metering under the same faults: a few customers whose BillingAccounts are active and whose
// jobs are metered (the payment provider loses answers and fails), and the check once every job is
// terminal and the outbox has drained: for each customer, the seconds metered equal the billable
// seconds the GPU provider reported for that customer's jobs, and no identifier was recorded twice
// or with a value other than its attempt's (docs/design.md, "Usage and plans").
import type { MediaJob } from "../../src/crds/mediajob.js";
import type { KubeApi } from "../../src/k8s/api.js";
import { failedUnconfirmed } from "../../src/mediajob/unconfirmed.js";
import { activateAccount } from "../bursts.js";

/**
 * What the default billing rule promises of one provider run, stated from docs/design.md ("Usage
 * and plans") and not from the product's code: the run's executionTime in whole seconds, rounded
 * up, whatever way it ended (FAILED, TIMED_OUT and CANCELLED runs are billed what they ran).
 */
function promisedSeconds(run: Pick<EndedProviderJob, "status" | "executionTime">): number {
  if (!["COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED"].includes(run.status)) return 0;
  return Math.ceil((run.executionTime ?? 0) / 1000);
}

export const METER = { id: "mtr_chaos_gpu", event_name: "gpu_seconds", display_name: "GPU seconds" };

export const meteredCustomers = (seed: number, count: number): string[] =>
  Array.from({ length: count }, (_, i) => `cus_meter${seed}x${i}`);

/** The customers' BillingAccounts, active on these prices (no subscription events: their state does not change). */
export async function createMeteredAccounts(
  api: KubeApi,
  namespace: string,
  customers: string[],
  priceIds: readonly string[],
): Promise<void> {
  for (const customerId of customers) await activateAccount(api, namespace, customerId, priceIds);
}

/** Job attempts whose usage still waits to be reported (meter Pending). */
export const meterBacklog = (jobs: MediaJob[]): number =>
  jobs.reduce((n, j) => n + (j.status?.usage?.attempts.filter((a) => a.meter === "Pending").length ?? 0), 0);

export interface EndedProviderJob {
  id: string;
  key: string;
  status: string;
  executionTime?: number;
  delayTime?: number;
  /** When a worker started it, real ms since the epoch (absent: it never ran). */
  startedAt?: number;
  /** When it ended, real ms since the epoch. */
  endedAt?: number;
}

export interface MeterEventRecord {
  identifier: string;
  customer: string;
  value: number;
  meterId?: string;
}

export interface MeteringCheck {
  customers: number;
  meteredJobs: number;
  meteredSeconds: number;
  /** Σ over customers of |metered − billable seconds the GPU provider reported for their jobs|. */
  meteredSecondsDiff: number;
  /**
   * Σ over customers of |execution time the jobs recorded − the provider's executionTime of their
   * runs|, seconds (ms exact, /1000): the raw figure every rule starts from, before any rounding.
   */
  executionSecondsDiff: number;
  /** Identifiers recorded more than once, or with a value other than their attempt's billed seconds. */
  meterEventsDuplicated: number;
  /**
   * Attempts with billed seconds that their job says were reported (or not metered) and that the
   * payment provider has no event for: usage lost on the way, saved 5xx answers among the faults.
   */
  meterEventsLost: number;
  /** Attempts still in the outbox at the end. */
  meterBacklog: number;
  /** Attempts whose report was refused (not sent). */
  meterRefused: number;
  /**
   * Billable seconds of runs whose job ended SubmissionUnconfirmed: the provider ran them, no
   * confirmed answer ever said so, so they are not recorded (the at-most-once rule's residual).
   * Not an invariant; left out of meteredSecondsDiff on both sides.
   */
  unconfirmedRunSeconds: number;
  perCustomer: Array<{
    customer: string;
    metered: number;
    billable: number;
    /** Execution ms the jobs recorded, and the provider's for their runs. */
    executionMs: number;
    providerExecutionMs: number;
  }>;
  examples: unknown[];
}

/**
 * The check. A provider job belongs to the MediaJob whose job id it was submitted for (its key is
 * the job id, or `<job id>-retry-<n>` for a later attempt); its billable seconds are what the
 * default billing rule (the controllers run with it) promises of the times the provider reported.
 */
export function checkMetering(
  jobs: MediaJob[],
  customers: string[],
  ended: EndedProviderJob[],
  events: MeterEventRecord[],
): MeteringCheck {
  const metered = new Set(customers);
  const byJobId = new Map<string, MediaJob>();
  for (const j of jobs) if (j.status?.jobId !== undefined) byJobId.set(j.status.jobId, j);
  const billable = new Map<string, number>();
  const providerExecutionMs = new Map<string, number>();
  const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
  let unconfirmedRunSeconds = 0;
  for (const p of ended) {
    const job = byJobId.get(p.key.replace(/-retry-\d+$/, ""));
    const customer = job?.spec.account;
    if (!job || customer === undefined || !metered.has(customer)) continue;
    const s = promisedSeconds(p);
    if (failedUnconfirmed(job.status)) unconfirmedRunSeconds += s;
    else {
      add(billable, customer, s);
      add(providerExecutionMs, customer, p.executionTime ?? 0);
    }
  }
  const meteredBy = new Map<string, number>();
  const perIdentifier = new Map<string, MeterEventRecord[]>();
  for (const e of events) {
    if (!metered.has(e.customer)) continue;
    perIdentifier.set(e.identifier, [...(perIdentifier.get(e.identifier) ?? []), e]);
  }
  // What each attempt was billed, by its identifier: a recorded value must be that.
  const attemptValue = new Map<string, { seconds: number; unconfirmed: boolean }>();
  const executionMs = new Map<string, number>();
  const lost: unknown[] = [];
  let backlog = 0;
  let refused = 0;
  let meteredJobs = 0;
  for (const j of jobs) {
    const usage = j.status?.usage;
    if (!usage?.account || !metered.has(usage.account)) continue;
    meteredJobs++;
    for (const a of usage.attempts) {
      if (!failedUnconfirmed(j.status)) add(executionMs, usage.account, a.executionTimeMs ?? 0);
      const gone = a.meter === "Reported" || a.meter === "NotMetered";
      if (gone && (a.billedSeconds ?? 0) > 0 && !perIdentifier.has(a.identifier ?? ""))
        lost.push({ job: j.metadata.name, attempt: a.attempt, meter: a.meter, identifier: a.identifier });
      if (a.identifier !== undefined)
        attemptValue.set(a.identifier, {
          seconds: a.billedSeconds ?? 0,
          unconfirmed: failedUnconfirmed(j.status),
        });
      if (a.meter === "Pending") backlog++;
      if (a.meter === "Refused") refused++;
    }
  }
  const duplicated: unknown[] = [];
  for (const [identifier, list] of perIdentifier) {
    const expected = attemptValue.get(identifier);
    if (list.length > 1 || expected === undefined || list[0]!.value !== expected.seconds)
      duplicated.push({ identifier, recorded: list.map((e) => e.value), billed: expected?.seconds });
    // The attempts of a job that ended unconfirmed are left out on both sides.
    if (expected?.unconfirmed) continue;
    const c = list[0]!.customer;
    meteredBy.set(c, (meteredBy.get(c) ?? 0) + list[0]!.value);
  }
  const perCustomer = customers.map((customer) => ({
    customer,
    metered: meteredBy.get(customer) ?? 0,
    billable: billable.get(customer) ?? 0,
    executionMs: executionMs.get(customer) ?? 0,
    providerExecutionMs: providerExecutionMs.get(customer) ?? 0,
  }));
  return {
    customers: customers.length,
    meteredJobs,
    meteredSeconds: perCustomer.reduce((s, c) => s + c.metered, 0),
    meteredSecondsDiff: perCustomer.reduce((s, c) => s + Math.abs(c.metered - c.billable), 0),
    executionSecondsDiff:
      perCustomer.reduce((s, c) => s + Math.abs(c.executionMs - c.providerExecutionMs), 0) / 1000,
    meterEventsDuplicated: duplicated.length,
    meterEventsLost: lost.length,
    meterBacklog: backlog,
    meterRefused: refused,
    unconfirmedRunSeconds,
    perCustomer,
    examples: [...duplicated.slice(0, 20), ...lost.slice(0, 20)],
  };
}
