// The provider's bill against what the product allocated (docs/design.md, "Cost allocation"): once
// every job has ended and every worker has stopped at the provider (its bill no longer grows),
// the BillingAccounts' allocated cost plus what the leader reports unallocated per endpoint must be
// the provider's own total for the run, to the micro-USD (its billing history, GET
// /v2/billing/serverless, from the simulator's worker ledger): nothing lost, nothing counted twice.

export interface CostCheck {
  /** The provider's total over the run, micro-USD, from its billing history. */
  providerMicros: number;
  /** Σ of the BillingAccounts' status.cost.allocatedMicros. */
  allocatedMicros: number;
  /** Σ over endpoints of media_orchestrator_cost_unallocated_micros (the leader's). */
  unallocatedMicros: number;
  /** |allocated + unallocated − provider|: invariant 0. */
  allocatedCostDiffMicros: number;
}

/** The provider's billing history's records summed, each amount read to the micro-USD as the product reads it. */
export function providerTotalMicros(
  records: ReadonlyArray<{ serverlessId: string; totalAmount: number }>,
  endpoints: ReadonlySet<string>,
): number {
  return records
    .filter((r) => endpoints.has(r.serverlessId))
    .reduce((n, r) => n + Math.round(r.totalAmount * 1_000_000), 0);
}

/** The unallocated gauge's values for these endpoints, from a /metrics text. */
export function unallocatedFromMetrics(text: string, endpoints: ReadonlySet<string>): number {
  let sum = 0;
  for (const m of text.matchAll(/^media_orchestrator_cost_unallocated_micros\{endpoint="([^"]+)"\} (\d+)$/gm))
    if (endpoints.has(m[1]!)) sum += Number(m[2]);
  return sum;
}

export function checkCost(
  providerMicros: number,
  allocatedMicros: number,
  unallocatedMicros: number,
): CostCheck {
  return {
    providerMicros,
    allocatedMicros,
    unallocatedMicros,
    allocatedCostDiffMicros: Math.abs(allocatedMicros + unallocatedMicros - providerMicros),
  };
}
