// The usage command's view of each account: its BillingAccount's period figures beside what the
// jobs' status.usage still holds (the outbox, refusals, seconds not yet counted).
import type { BillingAccount } from "../crds/billingaccount.js";
import type { MediaJob } from "../crds/mediajob.js";
import { awaitsCount } from "../mediajob/usage-hold.js";

/** One account's line. */
export interface AccountUsageView {
  customer: string;
  /** The BillingAccount's name, when it exists. */
  account?: string;
  periodStart?: string;
  periodEnd?: string;
  usedSeconds?: number;
  reportedSeconds?: number;
  limitSeconds?: number;
  /** The GPU provider's bill allocated to the account this period, micro-USD (status.cost). */
  allocatedMicros?: number;
  /** Of it, micro-USD metered to the worker-cost meter (status.cost.workerCostMeteredMicros). */
  workerCostMeteredMicros?: number;
  /** Attempts waiting in the outbox (meter Pending), their seconds, the oldest one's age. */
  unreportedAttempts: number;
  unreportedSeconds: number;
  oldestUnreportedMs?: number;
  /** Attempts whose report was refused or held (meter Refused with seconds): a person decides. */
  refusedAttempts: number;
  /** Attempts accepted after their period's invoice was finalized (afterInvoice), and their seconds. */
  afterInvoiceAttempts: number;
  afterInvoiceSeconds: number;
  /** Attempts not yet counted into the account's period usage, and their seconds. */
  uncountedAttempts: number;
  uncountedSeconds: number;
  /** GPU seconds billed on the jobs listed (every attempt they still hold), whatever the period. */
  jobsSeconds: number;
}

/** The accounts' usage from their BillingAccounts and the jobs' status.usage; `only`: one customer. */
export function usageViews(
  accounts: readonly BillingAccount[],
  jobs: readonly MediaJob[],
  nowMs: number,
  only?: string,
): AccountUsageView[] {
  const views = new Map<string, AccountUsageView>();
  const viewOf = (customer: string): AccountUsageView => {
    let v = views.get(customer);
    if (!v) {
      v = {
        customer,
        unreportedAttempts: 0,
        unreportedSeconds: 0,
        refusedAttempts: 0,
        afterInvoiceAttempts: 0,
        afterInvoiceSeconds: 0,
        uncountedAttempts: 0,
        uncountedSeconds: 0,
        jobsSeconds: 0,
      };
      views.set(customer, v);
    }
    return v;
  };
  for (const a of accounts) {
    const v = viewOf(a.spec.customerId);
    const u = a.status?.usage;
    v.account = a.metadata.name;
    if (u) {
      v.periodStart = u.periodStart;
      if (u.periodEnd !== undefined) v.periodEnd = u.periodEnd;
      v.usedSeconds = u.usedSeconds;
      v.reportedSeconds = u.reportedSeconds;
      if (u.limitSeconds !== undefined) v.limitSeconds = u.limitSeconds;
    }
    if (a.status?.cost !== undefined) v.allocatedMicros = a.status.cost.allocatedMicros;
    if (a.status?.cost?.workerCostMeteredMicros !== undefined)
      v.workerCostMeteredMicros = a.status.cost.workerCostMeteredMicros;
  }
  for (const job of jobs) {
    const usage = job.status?.usage;
    if (usage?.account === undefined) continue;
    for (const a of usage.attempts) {
      const seconds = a.billedSeconds ?? 0;
      viewOf(usage.account).jobsSeconds += seconds;
      if (awaitsCount(usage, a) && a.counted !== true) {
        const v = viewOf(usage.account);
        v.uncountedAttempts++;
        v.uncountedSeconds += seconds;
      }
      if (a.meter === "Pending") {
        const v = viewOf(usage.account);
        v.unreportedAttempts++;
        v.unreportedSeconds += seconds;
        const age = Math.max(0, nowMs - Date.parse(a.endedAt));
        v.oldestUnreportedMs = Math.max(v.oldestUnreportedMs ?? 0, age);
      } else if (a.meter === "Refused" && seconds > 0) viewOf(usage.account).refusedAttempts++;
      if (a.afterInvoice === true) {
        const v = viewOf(usage.account);
        v.afterInvoiceAttempts++;
        v.afterInvoiceSeconds += seconds;
      }
    }
  }
  const all = [...views.values()].sort((x, y) => x.customer.localeCompare(y.customer));
  return only === undefined ? all : all.filter((v) => v.customer === only || v.account === only);
}
