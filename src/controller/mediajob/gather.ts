// The facts of one MediaJob's pass: what the caches say of its account and endpoint, a provider
// status only when one is due, and the account's and the endpoint window's places it may take.
import { randomBytes } from "node:crypto";
import { findAccount } from "../../crds/billingaccount.js";
import type { GpuEndpoint } from "../../crds/gpuendpoint.js";
import type { MediaJob } from "../../crds/mediajob.js";
import { describeError } from "../../k8s/errors.js";
import { pickEndpoint } from "../../mediajob/admission.js";
import { mayTakeSlot } from "../../mediajob/admission-chain.js";
import { isPending } from "../../mediajob/job.js";
import type { Facts, Plan, ProviderRead, SubmissionOutcome } from "../../mediajob/pass.js";
import { providerReadDue } from "../../mediajob/processing.js";
import { billedAccount, jobAccount, type AccountResolution } from "../../mediajob/tenancy.js";
import type { SlotFact } from "../../mediajob/queued.js";
import { providerWaitCause } from "../../mediajob/wait-cause.js";
import { isProviderError } from "../../provider/index.js";
import { outputCheckDue, outputKeys, reportedOf } from "../../mediajob/media.js";
import { inspectOutputs } from "../../storage/output-check.js";
import { keepHostedOutputs } from "./keep-outputs.js";
import { accountFacts, usageCapReached } from "../account-facts.js";
import type { MediaJobDeps } from "./deps.js";
import { jobKey } from "./writes.js";

/** Provider ids of accepted submissions whose record write failed, by key (see the reconciler). */
export type Unrecorded = Map<string, { attempt: number; providerJobId: string }>;

/** What the caches say of the job, and the provider's status when a read is due (the one await). */
export async function gatherFacts(
  d: MediaJobDeps,
  job: MediaJob,
  now: Date,
  unrecorded: Unrecorded,
): Promise<Facts> {
  const ns = job.metadata.namespace ?? "";
  const settings = d.settings;
  const facts: Facts = {
    now,
    settings,
    newSubmissionId: randomBytes(12).toString("base64url"),
    unrecorded: unrecorded.get(jobKey(job)),
  };
  if (isPending(job.status)) {
    facts.boundAccounts = d.boundAccounts(ns);
    const billed = billedAccount(job, facts.boundAccounts, settings.accountRequired ?? false);
    const account = "account" in billed ? billed.account : undefined;
    if (account)
      facts.subscriptionState = findAccount(d.accounts, d.accountNamespace ?? ns, account)?.status
        ?.subscriptionStatus;
    const ref = job.spec.endpointRef;
    const candidates = ref ? [d.endpoints.get(ns, ref)].filter((e) => e !== undefined) : d.endpoints.list(ns);
    facts.endpoint = pickEndpoint(job, candidates);
  }
  const submitted = job.status?.submission;
  if (submitted && submitted.state !== "Accepted" && job.status?.endpointId) {
    const at = job.status.endpointId;
    facts.idempotentWorkers = d.endpoints
      .list(ns)
      .some((e) => e.status?.endpointId === at && e.spec.idempotentWorkers === true);
  }
  const at = job.status?.phase === "Processing" ? job.status.endpointId : undefined;
  const ep = at ? d.endpoints.list(ns).find((e) => e.status?.endpointId === at) : undefined;
  const wait =
    ep?.status?.health && providerWaitCause(ep.status.health, ep.status.workersMax ?? ep.spec.maxWorkers);
  if (wait) facts.providerWait = wait;
  if (ep?.spec.baseUrl !== undefined) facts.selfHosted = true;
  if (job.status?.phase === "Processing" && jobAccount(job))
    facts.usageCapReached = usageCapReached(job, { ...d, plans: settings.plans }, now.getTime());
  const due = providerReadDue(
    job,
    now.getTime(),
    settings.defaultTimeoutSeconds,
    facts.usageCapReached,
    facts.providerWait,
    facts.selfHosted,
  );
  if (due) facts.provider = await readProviderStatus(d, due.endpointId, due.providerJobId);
  if (outputCheckDue(job.status)) {
    const outputs = await readStoredOutputs(d, job);
    if (outputs) facts.outputs = outputs;
  }
  return facts;
}

/** A job's request for a slot of its endpoint's window: read while gathering, taken after the plan. */
export interface SlotAsk {
  /** The job as the dispatcher sees it: with the account its namespace's binding supplies. */
  job: MediaJob;
  endpoint: GpuEndpoint;
}

/**
 * The account's running jobs and the endpoint window's answer, added to the facts with no await
 * before the plan, the reservation and the slot's take: two passes of one account cannot both take
 * its last concurrent slot, and the slot the plan reads is the one the pass takes. Reads only: the
 * window is asked what it would answer (wouldGrant); the returned request is taken with takeSlot
 * once the plan is made.
 */
export function addPlaces(d: MediaJobDeps, job: MediaJob, facts: Facts, nowMs: number): SlotAsk | undefined {
  const billed = billedAccount(job, facts.boundAccounts ?? [], d.settings.accountRequired ?? false);
  const name = "account" in billed ? billed.account : undefined;
  const account = accountFacts(job, name, { ...d, plans: d.settings.plans }, nowMs);
  if (account) facts.account = account;
  const ask = slotAsk(d, job, facts, billed);
  if (ask) facts.slot = d.dispatcher!.wouldGrant(ask.job, ask.endpoint);
  return ask;
}

/**
 * A slot is asked for only by a job the admission chain lets go now (not cancelled, suspended or
 * past its deadline, admitted by its account and its plan, its endpoint Ready), so no slot is held
 * and no place in the waiting jobs taken by a job that would not use it.
 */
function slotAsk(
  d: MediaJobDeps,
  job: MediaJob,
  facts: Facts,
  billed: AccountResolution,
): SlotAsk | undefined {
  const ep = facts.endpoint;
  if (!d.dispatcher || !ep) return undefined;
  const eligible = mayTakeSlot({
    job,
    nowMs: facts.now.getTime(),
    boundAccounts: facts.boundAccounts ?? [],
    accountRequired: d.settings.accountRequired ?? false,
    subscriptionState: facts.subscriptionState,
    plans: d.settings.plans,
    account: facts.account,
    endpoint: ep,
  });
  if (!eligible) return undefined;
  // The account a binding supplies is the dispatcher's unit of fair share from the first pass on.
  const account = "account" in billed ? billed.account : undefined;
  if (account !== undefined && jobAccount(job) === undefined)
    job = { ...job, status: { ...job.status, account } };
  return { job, endpoint: ep };
}

/**
 * The slot taken, once the plan is made: the job joins its endpoint's waiting jobs (a job that
 * waits is woken when a slot is granted to it later) and gets a free slot if fair share gives it
 * one. The answer is the dispatcher's; the pass compares it with the one its plan read.
 */
export function takeSlot(d: MediaJobDeps, ask: SlotAsk | undefined): SlotFact | undefined {
  if (!ask || !d.dispatcher) return undefined;
  return d.dispatcher.gate(ask.job, ask.endpoint);
}

/**
 * A planned submission of a job with an account holds its place in the account's count. A Pending
 * job not submitted now gives back a place its earlier pass kept (that pass threw mid-way).
 */
export function reserveAccountPlace(
  d: MediaJobDeps,
  job: MediaJob,
  plan: Plan,
): [string, string] | undefined {
  const account = job.spec.account ?? plan.status.account;
  if (!account || !d.accountJobs) return undefined;
  if (!plan.actions.some((a) => a.type === "submit")) {
    if (isPending(job.status)) d.accountJobs.release(account, jobKey(job));
    return undefined;
  }
  d.accountJobs.reserve(account, jobKey(job));
  return [account, jobKey(job)];
}

/**
 * What the pass did with its slot: an accepted submission grows the window, and a slot the pass
 * did not use (refused, fenced, not submitted after all) goes back. A 429 shrinks the window
 * (submit.ts tells the dispatcher, with the answer's Retry-After).
 */
export function settleSlot(
  d: MediaJobDeps,
  key: string,
  ask: SlotAsk | undefined,
  slot: SlotFact | undefined,
  submitted: SubmissionOutcome | undefined,
): void {
  const dispatcher = d.dispatcher;
  const endpointId = ask?.endpoint.status?.endpointId;
  if (!dispatcher || !endpointId || !slot?.granted) return;
  switch (submitted) {
    case "accepted":
      return dispatcher.accepted(endpointId);
    case "unconfirmed":
      return; // it may be running: it keeps its slot while Processing
    default:
      return dispatcher.release(endpointId, key);
  }
}

/**
 * A COMPLETED attempt's declared outputs as the store holds them (a HEAD each, a streamed digest
 * where the worker reported one), or why the store could not say; undefined without a store.
 */
async function readStoredOutputs(d: MediaJobDeps, job: MediaJob): Promise<Facts["outputs"]> {
  const store = d.store?.();
  if (!store || !job.status) return undefined;
  try {
    const keys = outputKeys(job, job.status);
    const reported = reportedOf(job.status);
    // Outputs the worker left behind a URL of its own are copied in first (keep-outputs.ts).
    const read = (endpointId: string, providerJobId: string) =>
      readProviderStatus(d, endpointId, providerJobId);
    const notKept = await keepHostedOutputs(d, read, store, job, keys, reported);
    if (notKept) return { notKept };
    return { stored: await inspectOutputs(store.client, keys, reported) };
  } catch (err) {
    // A StorageError names the operation, key, status and S3's code: never a URL or a credential.
    return { error: describeError(err) };
  }
}

/** The provider's status of a job, as the domain reads it: a result, lost, or an error. */
export async function readProviderStatus(
  d: Pick<MediaJobDeps, "provider">,
  endpointId: string,
  providerJobId: string,
): Promise<ProviderRead> {
  try {
    return { result: await d.provider.status(endpointId, providerJobId) };
  } catch (err) {
    if (isProviderError(err, "JOB_NOT_FOUND")) return { lost: true };
    return { error: describeError(err) };
  }
}
