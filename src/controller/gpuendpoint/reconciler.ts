// Reconciles one GpuEndpoint: resolve it to a live provider endpoint, keep its worker settings in
// sync (restoring drift: the provider lowers maxWorkers on its own), and report what the runbook's
// diagnosis table asks for, as conditions. Ready is what MediaJobs wait for.
//
// The executor of the domain's pass (src/gpuendpoint/plan.ts): gather the facts (gather.ts, reads
// only), plan, carry out the action the plan asks for (act.ts) and hand its answer back to the
// domain, tell the dispatcher the capacity seen, then write status once and record the Events.
// Status is written only when it changed (lastSyncedAt is the time of the last change, not of the
// last look), so an endpoint at rest costs one look per tick and no write.
import type { GpuEndpoint, GpuEndpointStatus } from "../../crds/gpuendpoint.js";
import { afterAction, planEndpoint, type EndpointPlan } from "../../gpuendpoint/plan.js";
import { StaleCacheGuard } from "../../runtime/stale-cache.js";
import { sameStatus } from "../../runtime/same-status.js";
import type { ReconcileResult } from "../../runtime/workqueue.js";
import { EndpointActions } from "./act.js";
import type { GpuEndpointDeps } from "./deps.js";
import { gatherFacts } from "./gather.js";

export type { GpuEndpointDeps } from "./deps.js";

export class GpuEndpointReconciler {
  private readonly stale = new StaleCacheGuard();
  private readonly actions: EndpointActions;

  constructor(private readonly d: GpuEndpointDeps) {
    this.actions = new EndpointActions(d);
  }

  readonly reconcile = async (key: string): Promise<ReconcileResult | void> => {
    const ep = this.d.endpoints.getByKey(key);
    if (!ep || ep.metadata.deletionTimestamp) return this.stale.forget(key);
    if (this.stale.isStale(key, ep.metadata.resourceVersion)) return { requeueAfterMs: 100 };
    const now = this.d.now?.() ?? new Date();
    const facts = await gatherFacts(this.d, ep, now);
    let plan = planEndpoint(facts);
    // A creation may find the endpoint drifted: its update is the pass's second action, at most.
    while (plan.action) plan = afterAction(facts, plan, await this.actions.run(plan.action));
    for (const what of plan.refresh)
      if (what === "key") this.d.view.invalidateCredentials();
      else this.d.view.invalidateEndpoints();

    const status = this.observed(ep, plan);
    const { lastSyncedAt: _was, ...before } = ep.status ?? {};
    if (!sameStatus({ ...status, lastSyncedAt: undefined }, before)) {
      const written = await this.d.api.replaceStatus("gpuendpoints", {
        ...ep,
        status: { ...status, lastSyncedAt: now.toISOString() },
      });
      this.stale.remember(key, ep.metadata.resourceVersion, written.metadata.resourceVersion);
    }
    for (const [type, reason, message] of plan.events) await this.d.events.record(ep, type, reason, message);
    // The tick looks at every endpoint again; a shorter requeue only where a retry is due sooner.
    return plan.requeueAfterMs === undefined ? undefined : { requeueAfterMs: plan.requeueAfterMs };
  };

  /** The in-flight window follows the capacity just seen (dispatch/dispatcher.ts); it goes into the status. */
  private observed(ep: GpuEndpoint, plan: EndpointPlan): GpuEndpointStatus {
    const seen = plan.observe;
    if (!seen || !this.d.dispatcher) return plan.status;
    this.d.dispatcher.observeEndpoint(
      { ...ep, status: plan.status },
      { scalerType: seen.scalerType, scalerValue: seen.scalerValue },
    );
    const { window, inFlight } = this.d.dispatcher.view(seen.endpointId);
    return { ...plan.status, window, inFlight };
  }
}
