// The GpuEndpoint loop's setup: its reconciler, the provider view its reconciles share, its
// controller (a failing endpoint retries at least once a tick) and its watch.
import { objectKey } from "../../runtime/informer.js";
import { OwnWrites, recordingWrites } from "../../runtime/own-writes.js";
import type { Dispatcher } from "../dispatch/dispatcher.js";
import type { LoopContext } from "../loop-context.js";
import { ProviderView } from "./provider-view.js";
import { GpuEndpointReconciler } from "./reconciler.js";

export function setupGpuEndpoint(ctx: LoopContext, dispatcher: Dispatcher | undefined) {
  const { env, tickMs } = ctx;
  const { endpoints } = ctx.caches;
  /** resourceVersions of our own writes, whose watch events are not a reason to reconcile. */
  const ownWrites = new OwnWrites();
  // Shared for a tick, with room for the tick timer and the reconciles to drift by up to 500 ms.
  const providerView = new ProviderView(
    ctx.provider,
    tickMs - Math.min(500, tickMs / 2),
    env.PROVIDER_DRIFT_CHECK_SECONDS * 1000 - 500,
  );
  const reconciler = new GpuEndpointReconciler({
    api: recordingWrites(ctx.api, "gpuendpoints", ownWrites),
    endpoints,
    provider: ctx.provider,
    view: providerView,
    events: ctx.events,
    log: ctx.log.child({ controller: "gpuendpoint" }),
    env,
    tickMs,
    ...(dispatcher && { dispatcher }),
  });
  const controller = ctx.controller({
    name: "gpuendpoint",
    reconcile: async (key) => {
      const result = await reconciler.reconcile(key);
      return result ? { result } : undefined;
    },
    concurrency: Math.max(1, Math.min(4, env.MAX_CONCURRENT_RECONCILES)),
    maxDelayMs: tickMs,
  });
  endpoints.on((event, ep) => {
    ctx.noteWork();
    if (event === "delete") ownWrites.forget(ep);
    // The event of our own status write changes nothing the reconcile has not seen.
    if (event === "delete" || !ownWrites.claim(ep)) controller.queue.add(objectKey(ep));
  });
  return {
    reconciler,
    controller,
    providerView,
    ownWrites,
    /** The tick: every endpoint, unless it waits out a failure's backoff. */
    resync(): void {
      for (const key of endpoints.keys()) controller.queue.addUnlessBackingOff(key);
    },
  };
}
