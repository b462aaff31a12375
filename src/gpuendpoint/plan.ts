// One GpuEndpoint pass, planned: given the facts gathered (facts.ts), the status to write, the
// Events, what the provider view must ask again, and at most one action at the provider (create
// the endpoint, or set its workers). An action's answer is read by afterAction, which finishes the
// pass as the plan would have with that answer in hand (as afterStop does for a MediaJob's
// cancel). Pure: every row of the runbook's diagnosis is a table test
// (test/unit/gpuendpoint-plan.test.ts).
//
// The order is the runbook's: the key (every job fails at once without it), which endpoint this
// is, its workers in sync (drift restored), its autoscaler, its workers' health, then Ready, which
// MediaJobs wait for. The first of these that fails makes Ready False with its reason and fix.
import { getCondition, setCondition } from "../crds/conditions.js";
import type { GpuEndpoint, GpuEndpointStatus } from "../crds/gpuendpoint.js";
import {
  credentialsFinding,
  endpointFound,
  healthFinding,
  healthUnavailable,
  listingUnavailable,
  notReady,
  ready,
  scalerFinding,
  toHealth,
  updateFailed,
  warmWorkersFinding,
  workersInSync,
} from "./diagnosis.js";
import {
  driftOf,
  driftRestored,
  wantedWorkers,
  withProviderSettings,
  type Drift,
  type WorkersChange,
} from "./drift.js";
import type { EndpointFacts, HealthRead, LiveEndpoint, ProviderFailure } from "./facts.js";
import { conditionOf, type Finding } from "./findings.js";
import { creationOf, resolveEndpoint, type EndpointCreation, type ResolvedBy } from "./resolution.js";

/** An Event planned by the domain: its type, reason and message. */
type EndpointEvent = [type: "Normal" | "Warning", reason: string, message: string];

export type EndpointAction =
  /** Create the provider endpoint (unless one of that name exists by then); read by afterAction. */
  | { type: "create"; creation: EndpointCreation }
  /** Set the endpoint's workers at the provider, restoring the drift found; read by afterAction. */
  | { type: "updateWorkers"; endpointId: string; change: WorkersChange; drift: Drift[] };

/**
 * What the action came to: the endpoint as the provider answered (`existed`: a creation found one
 * of that name already, made by another reconcile or an earlier answer lost), or the failure.
 */
export type ActionOutcome = { endpoint: LiveEndpoint; existed?: boolean } | { failed: ProviderFailure };

/** What the provider view asks again at the next look instead of its cached answer. */
type Refresh = "key" | "endpoints";

export interface EndpointPlan {
  /**
   * The status to write (only if it changed). With an action, the status so far: the executor
   * carries out the action and writes what afterAction returns.
   */
  status: GpuEndpointStatus;
  events: EndpointEvent[];
  action?: EndpointAction;
  refresh: Refresh[];
  /** The endpoint is Ready: the dispatcher is told its capacity, with the scaler the provider reports. */
  observe?: { endpointId: string; scalerType?: string; scalerValue?: number };
  /** Look again sooner than the tick (a retry is due). */
  requeueAfterMs?: number;
}

/** How soon a failed worker update is tried again (within the tick). */
const UPDATE_RETRY_MS = 5_000;

/** The pass for a GpuEndpoint that is not being deleted. */
export function planEndpoint(f: EndpointFacts): EndpointPlan {
  const d = new Draft(f, { ...f.endpoint.status }, [], []);
  d.set(warmWorkersFinding(f.mediaEnv, f.endpoint.spec), "byStatus");
  if (f.endpoint.spec.baseUrl !== undefined) return selfHosted(d, f.endpoint.spec.baseUrl);
  // 1. The key: without it every call fails, so nothing else is looked at.
  if ("failed" in f.key) {
    const c = credentialsFinding(f.key);
    d.set(c, "Warning");
    return d.finish(notReady(c));
  }
  d.set(credentialsFinding(f.key));
  // 2. Which provider endpoint this is.
  const listing = f.listing ?? { failed: { message: "the provider's endpoints were not listed" } };
  if ("failed" in listing) return listingFailed(d, listing.failed);
  const r = resolveEndpoint(f.endpoint, f.naming, listing.endpoints);
  if ("missing" in r) {
    d.set(r.missing, "Warning");
    const { endpointId: _id, endpointName: _n, resolvedBy: _b, ...rest } = d.status;
    d.status = rest;
    return d.finish(notReady(r.missing));
  }
  if ("create" in r) return d.plan({ type: "create", creation: creationOf(f.endpoint, r.create) });
  return found(d, r.found, r.by, f.health);
}

/** The rest of the pass once the action answered. */
export function afterAction(f: EndpointFacts, plan: EndpointPlan, outcome: ActionOutcome): EndpointPlan {
  const action = plan.action;
  if (!action) return plan;
  const d = new Draft(f, plan.status, [...plan.events], [...plan.refresh]);
  if (action.type === "create") {
    // A creation that failed is told as the listing's failure: the endpoint is still not found.
    if ("failed" in outcome) return listingFailed(d, outcome.failed);
    const live = outcome.endpoint;
    if (!outcome.existed)
      d.events.push(["Normal", "EndpointCreated", `created provider endpoint ${live.name} (${live.id})`]);
    // Its health is read at the next look (the one read this pass was of no endpoint).
    return found(d, live, outcome.existed ? "name" : "created", undefined);
  }
  if ("failed" in outcome) {
    const c = updateFailed(outcome.failed);
    d.set(c, "Warning");
    return d.finish(notReady(c, "WorkersNotInSync"), Math.min(f.tickMs, UPDATE_RETRY_MS));
  }
  d.events.push(["Normal", "WorkersSynced", driftRestored(action.drift)]);
  return inSync(d, outcome.endpoint, f.health);
}

/** A listing (or creation) that failed: the key's refusal, or the provider unavailable. */
function listingFailed(d: Draft, failure: ProviderFailure): EndpointPlan {
  if (failure.refused) return keyRefused(d, failure);
  const c = listingUnavailable(failure);
  d.set(c, "Warning");
  return d.finish(notReady(c));
}

/**
 * A call made with the key (the listing, a health check) refused for the key's sake: not Ready,
 * and the key is checked again at the next look, not minutes later.
 */
function keyRefused(d: Draft, failure: ProviderFailure): EndpointPlan {
  d.refresh.push("key");
  const c = credentialsFinding({ failed: failure });
  d.set(c, "Warning");
  return d.finish(notReady(c));
}

/** 3. The endpoint found: its workers as the spec wants them, or an update that restores them. */
function found(d: Draft, live: LiveEndpoint, by: ResolvedBy, health: HealthRead | undefined): EndpointPlan {
  d.status = { ...d.status, endpointId: live.id, endpointName: live.name, resolvedBy: by };
  d.set(endpointFound(live, by), "Normal");
  const change = wantedWorkers(d.f.endpoint.spec);
  const drift = driftOf(live, change);
  if (drift.length) return d.plan({ type: "updateWorkers", endpointId: live.id, change, drift });
  return inSync(d, live, health);
}

/** 4. In sync: its settings recorded, its autoscaler and its health told, Ready. */
function inSync(d: Draft, live: LiveEndpoint, health: HealthRead | undefined): EndpointPlan {
  const { spec } = d.f.endpoint;
  d.status = withProviderSettings(d.status, live);
  d.set(workersInSync(live));
  // The in-flight window is sized from the endpoint's autoscaler (dispatch/dispatcher.ts).
  d.set(scalerFinding(live, spec.maxInFlight), "byStatus");
  // Health is informational: a sick endpoint still accepts jobs into its queue.
  if (health && "failed" in health) {
    // The health check is the one call made with the key every tick: a refusal is the key's.
    if (health.failed.refused) return keyRefused(d, health.failed);
    d.set(healthUnavailable(health.failed));
    // Perhaps gone at the provider since the last listing: the next look lists again.
    if (health.failed.notFound) d.refresh.push("endpoints");
  } else if (health) {
    const now = toHealth(health.report);
    d.set(healthFinding(now, d.f.endpoint.status?.health, spec), "byStatus");
    d.status = { ...d.status, health: now };
  }
  d.observe = {
    endpointId: live.id,
    ...(typeof live.scalerType === "string" && { scalerType: live.scalerType }),
    ...(typeof live.scalerValue === "number" && { scalerValue: live.scalerValue }),
  };
  return d.finish(ready(live));
}

/**
 * A self-hosted endpoint (spec.baseUrl): nothing at the provider to find, keep in sync or check, so
 * it is Ready as soon as it is declared; its in-flight window is spec.maxInFlight (required with
 * it). Whether its server answers is told by its jobs' submissions, as for any endpoint.
 */
function selfHosted(d: Draft, baseUrl: string): EndpointPlan {
  const ep = d.f.endpoint;
  const id = selfHostedEndpointId(ep);
  const {
    workersMin: _min,
    workersMax: _max,
    idleTimeoutSeconds: _idle,
    executionTimeoutMs: _exec,
    ...rest
  } = d.status;
  const { scalerType: _type, scalerValue: _value, health: _health, ...status } = rest;
  d.status = { ...status, endpointId: id, endpointName: ep.metadata.name, resolvedBy: "baseUrl" };
  const origin = new URL(baseUrl).origin;
  d.set(
    {
      type: "EndpointFound",
      status: "True",
      reason: "SelfHosted",
      cause: `self-hosted endpoint at ${origin}`,
    },
    "Normal",
  );
  d.observe = { endpointId: id };
  return d.finish({
    type: "Ready",
    status: "True",
    reason: "SelfHosted",
    cause: `self-hosted endpoint ${id} at ${origin}, up to ${String(ep.spec.maxInFlight ?? 0)} jobs at once`,
  });
}

/** The id a self-hosted endpoint's jobs record: spec.endpointId, else the GpuEndpoint's name. */
const selfHostedEndpointId = (ep: GpuEndpoint): string => ep.spec.endpointId ?? ep.metadata.name;

/**
 * The base URL of the self-hosted endpoint whose jobs record this endpoint id, from the GpuEndpoints
 * (the provider client's `endpointBaseUrl`); undefined for a provider endpoint.
 */
export function selfHostedBaseUrl(endpoints: readonly GpuEndpoint[], endpointId: string): string | undefined {
  return endpoints.find((e) => e.spec.baseUrl !== undefined && selfHostedEndpointId(e) === endpointId)?.spec
    .baseUrl;
}

/**
 * The status and Events of a pass as they are decided. A condition is told by an Event only when
 * its status or reason changes (no Event storms); a healthy state is Normal and only a problem a
 * Warning (`kubectl get events --field-selector type=Warning` is how an operator looks for trouble).
 */
class Draft {
  observe?: EndpointPlan["observe"];

  constructor(
    readonly f: EndpointFacts,
    public status: GpuEndpointStatus,
    readonly events: EndpointEvent[],
    readonly refresh: Refresh[],
  ) {}

  set(finding: Finding, told?: EndpointEvent[0] | "byStatus"): void {
    const c = conditionOf(finding);
    const prev = getCondition(this.status.conditions, c.type);
    const type = told === "byStatus" ? (c.status === "True" ? "Normal" : "Warning") : told;
    if (type && (!prev || prev.status !== c.status || prev.reason !== c.reason))
      this.events.push([type, c.reason, c.message]);
    const gen = this.f.endpoint.metadata.generation;
    this.status = {
      ...this.status,
      conditions: setCondition(this.status.conditions, c, this.f.now.toISOString(), gen),
    };
  }

  /** Stops at an action: the status so far, for afterAction to finish. */
  plan(action: EndpointAction): EndpointPlan {
    return { status: this.status, events: this.events, action, refresh: this.refresh };
  }

  /** Ready set (told by its status), the generation observed. */
  finish(readiness: Finding, requeueAfterMs?: number): EndpointPlan {
    this.set(readiness, "byStatus");
    this.status = { ...this.status, observedGeneration: this.f.endpoint.metadata.generation };
    return {
      status: this.status,
      events: this.events,
      refresh: this.refresh,
      ...(this.observe && { observe: this.observe }),
      ...(requeueAfterMs !== undefined && { requeueAfterMs }),
    };
  }
}
