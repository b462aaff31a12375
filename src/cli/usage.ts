// usage: each account's GPU seconds this billing period, beside what the payment provider has
// accepted and what still waits to be reported (docs/design.md, "Usage and plans").
import type { BillingAccount } from "../crds/billingaccount.js";
import type { MediaJob } from "../crds/mediajob.js";
import { usageViews, type AccountUsageView } from "./usage-view.js";
import type { CliContext } from "./context.js";
import { humanDuration } from "./duration.js";
import { CliError, EXIT_OK, EXIT_PROBLEM } from "./errors.js";
import { listJobs } from "./jobs.js";
import { kubeError } from "../k8s/errors.js";
import type { KubeApi, KubeObject } from "../k8s/api.js";
import { ACCOUNTS_USAGE_ANNOTATION, readAccountsSummary, type AccountSummary } from "../mediajob/tenancy.js";

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
