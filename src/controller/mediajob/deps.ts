// What the MediaJob executor is given: the caches it reads, the clients it calls, its settings.
import type { Logger } from "pino";
import type { Store } from "../../storage/index.js";
import type { BillingAccount, OrphanedRun } from "../../crds/billingaccount.js";
import type { GpuEndpoint } from "../../crds/gpuendpoint.js";
import type { MediaJob } from "../../crds/mediajob.js";
import type { EventSink } from "../../k8s/events.js";
import type { PassError, PlanSettings, RecoveryKind, SubmissionOutcome } from "../../mediajob/pass.js";
import type { GpuProviderClient } from "../../provider/index.js";
import type { AccountJobs } from "../account-jobs.js";
import type { Dispatcher } from "../dispatch/dispatcher.js";
import type { Informer } from "../../runtime/informer.js";
import type { ReconcileResult } from "../../runtime/workqueue.js";
import type { JobApi } from "./writes.js";

interface MediaJobSettings extends PlanSettings {
  callbackBaseUrl: string;
  callbackSecret: string;
}

export interface MediaJobDeps {
  api: JobApi;
  jobs: Pick<Informer<MediaJob>, "getByKey" | "get">;
  endpoints: Pick<Informer<GpuEndpoint>, "get" | "list">;
  accounts: Pick<Informer<BillingAccount>, "get">;
  /** The accounts a namespace is bound to (its Namespace's annotation, from the cache). */
  boundAccounts: (namespace: string) => string[];
  provider: Pick<GpuProviderClient, "submit" | "status" | "cancel">;
  events: EventSink;
  log: Logger;
  settings: MediaJobSettings;
  /** Where the sidecar keeps BillingAccounts; undefined: the job's own namespace. */
  accountNamespace?: string;
  /**
   * The leader's fence, checked immediately before every side effect at the provider: false once
   * this replica may no longer be the leader. Undefined: always true (no leader election).
   */
  fence?: () => boolean;
  /** Aborted when leadership is lost: in-flight provider calls stop waiting. */
  leadership?: () => AbortSignal | undefined;
  onSubmission?: (outcome: SubmissionOutcome) => void;
  /**
   * The MediaJobs that hold a provider job id (src/callback/holders.ts): a /run answer naming a job
   * another MediaJob holds is not recorded. Undefined: not asked.
   */
  holders?: (providerJobId: string) => Promise<string[] | "unsupported">;
  /**
   * The endpoints' in-flight windows and fair share (dispatch/dispatcher.ts). Undefined: no
   * window, every job that may go is submitted at once.
   */
  dispatcher?: Dispatcher;
  now?: () => Date;
  onTransition?: (from: string | undefined, to: string | undefined) => void;
  /** A job recovered by the controller itself (for metrics). */
  onRecovery?: (kind: RecoveryKind) => void;
  /** A deletion let go of a job whose usage was not reported: these GPU seconds (for metrics). */
  onUsageDropped?: (seconds: number) => void;
  /**
   * Puts a run left at the provider on its BillingAccount's status.orphans (orphan.ts), once:
   * "present" when an earlier pass did, "missing" when there is no BillingAccount to hold it.
   */
  recordOrphan: (orphan: OrphanedRun) => Promise<"added" | "present" | "missing">;
  /** A deletion let go of a job whose run may go on: followed and billed, or not (for metrics). */
  onRunLeft?: (followed: boolean) => void;
  /**
   * The object store, once opened (src/storage/index.ts: loaded only when storage is configured):
   * it signs an attempt's URLs and answers the check of its outputs. Undefined: not open.
   */
  store?: () => Store | undefined;
  /** A hosted output's copy ended: kept, not kept, or cut short and retried (keep-outputs.ts; metrics). */
  onOutputKept?: (outcome: "kept" | "not_kept" | "retried") => void;
  /** Running jobs per account, for the plans' concurrency cap; needed when plans are configured. */
  accountJobs?: AccountJobs;
}

/** A pass's result, as controller-runtime's `(Result, error)`. */
export interface PassResult {
  result?: ReconcileResult;
  error?: PassError;
}
