// The dispatch loop's setup: the endpoints' in-flight windows and fair share (dispatcher.ts), when
// FAIR_SHARE_WINDOW is on, with the map from a waiting job to the endpoint it would go to now and
// the watch that keeps the windows' in-flight counts on every replica.
import { accountRequired } from "../../config/usage.js";
import { fairShareWeights } from "../../config/env.js";
import type { GpuEndpoint } from "../../crds/gpuendpoint.js";
import type { MediaJob } from "../../crds/mediajob.js";
import { pickEndpoint } from "../../mediajob/admission.js";
import { mayTakeSlot } from "../../mediajob/admission-chain.js";
import { accountWeights } from "../../mediajob/fair-share.js";
import { planFor, type Plan } from "../../mediajob/plans.js";
import { billedAccount } from "../../mediajob/tenancy.js";
import { accountFacts } from "../account-facts.js";
import type { AccountJobs } from "../account-jobs.js";
import type { LoopContext } from "../loop-context.js";
import { Dispatcher } from "./dispatcher.js";

/**
 * The dispatcher, or undefined with FAIR_SHARE_WINDOW=false. `wake` puts a granted job ahead of
 * the waiting jobs' passes: its slot is idle until it submits.
 */
export function setupDispatch(
  ctx: LoopContext,
  accountJobs: AccountJobs,
  wake: (key: string) => void,
): Dispatcher | undefined {
  const { env } = ctx;
  if (!env.FAIR_SHARE_WINDOW) return undefined;
  const plans = env.MEDIA_PLANS;
  /** The plan of an account's subscription, when plans are configured (src/mediajob/plans.ts). */
  const planOf = (account: string): Plan | undefined =>
    Object.keys(plans).length === 0
      ? undefined
      : planFor(plans, ctx.account(account)?.status?.priceIds ?? []);
  const dispatcher = new Dispatcher({
    wake,
    jobSeconds: env.FAIR_SHARE_JOB_SECONDS,
    tickSeconds: env.FAIR_SHARE_TICK_SECONDS,
    // An account's weight: its override (FAIR_SHARE_WEIGHTS), else its plan's, else 1.
    weights: accountWeights(fairShareWeights(env), (account) => planOf(account)?.fairShareWeight),
    eligible: (job) => eligibleEndpoint(ctx, accountJobs, job),
  });
  ctx.metrics.dispatch.readFrom(dispatcher);
  // Which jobs are in flight where, on every replica: a new leader's windows start from it.
  ctx.caches.jobs.on((event, job) => dispatcher.observe(event, job));
  return dispatcher;
}

/**
 * The endpoint a Pending job would be submitted to now, from the caches: the admission chain lets
 * it go (src/mediajob/admission-chain.ts, the same chain as its pass: not cancelled, suspended or
 * past its deadline, admitted by its account and its plan, its endpoint Ready).
 */
function eligibleEndpoint(
  ctx: LoopContext,
  accountJobs: AccountJobs,
  job: MediaJob,
): GpuEndpoint | undefined {
  const { env, caches } = ctx;
  const boundAccounts = ctx.boundAccounts(job.metadata.namespace ?? "");
  const required = accountRequired(env);
  const billed = billedAccount(job, boundAccounts, required);
  const account = "account" in billed ? billed.account : undefined;
  const plans = env.MEDIA_PLANS;
  const nowMs = Date.now();
  const facts = accountFacts(
    job,
    account,
    { accounts: caches.accounts, accountNamespace: ctx.accountNamespace, accountJobs, plans },
    nowMs,
  );
  const ns = job.metadata.namespace ?? "";
  const ref = job.spec.endpointRef;
  const endpoint = pickEndpoint(
    job,
    ref ? [caches.endpoints.get(ns, ref)].filter((e) => e !== undefined) : caches.endpoints.list(ns),
  );
  const eligible = mayTakeSlot({
    job,
    nowMs,
    boundAccounts,
    accountRequired: required,
    subscriptionState: account ? ctx.account(account)?.status?.subscriptionStatus : undefined,
    plans,
    account: facts,
    endpoint,
  });
  return eligible ? endpoint : undefined;
}
