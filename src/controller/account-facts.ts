// What the plans read of a Pending job's account, from the caches: its prices, this period's
// usage and its running jobs. Read by the reconciler (the job's plan) and by the fair-share
// dispatcher (a job its plan refuses does not wait for a slot of the endpoint's window).
import { findAccount, type BillingAccount } from "../crds/billingaccount.js";
import type { MediaJob } from "../crds/mediajob.js";
import type { AccountFacts } from "../mediajob/pass.js";
import { planFor, usedSecondsNow, type Plans } from "../mediajob/plans.js";
import type { AccountJobs } from "./account-jobs.js";
import type { Informer } from "../runtime/informer.js";
import { objectKey } from "../runtime/informer.js";
import { jobAccount } from "../mediajob/tenancy.js";
import { isPending } from "../mediajob/job.js";
import { sameStatus } from "../runtime/same-status.js";

export interface AccountSources {
  accounts: Pick<Informer<BillingAccount>, "get">;
  /** Where BillingAccounts live; absent: the job's namespace. */
  accountNamespace?: string;
  accountJobs?: AccountJobs;
  plans?: Plans;
}

/**
 * Whether the account of a submitted job has used the GPU seconds its plan allows this period (a
 * job of it still queued at the provider is then cancelled there and held). False without an
 * account, plans, or a plan for its prices.
 */
export function usageCapReached(job: MediaJob, src: AccountSources, nowMs: number): boolean {
  const account = jobAccount(job);
  const plans = src.plans;
  if (!account || !plans || Object.keys(plans).length === 0 || !src.accountJobs) return false;
  const ns = src.accountNamespace ?? job.metadata.namespace ?? "";
  const status = findAccount(src.accounts, ns, account)?.status;
  const plan = planFor(plans, status?.priceIds ?? []);
  if (!plan) return false;
  const used =
    usedSecondsNow(status?.usage, nowMs, status?.subscriptionPeriod) +
    src.accountJobs.uncountedSeconds(account, status?.usage, nowMs, status?.subscriptionPeriod);
  return used >= plan.gpuSecondsPerPeriod;
}

/**
 * The facts of the account the job bills (tenancy.ts billedAccount), or undefined when no plan
 * applies (no account, no plans, not Pending).
 */
export function accountFacts(
  job: MediaJob,
  account: string | undefined,
  src: AccountSources,
  nowMs: number,
): AccountFacts | undefined {
  const plans = src.plans;
  if (!account || !plans || Object.keys(plans).length === 0 || !src.accountJobs) return undefined;
  if (!isPending(job.status)) return undefined;
  const ns = src.accountNamespace ?? job.metadata.namespace ?? "";
  const status = findAccount(src.accounts, ns, account)?.status;
  return {
    priceIds: status?.priceIds ?? [],
    // The account's count, plus its jobs' ended attempts the reporter has not counted yet.
    usedSeconds:
      usedSecondsNow(status?.usage, nowMs, status?.subscriptionPeriod) +
      src.accountJobs.uncountedSeconds(account, status?.usage, nowMs, status?.subscriptionPeriod),
    runningJobs: src.accountJobs.count(account, objectKey(job)),
  };
}

/**
 * Whether a BillingAccount's change can change a MediaJob's pass: the account appearing or going
 * (no `old`: an add, or a delete, which the informer tells with the object alone),
 * its customer, its subscription's state (a Pending job's admission), and, with plans configured,
 * what the plans read (its prices, its period and its usage). The usage reporter writes the
 * account's usage with every batch it counts; with no plans no pass reads it, so those writes
 * wake no job (each used to send every job of the account that is not at rest through a pass).
 */
export function accountChangeConcernsJobs(
  old: BillingAccount | undefined,
  now: BillingAccount,
  plans: Plans | undefined,
): boolean {
  if (!old) return true;
  const plansOn = plans !== undefined && Object.keys(plans).length > 0;
  const a = old.status;
  const b = now.status;
  return (
    old.spec.customerId !== now.spec.customerId ||
    a?.subscriptionStatus !== b?.subscriptionStatus ||
    (plansOn &&
      !sameStatus(
        [a?.priceIds, a?.subscriptionPeriod, a?.usage],
        [b?.priceIds, b?.subscriptionPeriod, b?.usage],
      ))
  );
}
