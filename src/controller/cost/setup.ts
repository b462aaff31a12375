// The cost loop's setup (docs/design.md, "Cost allocation"): every COST_RECONCILE_INTERVAL_SECONDS
// the leader reads the GPU provider's billing history (hourly, from the earliest bucket an account
// has not settled), allocates each of its endpoints' buckets to the accounts whose jobs ran in it
// (src/billing), and writes each BillingAccount's status.cost when it changed: nothing at rest.
// The amounts no job took are a gauge per endpoint. With the worker-cost rule
// (USAGE_WORKER_COST_METER_EVENT_NAME), the buckets an account settles are metered to that meter
// first, and its settled figures advance only once the payment provider took every event.
import { Counter, Gauge } from "prom-client";
import {
  costWindowStart,
  planAccountCosts,
  settledFrom,
  type AccountCost,
} from "../../billing/account-cost.js";
import { allocate, usdToMicros, type ProviderBucket } from "../../billing/cost-allocation.js";
import { periodAt } from "../../billing/period.js";
import { planWorkerCostEvents } from "../../billing/worker-cost.js";
import { usedSecondsNow } from "../../mediajob/plans.js";
import { describeError } from "../../k8s/errors.js";
import { customerAccount, type BillingAccount } from "../../crds/billingaccount.js";
import type { LoopContext } from "../loop-context.js";
import type { MeterSender } from "../usage/meter-client.js";
import type { CostSpans } from "./spans.js";

const HOUR_MS = 3_600_000;
/** Spans older than this are dropped even when an account never settled them (a provider down for a week). */
const SPAN_KEEP_MS = 7 * 24 * HOUR_MS;

const sameCost = (a: AccountCost | undefined, b: AccountCost): boolean =>
  a !== undefined &&
  (Object.keys(b) as Array<keyof AccountCost>).every((k) =>
    k === "periodStart" || k === "settledUntil" ? Date.parse(a[k]) === Date.parse(b[k]) : a[k] === b[k],
  );

export interface CostLoopOptions {
  /** The payment provider's meters (the usage loop's, held while a meter is misconfigured). */
  meter?: () => MeterSender | undefined;
  /** The worker-cost rule's meter event name; undefined: not metered. */
  workerCostEventName?: string | undefined;
  /** The loop's clock (tests move it past an hour's end); Date.now by default. */
  now?: () => number;
}

export function setupCost(ctx: LoopContext, spans: CostSpans, o: CostLoopOptions = {}) {
  const { api, env, log, accountNamespace } = ctx;
  const { accounts, endpoints } = ctx.caches;
  const registers = [ctx.metrics.registry];
  const allocated = new Gauge({
    name: "media_orchestrator_cost_allocated_micros",
    help: "Micro-USD of the GPU provider's bill allocated to each account this billing period",
    labelNames: ["account"] as const,
    registers,
  });
  const unallocated = new Gauge({
    name: "media_orchestrator_cost_unallocated_micros",
    help: "Micro-USD the GPU provider billed on an endpoint in buckets with no job time (idle and active workers, cold starts no job reached), over the buckets read at the last pass",
    labelNames: ["endpoint"] as const,
    registers,
  });
  const recovery = new Gauge({
    name: "media_orchestrator_cost_recovery_ratio",
    help: "Per account: its metered seconds this period times COST_PRICE_PER_SECOND_MICROS, over the provider cost allocated to it (below 1: the account costs more than it is charged)",
    labelNames: ["account"] as const,
    registers,
  });
  const failures = new Counter({
    name: "media_orchestrator_cost_reconcile_failures_total",
    help: "Cost passes that failed (the provider's billing history unreadable); retried at the next interval",
    registers,
  });
  const workerCostMetered = new Counter({
    name: "media_orchestrator_worker_cost_metered_micros_total",
    help: "Micro-USD of the provider's bill metered to accounts under the worker-cost rule (USAGE_WORKER_COST_METER_EVENT_NAME)",
    labelNames: ["account"] as const,
    registers,
  });
  const workerCostRefused = new Counter({
    name: "media_orchestrator_worker_cost_events_refused_total",
    help: "Worker-cost meter events the payment provider refused (logged with its reason; not sent again)",
    registers,
  });
  const settleAfterMs = env.COST_SETTLE_AFTER_SECONDS * 1000;
  const now = o.now ?? Date.now;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;

  async function pass(): Promise<void> {
    const nowMs = now();
    const list = accounts.list(accountNamespace);
    const endpointIds = new Set(
      endpoints.list().flatMap((e) => (e.status?.endpointId ? [e.status.endpointId] : [])),
    );
    if (list.length === 0 || endpointIds.size === 0) return;
    const inputs = list.map((a) => ({
      account: a.spec.customerId,
      periodStartMs: Date.parse(periodAt(new Date(nowMs), a.status?.subscriptionPeriod).periodStart),
      current: a.status?.cost,
    }));
    const from = Math.floor(costWindowStart(inputs, nowMs, settleAfterMs) / HOUR_MS) * HOUR_MS;
    const to = Math.max(from + HOUR_MS, Math.ceil(nowMs / HOUR_MS) * HOUR_MS);
    const billing = await ctx.provider.serverlessBilling(from, to);
    const buckets: ProviderBucket[] = billing.records
      .filter((r) => endpointIds.has(r.serverlessId))
      .map((r) => ({
        endpointId: r.serverlessId,
        startMs: Date.parse(r.startTime),
        endMs: Date.parse(r.endTime),
        amountMicros: usdToMicros(r.totalAmount),
      }));
    const spanList = spans.list();
    const plan = planAccountCosts({ accounts: inputs, buckets, spans: spanList, nowMs, settleAfterMs });
    const open = allocate(buckets, spanList, new Set(inputs.map((i) => i.account))).unallocated;
    unallocated.reset();
    for (const id of endpointIds) unallocated.set({ endpoint: id }, open.get(id) ?? 0);
    let settledFloor = Infinity;
    for (const [i, acct] of list.entries()) {
      const customer = acct.spec.customerId;
      let cost = plan.get(customer)!;
      const fromMs = settledFrom(inputs[i]!);
      if (o.workerCostEventName !== undefined) {
        const metered = await meterWorkerCost(
          customer,
          buckets,
          spanList,
          fromMs,
          Date.parse(cost.settledUntil),
        );
        if (metered === undefined) {
          // Not all taken: the account keeps its figures; the same events go again next pass.
          settledFloor = Math.min(settledFloor, fromMs);
          continue;
        }
        if (metered > 0)
          cost = { ...cost, workerCostMeteredMicros: (cost.workerCostMeteredMicros ?? 0) + metered };
      }
      settledFloor = Math.min(settledFloor, Date.parse(cost.settledUntil));
      allocated.set({ account: customer }, cost.allocatedMicros);
      const price = env.COST_PRICE_PER_SECOND_MICROS;
      if (price !== undefined && cost.allocatedMicros > 0) {
        const used = usedSecondsNow(acct.status?.usage, nowMs, acct.status?.subscriptionPeriod);
        recovery.set({ account: customer }, (used * price) / cost.allocatedMicros);
      }
      if (sameCost(acct.status?.cost, cost) || !ctx.fence()) continue;
      await api
        .updateStatusWithRetry<BillingAccount>(
          "billingaccounts",
          accountNamespace,
          acct.metadata.name,
          (cur) =>
            customerAccount(cur, customer) && !sameCost(cur.status?.cost, cost)
              ? { ...cur, status: { ...cur.status, cost } }
              : undefined,
        )
        .catch((err: unknown) =>
          log.warn({ account: acct.metadata.name, err: describeError(err) }, "account cost not written"),
        );
    }
    spans.prune(Math.max(settledFloor, nowMs - SPAN_KEEP_MS));
  }

  /**
   * Sends the account's share of each bucket it settles now to the worker-cost meter: the micro-USD
   * the payment provider recorded (now, or before under the same identifier), or undefined when an
   * event could not be sent now (no meter yet, a 5xx, a meter held as misconfigured).
   */
  async function meterWorkerCost(
    customer: string,
    buckets: readonly ProviderBucket[],
    spanList: ReturnType<CostSpans["list"]>,
    fromMs: number,
    toMs: number,
  ): Promise<number | undefined> {
    const events = planWorkerCostEvents({ account: customer, buckets, spans: spanList, fromMs, toMs });
    if (events.length === 0) return 0;
    const sender = o.meter?.();
    if (!sender || !ctx.fence()) return undefined;
    let recorded = 0;
    for (const e of events) {
      const res = await sender.send({
        eventName: o.workerCostEventName!,
        customer,
        value: e.micros,
        identifier: e.identifier,
        // Never ahead of the wall clock: Stripe refuses an event over 5 minutes in the future.
        timestamp: Math.min(e.timestamp, Math.floor(Date.now() / 1000)),
      });
      if (res.outcome === "retry") {
        log.info(
          { account: customer, reason: res.reason },
          "worker cost not metered yet; sent again next pass",
        );
        return undefined;
      }
      if (res.outcome === "refused") {
        workerCostRefused.inc();
        log.warn(
          { account: customer, identifier: e.identifier, reason: res.reason },
          "worker cost event refused",
        );
        continue;
      }
      recorded += e.micros;
      if (!res.duplicate) workerCostMetered.inc({ account: customer }, e.micros);
    }
    return recorded;
  }

  const tick = (): void => {
    if (running || !ctx.leading() || !ctx.synced()) return;
    running = pass()
      .catch((err: unknown) => {
        failures.inc();
        log.warn({ err: describeError(err) }, "cost pass failed; retried at the next interval");
      })
      .finally(() => (running = undefined));
  };

  return {
    lead(): void {
      tick();
      timer = setInterval(tick, env.COST_RECONCILE_INTERVAL_SECONDS * 1000);
      timer.unref();
    },
    stopLeading(): void {
      if (timer) clearInterval(timer);
      timer = undefined;
    },
    async stop(): Promise<void> {
      if (timer) clearInterval(timer);
      await running;
    },
  };
}
