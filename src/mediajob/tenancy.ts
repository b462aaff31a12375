// Which customer accounts a namespace may bill, and which account a job bills (docs/design.md,
// "Tenancy"). An operator binds a namespace to accounts with an annotation on the Namespace
// object, which namespace-scoped roles (even `admin`) cannot write; the admission policy
// (src/crds/admission-policy.ts) and the controller both read it, so a cluster without the policy
// is still protected by the controller. Pure: the namespace's annotations are a fact gathered by
// the caller.
import type { ConditionInput } from "../crds/conditions.js";
import type { MediaJob } from "../crds/mediajob.js";

/** On a Namespace: the customer accounts its MediaJobs may bill, comma-separated. */
export const ACCOUNTS_ANNOTATION = "media-orchestrator.io/accounts";

/**
 * What an account id may be: a payment provider's customer id (Stripe's `cus_…`). No commas or
 * spaces, so the annotation's list reads back exactly as written.
 */
export const ACCOUNT_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,254}$/;

/** The accounts bound to a namespace (its annotation), in the order written; [] when none. */
export function boundAccounts(annotations: Record<string, string> | undefined): string[] {
  const raw = annotations?.[ACCOUNTS_ANNOTATION];
  if (!raw) return [];
  return [
    ...new Set(
      raw
        .split(",")
        .map((a) => a.trim())
        .filter((a) => a !== ""),
    ),
  ];
}

/** The annotation's value for these accounts; undefined when none is left (the annotation goes). */
export function accountsAnnotation(accounts: readonly string[]): string | undefined {
  const unique = [...new Set(accounts)];
  return unique.length ? unique.join(",") : undefined;
}

/** The account a job bills: spec.account, else the one its namespace's binding supplied. */
export function jobAccount(job: Pick<MediaJob, "spec" | "status">): string | undefined {
  return job.spec.account ?? job.status?.account;
}

/** What the binding says of a Pending job: the account it bills (maybe none), or why it may not run. */
export type AccountResolution = { account?: string } | { refused: ConditionInput };

/**
 * The account a job may bill, from its namespace's binding:
 * - a job that names an account (`named`: spec.account, or the account a submitted job was billed
 *   to) bills it only if the namespace is bound to it;
 * - a job that names none bills the namespace's account when exactly one is bound;
 * - otherwise (none or several bound) it runs unbilled only where every job need not bill an
 *   account (`accountRequired` false: no plans or metering, or TENANCY_REQUIRE_ACCOUNT=false);
 *   where it must, it is refused (it must name one of several).
 */
export function resolveAccount(
  ns: string,
  named: string | undefined,
  bound: readonly string[],
  accountRequired: boolean,
): AccountResolution {
  if (named !== undefined) {
    if (bound.includes(named)) return { account: named };
    return refuse(
      `namespace ${ns} is not bound to account ${named}` +
        (bound.length ? ` (it is bound to ${bound.join(", ")})` : "") +
        `: ask an operator to run 'kubectl media bind ${ns} ${named}'`,
    );
  }
  if (bound.length === 1) return { account: bound[0]! };
  if (!accountRequired) return {};
  if (bound.length > 1)
    return refuse(
      `namespace ${ns} is bound to several accounts (${bound.join(", ")}): name one in spec.account`,
    );
  return refuse(
    `namespace ${ns} is bound to no account, and this installation bills every job: ` +
      `ask an operator to run 'kubectl media bind ${ns} ACCOUNT'`,
  );
}

const refuse = (message: string): AccountResolution => ({
  refused: { type: "Admitted", status: "False", reason: "AccountNotBound", message },
});

/**
 * resolveAccount for a job as it stands: the account it names, or the account it was billed to
 * when submitted before (a reset or retried job keeps it), else what the binding supplies.
 */
export function billedAccount(
  job: Pick<MediaJob, "metadata" | "spec" | "status">,
  bound: readonly string[],
  accountRequired: boolean,
): AccountResolution {
  const named = job.spec.account ?? (job.status?.attempts ? job.status.account : undefined);
  return resolveAccount(job.metadata.namespace ?? "", named, bound, accountRequired);
}

/**
 * On a Namespace, written by the controller: the plan and period usage of the accounts the
 * namespace is bound to, and of no other, for its tenants to read (they may `get` their own
 * Namespace; BillingAccounts hold every customer's and are the operators'). JSON, keyed by
 * customer id (accountsSummary).
 */
export const ACCOUNTS_USAGE_ANNOTATION = "media-orchestrator.io/accounts-usage";

/** What a tenant may know of one of its accounts: its subscription, plan prices and period usage. */
export interface AccountSummary {
  subscription?: string;
  priceIds?: string[];
  periodStart?: string;
  periodEnd?: string;
  usedSeconds?: number;
  reportedSeconds?: number;
  limitSeconds?: number;
}

/** The summary annotation's value for these accounts (stable: one text for one state); undefined for none. */
export function accountsSummary(
  accounts: ReadonlyArray<{
    customerId: string;
    status?: {
      subscriptionStatus?: string;
      priceIds?: string[];
      usage?: {
        periodStart: string;
        periodEnd?: string;
        usedSeconds: number;
        reportedSeconds: number;
        limitSeconds?: number;
      };
    };
  }>,
): string | undefined {
  if (accounts.length === 0) return undefined;
  const out: Record<string, AccountSummary> = {};
  for (const { customerId, status } of [...accounts].sort((a, b) =>
    a.customerId.localeCompare(b.customerId),
  )) {
    const u = status?.usage;
    out[customerId] = {
      ...(status?.subscriptionStatus !== undefined && { subscription: status.subscriptionStatus }),
      ...(status?.priceIds !== undefined && { priceIds: [...status.priceIds].sort() }),
      ...(u && {
        periodStart: u.periodStart,
        ...(u.periodEnd !== undefined && { periodEnd: u.periodEnd }),
        usedSeconds: u.usedSeconds,
        reportedSeconds: u.reportedSeconds,
        ...(u.limitSeconds !== undefined && { limitSeconds: u.limitSeconds }),
      }),
    };
  }
  return JSON.stringify(out);
}

/** The summary a Namespace carries (ACCOUNTS_USAGE_ANNOTATION); {} when absent or unreadable. */
export function readAccountsSummary(
  annotations: Record<string, string> | undefined,
): Record<string, AccountSummary> {
  try {
    const parsed: unknown = JSON.parse(annotations?.[ACCOUNTS_USAGE_ANNOTATION] ?? "{}");
    return parsed && typeof parsed === "object" && !Array.isArray(parsed)
      ? (parsed as Record<string, AccountSummary>)
      : {};
  } catch {
    return {};
  }
}
