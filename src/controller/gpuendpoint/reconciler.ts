// Reconciles one GpuEndpoint: resolve it to a live provider endpoint, keep its worker settings in
// sync (restoring drift: the provider lowers maxWorkers on its own), and report what the runbook's
// diagnosis table asks for, as conditions. Ready is what MediaJobs wait for.
// Status is written only when it changed (lastSyncedAt is the time of the last change, not of the
// last look), so an endpoint at rest costs one look per tick and no write.
import type { Logger } from "pino";
import type { GpuEndpoint, GpuEndpointStatus } from "../../crds/gpuendpoint.js";
import type { Env } from "../../config/env.js";
import { conventionalEndpointName, endpointFromEnv } from "../../config/env.js";
import type { KubeApi } from "../../k8s/api.js";
import { describeError } from "../../k8s/errors.js";
import type { EventSink, EventType } from "../../k8s/events.js";
import {
  isProviderError,
  type GpuProviderClient,
  type ProviderEndpoint,
  type ProviderError,
} from "../../provider/index.js";
import { getCondition, setCondition, type ConditionInput } from "../../crds/conditions.js";
import type { Informer } from "../../runtime/informer.js";
import { StaleCacheGuard } from "../../runtime/stale-cache.js";
import { sameStatus } from "../../runtime/same-status.js";
import type { ReconcileResult } from "../../runtime/workqueue.js";
import {
  FIX_ENDPOINT,
  credentialsCondition,
  healthCondition,
  toHealth,
  warmWorkersCondition,
} from "./diagnosis.js";
import type { ProviderView } from "./provider-view.js";
import type { Dispatcher } from "../dispatch/dispatcher.js";
import { scalerOf } from "../../mediajob/window.js";

export interface GpuEndpointDeps {
  api: KubeApi;
  endpoints: Informer<GpuEndpoint>;
  provider: Pick<GpuProviderClient, "saveEndpoint" | "updateEndpointWorkers">;
  view: ProviderView;
  events: EventSink;
  log: Logger;
  env: Pick<
    Env,
    | "MEDIA_ENV"
    | "MEDIA_ENDPOINT_PREFIX"
    | "GPU_PROVIDER_ENDPOINT_ASR"
    | "GPU_PROVIDER_ENDPOINT_TTS"
    | "GPU_PROVIDER_ENDPOINT_RENDER"
  >;
  tickMs: number;
  now?: () => Date;
  /** Told the endpoint's capacity; its window and in-flight count go into the status. */
  dispatcher?: Dispatcher;
}

type Resolution =
  { endpoint: ProviderEndpoint; by: NonNullable<GpuEndpointStatus["resolvedBy"]> } | { missing: string };

export class GpuEndpointReconciler {
  private readonly stale = new StaleCacheGuard();

  constructor(private readonly d: GpuEndpointDeps) {}

  readonly reconcile = async (key: string): Promise<ReconcileResult | void> => {
    const ep = this.d.endpoints.getByKey(key);
    if (!ep || ep.metadata.deletionTimestamp) return this.stale.forget(key);
    if (this.stale.isStale(key, ep.metadata.resourceVersion)) return { requeueAfterMs: 100 };
    const now = (this.d.now?.() ?? new Date()).toISOString();
    const gen = ep.metadata.generation;
    const events: Array<[EventType, string, string]> = [];
    let status: GpuEndpointStatus = { ...ep.status };
    const set = (c: ConditionInput, eventType?: EventType) => {
      const prev = getCondition(status.conditions, c.type);
      if (eventType && (!prev || prev.status !== c.status || prev.reason !== c.reason))
        events.push([eventType, c.reason, c.message]);
      status = { ...status, conditions: setCondition(status.conditions, c, now, gen) };
    };
    // The tick looks at every endpoint again; a shorter requeue only where a retry is due sooner.
    const finish = async (
      ready: ConditionInput,
      requeueAfterMs?: number,
    ): Promise<ReconcileResult | void> => {
      set(ready, ready.status === "True" ? "Normal" : "Warning");
      status = { ...status, observedGeneration: gen };
      const { lastSyncedAt: _was, ...rest } = ep.status ?? {};
      if (!sameStatus({ ...status, lastSyncedAt: undefined }, rest)) {
        status = { ...status, lastSyncedAt: now };
        const written = await this.d.api.replaceStatus("gpuendpoints", { ...ep, status });
        this.stale.remember(key, ep.metadata.resourceVersion, written.metadata.resourceVersion);
      }
      for (const [type, reason, message] of events) await this.d.events.record(ep, type, reason, message);
      return requeueAfterMs === undefined ? undefined : { requeueAfterMs };
    };
    const notReady = (reason: string, message: string): ConditionInput => ({
      type: "Ready",
      status: "False",
      reason,
      message,
    });

    // A call made with the key (the endpoint list, a health check) refused for the key's sake: not
    // Ready, and the key is checked again at the next look, not minutes later.
    const refusedKey = (err: unknown): err is ProviderError =>
      isProviderError(err) && (err.code === "INVALID_API_KEY" || err.code === "ACCOUNT_PROBLEM");
    const keyRefused = (err: ProviderError) => {
      this.d.view.invalidateCredentials();
      const c = credentialsCondition(err);
      set(c, "Warning");
      return finish(notReady(c.reason, c.message));
    };

    // A healthy state is Normal, only a problem a Warning (`kubectl get events --field-selector
    // type=Warning` is how an operator looks for trouble).
    const byStatus = (c: ConditionInput): EventType => (c.status === "True" ? "Normal" : "Warning");
    const warm = warmWorkersCondition(this.d.env.MEDIA_ENV, ep.spec);
    set(warm, byStatus(warm));

    // 1. The key (checked once for every endpoint; the health check below uses it every tick).
    try {
      const { accountId } = await this.d.view.checkKey();
      set(credentialsCondition(undefined, accountId));
    } catch (err) {
      const c = credentialsCondition(isProviderError(err) ? err : undefined);
      if (!isProviderError(err)) c.message = `could not check the GPU API key: ${describeError(err)}`;
      set(c, "Warning");
      return finish(notReady(c.reason, c.message));
    }

    // 2. Which provider endpoint this is. A new or edited spec is compared with the provider's
    // settings as they are now, not as the last drift check saw them.
    if (gen !== ep.status?.observedGeneration) this.d.view.invalidateEndpoints();
    let resolved: Resolution;
    try {
      resolved = await this.resolve(ep);
    } catch (err) {
      if (refusedKey(err)) return keyRefused(err);
      const message = `could not list the provider's endpoints: ${describeError(err)}`;
      set({ type: "EndpointFound", status: "Unknown", reason: "ProviderUnavailable", message }, "Warning");
      return finish(notReady("ProviderUnavailable", message));
    }
    if ("missing" in resolved) {
      set(
        { type: "EndpointFound", status: "False", reason: "ENDPOINT_NOT_FOUND", message: resolved.missing },
        "Warning",
      );
      const { endpointId: _id, endpointName: _n, resolvedBy: _b, ...rest } = status;
      status = rest;
      return finish(notReady("ENDPOINT_NOT_FOUND", resolved.missing));
    }
    let live = resolved.endpoint;
    status = { ...status, endpointId: live.id, endpointName: live.name, resolvedBy: resolved.by };
    set(
      {
        type: "EndpointFound",
        status: "True",
        reason: "EndpointFound",
        message: `provider endpoint ${live.name} (${live.id}), resolved by ${resolved.by}`,
      },
      "Normal",
    );

    // 3. Workers in sync; drift at the provider is restored.
    const want = {
      workersMin: ep.spec.minWorkers,
      workersMax: ep.spec.maxWorkers,
      idleTimeout: ep.spec.idleTimeoutSeconds,
    };
    const drift = (Object.keys(want) as Array<keyof typeof want>).filter((k) => live[k] !== want[k]);
    if (drift.length) {
      try {
        live = await this.d.provider.updateEndpointWorkers(live.id, want);
        this.d.view.endpointSaved(live);
        const what = drift.map((k) => `${k} ${String(resolved.endpoint[k])} -> ${want[k]}`).join(", ");
        events.push(["Normal", "WorkersSynced", `set at the provider: ${what}`]);
      } catch (err) {
        const message = `could not update the workers at the provider: ${describeError(err)}`;
        set({ type: "WorkersInSync", status: "False", reason: "UpdateFailed", message }, "Warning");
        return finish(notReady("WorkersNotInSync", message), Math.min(this.d.tickMs, 5_000));
      }
    }
    const { executionTimeoutMs: _t, scalerType: _s, scalerValue: _v, ...kept } = status;
    status = {
      ...kept,
      workersMin: live.workersMin,
      workersMax: live.workersMax,
      idleTimeoutSeconds: live.idleTimeout,
      ...settingsOf(live),
    };
    set({
      type: "WorkersInSync",
      status: "True",
      reason: "InSync",
      message: `min ${live.workersMin}, max ${live.workersMax}, idle timeout ${live.idleTimeout}s`,
    });

    // The in-flight window is sized from the endpoint's autoscaler: one not known is told, never
    // taken for a default (the jobs wait in Kubernetes meanwhile, unless spec.maxInFlight is set).
    const scaler = scalerCondition(live, ep.spec.maxInFlight);
    set(scaler, byStatus(scaler));

    // 4. Health (informational: a sick endpoint still accepts jobs into its queue).
    try {
      const health = toHealth(await this.d.view.endpointHealth(live.id));
      const healthy = healthCondition(health, ep.status?.health, ep.spec);
      set(healthy, byStatus(healthy));
      status = { ...status, health };
    } catch (err) {
      // The health check is the one call made with the key every tick: a refusal is the key's.
      if (refusedKey(err)) return keyRefused(err);
      set({
        type: "WorkersHealthy",
        status: "Unknown",
        reason: "HealthUnavailable",
        message: `health check failed: ${describeError(err)}`,
      });
      // Perhaps gone at the provider since the last listing: the next tick lists again.
      if (isProviderError(err) && err.status === 404) this.d.view.invalidateEndpoints();
    }
    // 5. The in-flight window follows the capacity just seen (dispatch/dispatcher.ts).
    if (this.d.dispatcher) {
      this.d.dispatcher.observeEndpoint(
        { ...ep, status },
        {
          scalerType: live.scalerType as string | undefined,
          scalerValue: live.scalerValue as number | undefined,
        },
      );
      const { window, inFlight } = this.d.dispatcher.view(live.id);
      status = { ...status, window, inFlight };
    }
    return finish({
      type: "Ready",
      status: "True",
      reason: "Ready",
      message: `endpoint ${live.id} is live and in sync`,
    });
  };

  /** Creations in flight, by provider endpoint name. */
  private readonly creating = new Map<string, Promise<Resolution>>();

  /** spec.endpointId, else GPU_PROVIDER_ENDPOINT_<WORKLOAD>, else the endpoint named <prefix>-<workload>-<env>. */
  private async resolve(ep: GpuEndpoint): Promise<Resolution> {
    const all = await this.d.view.listEndpoints();
    const byId = (id: string, by: "spec" | "environment", source: string): Resolution => {
      const found = all.find((e) => e.id === id);
      return found
        ? { endpoint: found, by }
        : {
            missing: `endpoint id ${id} (from ${source}) does not match a live endpoint. Fix: ${FIX_ENDPOINT}`,
          };
    };
    if (ep.spec.endpointId) return byId(ep.spec.endpointId, "spec", "spec.endpointId");
    const fromEnv = endpointFromEnv(this.d.env as Env, ep.spec.workload);
    if (fromEnv)
      return byId(fromEnv, "environment", `GPU_PROVIDER_ENDPOINT_${ep.spec.workload.toUpperCase()}`);
    const name = conventionalEndpointName(this.d.env as Env, ep.spec.workload);
    const named = all.find((e) => e.name === name);
    // An endpoint we created is found by its name afterwards; it stays "created" while it is the same one.
    if (named)
      return {
        endpoint: named,
        by: ep.status?.resolvedBy === "created" && ep.status.endpointId === named.id ? "created" : "name",
      };
    if (ep.spec.create) return this.createOnce(ep, name);
    return {
      missing: `no endpoint id is set (spec.endpointId, GPU_PROVIDER_ENDPOINT_${ep.spec.workload.toUpperCase()}) and no provider endpoint is named ${name}. Fix: ${FIX_ENDPOINT}, or set spec.create`,
    };
  }

  /**
   * Creates the provider endpoint `name` unless it exists: one creation per name at a time in this
   * controller (GpuEndpoints of several namespaces, or several in one, may all want the same
   * conventional name, and reconcile concurrently), each after a fresh listing, not the tick's
   * cached one. A creation whose answer was lost is not sent again blindly: the listing of the
   * next attempt finds it.
   */
  private createOnce(ep: GpuEndpoint, name: string): Promise<Resolution> {
    const previous = this.creating.get(name) ?? Promise.resolve();
    const run = previous
      .catch(() => undefined)
      .then(async (): Promise<Resolution> => {
        this.d.view.invalidateEndpoints();
        const existing = (await this.d.view.listEndpoints()).find((e) => e.name === name);
        if (existing) return { endpoint: existing, by: "name" };
        return this.create(ep, name);
      });
    this.creating.set(name, run);
    return run.finally(() => {
      if (this.creating.get(name) === run) this.creating.delete(name);
    });
  }

  private async create(ep: GpuEndpoint, name: string): Promise<Resolution> {
    const spec = ep.spec.create!;
    {
      // No id: the provider creates the endpoint and assigns one.
      let created: ProviderEndpoint;
      try {
        created = await this.d.provider.saveEndpoint({
          name,
          templateId: spec.templateId,
          gpuIds: spec.gpuTypeIds.join(","),
          workersMin: ep.spec.minWorkers,
          workersMax: ep.spec.maxWorkers,
          idleTimeout: ep.spec.idleTimeoutSeconds,
          ...(spec.gpuCount ? { gpuCount: spec.gpuCount } : {}),
        } as ProviderEndpoint);
      } finally {
        // Created, refused or unknown: the next listing must ask the provider, not the cache.
        this.d.view.invalidateEndpoints();
      }
      await this.d.events.record(
        ep,
        "Normal",
        "EndpointCreated",
        `created provider endpoint ${name} (${created.id})`,
      );
      return { endpoint: created, by: "created" };
    }
  }
}

/** The endpoint's execution timeout and autoscaler, as the provider reports them (absent: not reported). */
function settingsOf(live: Record<string, unknown>): {
  executionTimeoutMs?: number;
  scalerType?: string;
  scalerValue?: number;
} {
  const num = (v: unknown): number | undefined =>
    typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined;
  const timeout = num(live.executionTimeoutMs);
  const value = num(live.scalerValue);
  return {
    ...(timeout !== undefined && { executionTimeoutMs: Math.floor(timeout) }),
    ...(typeof live.scalerType === "string" && live.scalerType && { scalerType: live.scalerType }),
    ...(value !== undefined && { scalerValue: value }),
  };
}

/** ScalerKnown: whether the endpoint's autoscaler is one the in-flight window can be sized from. */
function scalerCondition(live: Record<string, unknown>, maxInFlight: number | undefined): ConditionInput {
  const scaler = scalerOf(live.scalerType, live.scalerValue);
  if (scaler)
    return {
      type: "ScalerKnown",
      status: "True",
      reason: "ScalerKnown",
      message: `${scaler.type} ${String(live.scalerValue)}`,
    };
  const seen = `scalerType ${JSON.stringify(live.scalerType ?? null)}, scalerValue ${JSON.stringify(live.scalerValue ?? null)}`;
  return {
    type: "ScalerKnown",
    status: "False",
    reason: "ScalerUnknown",
    message:
      `the provider reports ${seen}: not QUEUE_DELAY or REQUEST_COUNT with a positive value. ` +
      (maxInFlight === undefined
        ? "The in-flight window is sized from the scaler, so jobs wait in Kubernetes (Queued, ScalerUnknown) " +
          "until it is known. Fix: set the endpoint's scaler at the provider, or spec.maxInFlight"
        : `spec.maxInFlight (${maxInFlight}) sizes the window meanwhile`),
  };
}
