// usage: each account's GPU seconds this billing period, beside what the payment provider has
// accepted and what still waits to be reported (docs/design.md, "Usage and plans").
import type { BillingAccount } from "../crds/billingaccount.js";
import type { MediaJob } from "../crds/mediajob.js";
import { awaitsCount } from "../mediajob/usage.js";
import type { CliContext } from "./context.js";
import { humanDuration } from "./duration.js";
import { CliError, EXIT_OK, EXIT_PROBLEM } from "./errors.js";
import { listJobs } from "./jobs.js";
import { kubeError } from "../k8s/errors.js";
import type { KubeApi, KubeObject } from "../k8s/api.js";
import { ACCOUNTS_USAGE_ANNOTATION, readAccountsSummary, type AccountSummary } from "../mediajob/tenancy.js";

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

export async function run(ctx: CliContext): Promise<number> {
  const { api } = await ctx.kube();
  // BillingAccounts live in the controller's state namespace: -n (or the context's namespace).
  const accountNamespace = await ctx.namespace();
  // BillingAccounts hold every customer's plan and usage: the chart grants reading them to
  // operators only (media-orchestrator-billing-view). A tenant, refused them, sees the usage its
  // own namespace's MediaJobs record, and nothing of any other customer.
  const [accounts, jobs] = await Promise.all([
    api.list<BillingAccount>("billingaccounts", accountNamespace).then(
      (l) => l.items,
      (err: unknown) => {
        if (kubeError(err)?.code === 403) return undefined;
        throw err;
      },
    ),
    listJobs(api, await ctx.listNamespace()),
  ]);
  if (accounts === undefined) {
    const namespace = await ctx.listNamespace();
    return tenantView(
      ctx,
      jobs,
      namespace,
      namespace === undefined ? {} : await namespaceSummary(api, namespace),
    );
  }
  const only = ctx.inv.args[0];
  const views = usageViews(accounts, jobs, Date.now(), only);
  if (only !== undefined && views.length === 0)
    throw new CliError(
      `no account "${only}" in namespace "${accountNamespace}" and no job billed to it`,
      "list the accounts with: kubectl get bacct -n <namespace> (BillingAccounts live where the webhooks sidecar writes them)",
    );
  if (ctx.out.machine) {
    ctx.out.data({
      items: views.map((v) => ({
        customer: v.customer,
        account: v.account ?? null,
        periodStart: v.periodStart ?? null,
        periodEnd: v.periodEnd ?? null,
        usedSeconds: v.usedSeconds ?? null,
        reportedSeconds: v.reportedSeconds ?? null,
        limitSeconds: v.limitSeconds ?? null,
        providerCostMicros: v.allocatedMicros ?? null,
        providerCostPerUsedSecondMicros: costPerSecond(v) ?? null,
        workerCostMeteredMicros: v.workerCostMeteredMicros ?? null,
        unreportedAttempts: v.unreportedAttempts,
        unreportedSeconds: v.unreportedSeconds,
        oldestUnreportedSeconds:
          v.oldestUnreportedMs === undefined ? null : Math.floor(v.oldestUnreportedMs / 1000),
        refusedAttempts: v.refusedAttempts,
        afterInvoiceAttempts: v.afterInvoiceAttempts,
        afterInvoiceSeconds: v.afterInvoiceSeconds,
        uncountedAttempts: v.uncountedAttempts,
        uncountedSeconds: v.uncountedSeconds,
        accountMissing: accountMissing(v),
      })),
    });
  } else if (views.length === 0) {
    ctx.out.note(`No billing accounts in namespace "${accountNamespace}" and no job billed to one.`);
  } else {
    // The worker-cost rule's column only where it is in use (USAGE_WORKER_COST_METER_EVENT_NAME).
    const workerCost = views.some((v) => v.workerCostMeteredMicros !== undefined);
    ctx.out.table(
      [
        "customer",
        "period",
        "used",
        "reported",
        "limit",
        "unreported",
        "oldest unreported",
        "refused",
        "provider cost",
        "cost per second",
        ...(workerCost ? ["worker cost metered"] : []),
      ],
      views.map((v) => [
        v.customer,
        periodCell(v),
        n(v.usedSeconds),
        n(v.reportedSeconds),
        n(v.limitSeconds),
        ...outboxCells(v),
        v.allocatedMicros === undefined ? "-" : usd(v.allocatedMicros),
        costPerSecond(v) === undefined ? "-" : usd(costPerSecond(v)!),
        ...(workerCost
          ? [v.workerCostMeteredMicros === undefined ? "-" : usd(v.workerCostMeteredMicros)]
          : []),
      ]),
    );
    for (const v of views.filter(accountMissing))
      ctx.out.note(
        `customer ${v.customer} has no BillingAccount in namespace "${accountNamespace}": ${v.uncountedSeconds} GPU ` +
          `seconds of ${v.uncountedAttempts} job attempt(s) wait to be counted, their jobs kept (the TTL waits) until ` +
          "it is back; its UsageAccountMissing Events name the jobs (docs/design.md, Usage and plans).",
      );
    for (const v of views.filter((x) => x.afterInvoiceAttempts > 0))
      ctx.out.note(
        `customer ${v.customer}: ${v.afterInvoiceSeconds} GPU seconds of ${v.afterInvoiceAttempts} job attempt(s) ` +
          "were accepted after their period's invoice was finalized and are on no invoice; their UsageAfterInvoice " +
          "Events name them (docs/design.md, Usage after the invoice).",
      );
    const refused = views.reduce((s, v) => s + v.refusedAttempts, 0);
    if (refused > 0)
      ctx.out.note(
        `${refused} job attempt(s) were not reported (meter Refused): 'kubectl get mj -o yaml' shows each ` +
          "attempt's message, and its UsageNotReported Event says why (docs/design.md, Usage and plans).",
      );
  }
  // Each of these needs a person: a refused report, usage with no account, usage on no invoice.
  return views.some((v) => v.refusedAttempts > 0 || accountMissing(v) || v.afterInvoiceAttempts > 0)
    ? EXIT_PROBLEM
    : EXIT_OK;
}

/** Micro-USD as dollars, to the micro-dollar. */
const usd = (micros: number): string => `$${(micros / 1_000_000).toFixed(6)}`;

/**
 * The provider's cost of one billed second this period (allocated cost / used seconds), micro-USD,
 * rounded up: what the meter's price per second is to be compared with.
 */
const costPerSecond = (v: AccountUsageView): number | undefined =>
  v.allocatedMicros === undefined || !v.usedSeconds
    ? undefined
    : Math.ceil(v.allocatedMicros / v.usedSeconds);

/** A figure of the period, or "-" when unknown. */
const n = (v: number | undefined): string => (v === undefined ? "-" : String(v));

/** The period's dates, first day to last ("-" unknown). */
const periodCell = (v: AccountUsageView): string =>
  v.periodStart === undefined ? "-" : `${v.periodStart.slice(0, 10)}..${v.periodEnd?.slice(0, 10) ?? ""}`;

/** The meter outbox's columns: unreported seconds (attempts), the oldest one's age, refused attempts. */
const outboxCells = (v: AccountUsageView): string[] => [
  `${v.unreportedSeconds} s (${v.unreportedAttempts})`,
  v.oldestUnreportedMs === undefined ? "-" : humanDuration(v.oldestUnreportedMs),
  String(v.refusedAttempts),
];

/** Usage waits to be counted into a BillingAccount that does not exist. */
const accountMissing = (v: AccountUsageView): boolean => v.account === undefined && v.uncountedAttempts > 0;

/**
 * What a tenant, who may not read BillingAccounts, sees: per account its namespace's jobs name, the
 * GPU seconds billed on those jobs, what waits to be reported and what was refused. Period totals,
 * limits and plans are the operator's (kubectl media usage with billing-view).
 */
function tenantView(
  ctx: CliContext,
  jobs: readonly MediaJob[],
  namespace: string | undefined,
  summary: Record<string, AccountSummary>,
): number {
  const only = ctx.inv.args[0];
  // The namespace's own accounts' plan and period usage, as the controller summarizes them on it.
  const summarized = Object.entries(summary).map(([customerId, a]) => ({
    apiVersion: "",
    kind: "BillingAccount" as const,
    metadata: { name: customerId },
    spec: { customerId },
    status: {
      ...(a.subscription !== undefined && { subscriptionStatus: a.subscription as never }),
      ...(a.priceIds !== undefined && { priceIds: a.priceIds }),
      ...(a.periodStart !== undefined && {
        usage: {
          periodStart: a.periodStart,
          ...(a.periodEnd !== undefined && { periodEnd: a.periodEnd }),
          usedSeconds: a.usedSeconds ?? 0,
          reportedSeconds: a.reportedSeconds ?? 0,
          ...(a.limitSeconds !== undefined && { limitSeconds: a.limitSeconds }),
        },
      }),
    },
  }));
  const views = usageViews(summarized, jobs, Date.now(), only);
  const where = namespace === undefined ? "every namespace you can read" : `namespace "${namespace}"`;
  if (only !== undefined && views.length === 0)
    throw new CliError(`no job billed to "${only}" in ${where}`, "list the jobs with: kubectl get mj");
  if (ctx.out.machine) {
    ctx.out.data({
      billingAccountsReadable: false,
      items: views.map((v) => ({
        customer: v.customer,
        subscription: summary[v.customer]?.subscription ?? null,
        periodStart: v.periodStart ?? null,
        periodEnd: v.periodEnd ?? null,
        usedSeconds: v.usedSeconds ?? null,
        limitSeconds: v.limitSeconds ?? null,
        jobsSeconds: v.jobsSeconds,
        unreportedAttempts: v.unreportedAttempts,
        unreportedSeconds: v.unreportedSeconds,
        oldestUnreportedSeconds:
          v.oldestUnreportedMs === undefined ? null : Math.floor(v.oldestUnreportedMs / 1000),
        refusedAttempts: v.refusedAttempts,
      })),
    });
  } else if (views.length === 0) {
    ctx.out.note(`No job billed to an account in ${where}.`);
  } else {
    ctx.out.table(
      [
        "customer",
        "period",
        "used",
        "limit",
        "billed (these jobs)",
        "unreported",
        "oldest unreported",
        "refused",
      ],
      views.map((v) => [
        v.customer,
        periodCell(v),
        n(v.usedSeconds),
        n(v.limitSeconds),
        String(v.jobsSeconds),
        ...outboxCells(v),
      ]),
    );
  }
  ctx.out.note(
    `BillingAccounts (every customer's) are not readable with these credentials: the period, used and limit ` +
      `columns are the summary of ${where}'s own accounts on its Namespace (${ACCOUNTS_USAGE_ANNOTATION}); the ` +
      `rest is what its MediaJobs record.`,
  );
  return views.some((v) => v.refusedAttempts > 0) ? EXIT_PROBLEM : EXIT_OK;
}

/** The summary of its accounts the controller keeps on the Namespace; {} when it cannot be read. */
async function namespaceSummary(api: KubeApi, namespace: string): Promise<Record<string, AccountSummary>> {
  try {
    const ns = await api.get<KubeObject>("namespaces", "", namespace);
    return readAccountsSummary(ns?.metadata.annotations as Record<string, string> | undefined);
  } catch (err) {
    if (kubeError(err)?.code === 403) return {};
    throw err;
  }
}
