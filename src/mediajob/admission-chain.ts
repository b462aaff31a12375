// One admission chain: every reason a Pending job is held back before it may take a slot of its
// endpoint's window, as an ordered list of typed checks (cert-manager's policies.Chain: the first
// check that fails gives the reason). The pass (pending.ts), the gather step's window request and
// the dispatcher's eligibility (controller/dispatch/setup.ts) all ask this chain, so the three can
// no longer disagree. The window's own answer (queued.ts) and the provider's (wait-cause.ts) come
// after it; docs/reasons.md lists every reason (reasons.ts, scripts/reason-table.ts).
import type { ConditionInput } from "../crds/conditions.js";
import type { GpuEndpoint } from "../crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { admission, endpointReadiness, planLimits } from "./admission.js";
import { msUntilDeadline } from "./deadline.js";
import { isPending } from "./job.js";
import type { AccountFacts } from "./pass.js";
import type { Plans } from "./plans.js";
import { billedAccount, type AccountResolution } from "./tenancy.js";

/** What the chain reads: the job and what the caches say of its account and endpoint. */
export interface AdmissionInput {
  job: MediaJob;
  /** The status the pass works on (job.status when not given). */
  status?: MediaJobStatus;
  nowMs: number;
  /** The accounts the job's namespace is bound to (tenancy.ts). */
  boundAccounts: readonly string[];
  accountRequired: boolean;
  /** The billed account's subscription state, when known. */
  subscriptionState?: string | undefined;
  plans?: Plans | undefined;
  /** The billed account's usage and running jobs (for its plan). */
  account?: AccountFacts | undefined;
  /** The job's endpoint (pickEndpoint). */
  endpoint?: GpuEndpoint | undefined;
}

/** The checks, in the order they are asked: the first that holds the job gives the reason. */
export const CHECKS = [
  "cancel",
  "suspend",
  "deadline",
  "binding",
  "subscription",
  "plan",
  "endpoint",
] as const;
type CheckName = (typeof CHECKS)[number];

/** Why the job may not go now: the check that failed, its reason and message (and condition). */
interface Hold {
  check: CheckName;
  reason: string;
  message: string;
  /** The condition the pass writes for it (Admitted or EndpointReady False); none for the others. */
  condition?: ConditionInput;
}

/** The chain's answer: held, or admitted with the account billed and the plan's execution timeout. */
export type Admission =
  | { admitted: false; hold: Hold; account?: string | undefined }
  | {
      admitted: true;
      account: string | undefined;
      /** Admitted=True (NoAccount or AccountActive), as the pass writes it. */
      admittedCondition: ConditionInput;
      /** EndpointReady=True. */
      readyCondition: ConditionInput;
      executionTimeoutMs?: number;
    };

/** What earlier checks resolved, for the later ones. */
interface Resolved {
  billed?: AccountResolution;
  executionTimeoutMs?: number;
}

type Check = (input: AdmissionInput, r: Resolved) => Omit<Hold, "check"> | undefined;

const fromCondition = (c: ConditionInput): Omit<Hold, "check"> | undefined =>
  c.status === "True" ? undefined : { reason: c.reason ?? c.type, message: c.message ?? "", condition: c };

const billedOf = (input: AdmissionInput, r: Resolved): AccountResolution =>
  (r.billed ??= billedAccount(input.job, input.boundAccounts, input.accountRequired));
const accountOf = (input: AdmissionInput, r: Resolved): string | undefined => {
  const billed = billedOf(input, r);
  return "account" in billed ? billed.account : undefined;
};

/** The chain itself, one typed check per name of CHECKS. */
const CHAIN: Record<CheckName, Check> = {
  // Cancelled before it was submitted: it ends here, never reaching the provider.
  cancel: ({ job }) =>
    job.spec.cancel
      ? { reason: "Cancelled", message: "spec.cancel is true: the job was never submitted" }
      : undefined,
  // A suspended job is not submitted; it waits for spec.suspend to be false.
  suspend: ({ job }) =>
    job.spec.suspend
      ? { reason: "Suspended", message: "spec.suspend is true: the job is not submitted until it is false" }
      : undefined,
  // Waiting to be retried past its deadline: it ends here, it is not submitted again.
  deadline: ({ job, status, nowMs }) =>
    msUntilDeadline(job.spec, status ?? job.status, nowMs) <= 0
      ? {
          reason: "DeadlineExceeded",
          message:
            "the job ran past spec.activeDeadlineSeconds since its first submission (waiting to be submitted again)",
        }
      : undefined,
  // The namespace's binding: which account the job may bill.
  binding: (input, r) => {
    const billed = billedOf(input, r);
    return "refused" in billed ? fromCondition(billed.refused) : undefined;
  },
  // The account's subscription: active or trialing.
  subscription: (input, r) => fromCondition(admission(accountOf(input, r), input.subscriptionState)),
  // The account's plan: its seconds this period, its concurrent jobs, its longest executionTimeout.
  plan: (input, r) => {
    const limits = planLimits(input.job, accountOf(input, r), input.plans, input.account);
    if (!limits.admitted) return fromCondition(limits.condition);
    if (limits.executionTimeoutMs !== undefined) r.executionTimeoutMs = limits.executionTimeoutMs;
    return undefined;
  },
  // A Ready endpoint for its workload.
  endpoint: ({ job, endpoint }) => fromCondition(endpointReadiness(job, endpoint)),
};

/** Asks the checks in order; the first that fails holds the job. */
export function admit(input: AdmissionInput): Admission {
  const r: Resolved = {};
  for (const check of CHECKS) {
    const held = CHAIN[check](input, r);
    if (held)
      return {
        admitted: false,
        hold: { check, ...held },
        account: r.billed ? accountOf(input, r) : undefined,
      };
  }
  const account = accountOf(input, r);
  return {
    admitted: true,
    account,
    admittedCondition: admission(account, input.subscriptionState),
    readyCondition: endpointReadiness(input.job, input.endpoint),
    ...(r.executionTimeoutMs !== undefined && { executionTimeoutMs: r.executionTimeoutMs }),
  };
}

/**
 * Whether a job may wait for (and take) a slot of its endpoint's window now: Pending, not being
 * deleted, and held by no check. The dispatcher and the pass's window request both ask this.
 */
export function mayTakeSlot(input: AdmissionInput): boolean {
  if (!isPending(input.status ?? input.job.status) || input.job.metadata.deletionTimestamp) return false;
  return admit(input).admitted && Boolean(input.endpoint?.status?.endpointId);
}
