// What the manager hands each loop's setup (mediajob/setup.ts, gpuendpoint/setup.ts,
// dispatch/setup.ts, usage/setup.ts): the shared caches and clients, the leader's state, and a
// maker of runtime controllers. Each loop declares from it its watches, map functions and settings,
// as controller-runtime's SetupWithManager does.
import type { Logger } from "pino";
import type { BillingAccount } from "../crds/billingaccount.js";
import type { GpuEndpoint } from "../crds/gpuendpoint.js";
import type { MediaJob } from "../crds/mediajob.js";
import type { Env } from "../config/env.js";
import type { KubeApi, KubeObject } from "../k8s/api.js";
import type { BackgroundEventRecorder } from "../k8s/events.js";
import type { GpuProviderClient } from "../provider/index.js";
import type { Controller } from "../runtime/controller.js";
import type { Informer } from "../runtime/informer.js";
import type { Reconciler } from "../runtime/workqueue.js";
import type { ControllerMetrics } from "./metrics.js";

/** The informers' caches every loop reads; Namespaces trimmed to their account binding. */
interface Caches {
  jobs: Informer<MediaJob>;
  endpoints: Informer<GpuEndpoint>;
  accounts: Informer<BillingAccount>;
  namespaces: Informer<KubeObject>;
}

export interface LoopContext {
  api: KubeApi;
  provider: GpuProviderClient;
  env: Env;
  log: Logger;
  metrics: ControllerMetrics;
  caches: Caches;
  events: BackgroundEventRecorder;
  /** Where BillingAccounts live (the sidecar's namespace). */
  accountNamespace: string;
  /** The resync interval (RESYNC_INTERVAL_SECONDS), in ms. */
  tickMs: number;
  /** Whether every cache has synced. */
  synced: () => boolean;
  /** Whether this replica leads now. */
  leading: () => boolean;
  /** Whether it leads and still holds the Lease: checked immediately before a side effect. */
  fence: () => boolean;
  /** Aborted when leadership is lost, so in-flight provider calls stop at once. */
  leadership: () => AbortSignal | undefined;
  /** Told of any work (the idle compaction's clock). */
  noteWork: () => void;
  /** The accounts a namespace is bound to, from the cache (mediajob/tenancy.ts). */
  boundAccounts: (namespace: string) => string[];
  /** The customer's BillingAccount in the cache. */
  account: (customerId: string) => BillingAccount | undefined;
  /** A runtime controller, its metrics and logs under `name`; the manager runs it while it leads. */
  controller: (o: {
    name: string;
    reconcile: Reconciler;
    concurrency: number;
    baseDelayMs?: number;
    maxDelayMs?: number;
  }) => Controller;
}
