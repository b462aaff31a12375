// The usage loop's setup: the accounts' period usage and the meter events (reporter.ts), the
// follow-up of runs left at the provider (orphans.ts), the accounts' shown plan limits
// (account-limits.ts) and each bound Namespace's summary of its accounts, with the watches and
// the tick that drive them. The payment provider's meter client is loaded by start() when metering
// is on: a controller that does not meter never loads its code (docs/benchmarks.md, "Footprint of
// the containers").
import { billingAccountName, type BillingAccount, type OrphanedRun } from "../../crds/billingaccount.js";
import { usageSettings } from "../../config/usage.js";
import { describeError } from "../../k8s/errors.js";
import { ACCOUNTS_USAGE_ANNOTATION, accountsSummary, boundAccounts } from "../../mediajob/tenancy.js";
import { AccountLimits } from "../account-limits.js";
import type { Controller } from "../../runtime/controller.js";
import type { LoopContext } from "../loop-context.js";
import type { MeterCheck } from "./meter-check.js";
import type { MeterSender } from "./meter-client.js";
import { UsageMetrics } from "./metrics.js";
import { OrphanFollower } from "./orphans.js";
import { UsageReporter } from "./reporter.js";

export interface UsageOptions {
  /** How soon a misconfigured meter (or one not read) is read again, ms (meter-check.ts). */
  meterRecheckMs?: number;
}

export function setupUsage(ctx: LoopContext, o: UsageOptions = {}) {
  const { api, env, log, accountNamespace } = ctx;
  const { jobs, accounts, namespaces } = ctx.caches;
  const usage = usageSettings(env);
  const metrics = new UsageMetrics(ctx.metrics.registry, [
    usage.defaultEventName,
    ...Object.values(usage.eventNames),
  ]);
  let meter: MeterSender | undefined;
  /** The payment provider's meters checked against what is sent (meter-check.ts), with the client. */
  let meterCheck: MeterCheck | undefined;
  const orphans = new OrphanFollower({
    api,
    accounts,
    accountNamespace,
    provider: ctx.provider,
    meter: () => meter,
    settings: usage,
    log: log.child({ component: "orphans" }),
    leading: ctx.leading,
    onFollowed: (count) => metrics.runsFollowed.set(count),
  });
  let orphanPass: Promise<void> | undefined;
  // The reporter's keys (a customer's meter) on the runtime's work queue: one reconcile per key at
  // a time (one meter call at a time per customer and meter, as Stripe asks), a failing key backed
  // off from a second up to 5 minutes (a payment provider down for hours is asked about once every
  // 5 minutes per customer and meter).
  const reporter = new UsageReporter({
    api,
    jobs,
    accounts,
    accountNamespace,
    // Read per reconcile: undefined until start() has loaded the client, and always without metering.
    get meter() {
      return meter;
    },
    events: ctx.events,
    log: log.child({ component: "usage-reporter" }),
    metrics,
    queue: () => controller.queue,
    synced: ctx.synced,
    leading: ctx.fence,
    held: (eventName) => meterCheck?.held(eventName),
    invoiceGraceSeconds: env.USAGE_INVOICE_GRACE_SECONDS,
  });
  const controller: Controller = ctx.controller({
    name: "usage",
    reconcile: reporter.reconcile,
    concurrency: 8,
    baseDelayMs: 1_000,
    maxDelayMs: 5 * 60_000,
  });
  let tick: NodeJS.Timeout | undefined;
  /** Keeps each account's shown plan limit (status.usage.limitSeconds) equal to its plan. */
  const accountLimits = new AccountLimits(api, env.MEDIA_PLANS, log.child({ component: "account-limits" }));

  // A job whose usage changed (recorded, billed) has work for the usage reporter.
  jobs.on((event, job, old) => reporter.noteJob(event, job, old));
  accounts.on((event, acct) => {
    if (!ctx.leading() || event === "delete") return;
    void accountLimits.sync(acct);
    if (event === "add") reporter.noteAccount(acct.spec.customerId);
  });

  /** A pass over the runs left at the provider (orphans.ts), one at a time. */
  const followOrphans = (): void => {
    if (orphanPass || !accounts.list().some((a) => a.status?.orphans?.length)) return;
    orphanPass = orphans
      .pass()
      .catch((err: unknown) => log.warn({ err: describeError(err) }, "orphan follow-up failed"))
      .finally(() => (orphanPass = undefined));
  };

  /**
   * Each bound Namespace carries its accounts' plan and period usage for its tenants
   * (ACCOUNTS_USAGE_ANNOTATION): written at the tick, only when it changed.
   */
  const summarizeBindings = (): void => {
    for (const ns of namespaces.list()) {
      const annotations = ns.metadata.annotations as Record<string, string> | undefined;
      const bound = boundAccounts(annotations);
      const text = accountsSummary(
        bound.map((customerId) => ({ customerId, status: ctx.account(customerId)?.status })),
      );
      if (text === annotations?.[ACCOUNTS_USAGE_ANNOTATION]) continue;
      void api
        .mergePatch("namespaces", "", ns.metadata.name, {
          metadata: { annotations: { [ACCOUNTS_USAGE_ANNOTATION]: text ?? null } },
        })
        .catch((err: unknown) =>
          log.warn({ namespace: ns.metadata.name, err: describeError(err) }, "accounts' summary not written"),
        );
    }
  };

  return {
    reporter,
    metrics,
    settings: usage,
    /** The payment provider's meters, held while one is misconfigured (meter-check.ts); once loaded. */
    meter: (): MeterSender | undefined => meter,
    /**
     * Puts a run left at the provider on its BillingAccount (status.orphans), once: "added",
     * "present" (recorded by an earlier pass), or "missing" (no BillingAccount of that customer).
     */
    async recordOrphan(orphan: OrphanedRun): Promise<"added" | "present" | "missing"> {
      const res = await api.updateStatusWithRetry<BillingAccount>(
        "billingaccounts",
        accountNamespace,
        billingAccountName(orphan.account),
        (cur) => {
          if (cur.spec.customerId !== orphan.account) return undefined;
          const list = cur.status?.orphans ?? [];
          if (list.some((o) => o.uid === orphan.uid && o.attempt === orphan.attempt)) return undefined;
          return { ...cur, status: { ...cur.status, orphans: [...list, orphan] } };
        },
      );
      if (res.object?.spec.customerId !== orphan.account) return "missing";
      return res.written ? "added" : "present";
    },
    /** Before leading: the reporter's first pass already sends. */
    async load(): Promise<void> {
      if (usage.metering && !meter) {
        const [{ MeterClient }, { MeterCheck }] = await Promise.all([
          import("./meter-client.js"),
          import("./meter-check.js"),
        ]);
        // Read per call: a rotated key file takes effect without a restart.
        const apiKey = () => env.PAYMENT_PROVIDER_API_KEY ?? "";
        meterCheck = new MeterCheck({
          baseUrl: env.PAYMENT_PROVIDER_API_URL,
          apiKey,
          eventNames: [
            usage.defaultEventName,
            ...Object.values(usage.eventNames),
            ...(usage.workerCostEventName !== undefined ? [usage.workerCostEventName] : []),
          ],
          log: log.child({ component: "meter-check" }),
          misconfigured: metrics.meterMisconfigured,
          accounts: { api, cache: accounts, namespace: accountNamespace },
          leading: ctx.fence,
          onFixed: () => reporter.resync(),
          ...(o.meterRecheckMs !== undefined && { recheckMs: o.meterRecheckMs }),
        });
        meter = meterCheck.gate(new MeterClient({ baseUrl: env.PAYMENT_PROVIDER_API_URL, apiKey }));
      }
      meterCheck?.start();
    },
    lead(): void {
      reporter.lead();
      tick = setInterval(() => reporter.resync(), env.USAGE_REPORT_INTERVAL_SECONDS * 1000);
      tick.unref();
    },
    /** The tick: accounts' limits, runs left at the provider, the Namespaces' summaries. */
    resync(): void {
      for (const acct of accounts.list()) void accountLimits.sync(acct);
      followOrphans();
      summarizeBindings();
    },
    stopLeading(): void {
      if (tick) clearInterval(tick);
      tick = undefined;
    },
    async stop(): Promise<void> {
      if (tick) clearInterval(tick);
      await meterCheck?.stop();
      await orphanPass;
    },
  };
}
