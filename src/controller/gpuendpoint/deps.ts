// What the GpuEndpoint loop's executor (reconciler.ts, gather.ts, act.ts) is given: its own module,
// so the executor's parts import it without importing each other in a circle.
import type { Logger } from "pino";
import type { GpuEndpoint } from "../../crds/gpuendpoint.js";
import type { Env } from "../../config/env.js";
import type { KubeApi } from "../../k8s/api.js";
import type { EventSink } from "../../k8s/events.js";
import type { GpuProviderClient } from "../../provider/index.js";
import type { Informer } from "../../runtime/informer.js";
import type { Dispatcher } from "../dispatch/dispatcher.js";
import type { ProviderView } from "./provider-view.js";

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
