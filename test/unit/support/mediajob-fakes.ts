// Fakes for driving the MediaJob reconciler without a control plane: a cache (the informers' view),
// scripted Kubernetes writes and a scripted provider. Every scripted fake FAILS on a call it was not
// told to expect, and `done()` fails on an expected call that never came: a table case lists every
// side effect of its pass, in order, and nothing else may happen.
import pino from "pino";
import type { GpuEndpoint } from "../../../src/crds/gpuendpoint.js";
import type { MediaJob } from "../../../src/crds/mediajob.js";
import type { BillingAccount } from "../../../src/crds/billingaccount.js";
import type { MediaJobDeps } from "../../../src/controller/mediajob/deps.js";
import { MediaJobReconciler } from "../../../src/controller/mediajob/reconciler.js";
import { ProviderError, type ProviderErrorCode } from "../../../src/provider/errors.js";

/** One expected call: its method, a check of its arguments, and its answer (or the error it throws). */
export interface Expect {
  call: string;
  check?: (...args: any[]) => void; // eslint-disable-line @typescript-eslint/no-explicit-any
  answer?: (...args: any[]) => unknown; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** A scripted collaborator: its calls must come in the scripted order. */
export class Script {
  readonly calls: Array<{ call: string; args: unknown[] }> = [];
  private i = 0;
  constructor(
    private readonly name: string,
    private readonly expected: Expect[],
  ) {}

  async take(call: string, args: unknown[]): Promise<unknown> {
    this.calls.push({ call, args });
    const e = this.expected[this.i++];
    if (!e || e.call !== call)
      throw new Error(
        `${this.name}: unexpected ${call}(${JSON.stringify(args).slice(0, 300)}); expected ${e?.call ?? "nothing"}`,
      );
    e.check?.(...args);
    return e.answer?.(...args);
  }

  done(): void {
    const left = this.expected.slice(this.i).map((e) => e.call);
    if (left.length) throw new Error(`${this.name}: expected calls never made: ${left.join(", ")}`);
  }
}

export const kubeError = (code: number, reason?: string) =>
  Object.assign(new Error(`HTTP ${code}`), { code, body: { reason, message: reason ?? `HTTP ${code}` } });
export const providerError = (code: ProviderErrorCode, mayHaveBeenAccepted = false) =>
  new ProviderError(code, `provider says ${code}`, { mayHaveBeenAccepted });

/** A map-backed cache with the informer's read methods. */
class Cache<T extends { metadata: { name: string; namespace?: string } }> {
  private readonly byKey = new Map<string, T>();
  constructor(objects: T[]) {
    for (const o of objects) this.byKey.set(`${o.metadata.namespace}/${o.metadata.name}`, o);
  }
  getByKey = (key: string) => this.byKey.get(key);
  get = (ns: string, name: string) => this.byKey.get(`${ns}/${name}`);
  list = (ns?: string) =>
    [...this.byKey.values()].filter((o) => ns === undefined || o.metadata.namespace === ns);
}

export interface World {
  jobs: MediaJob[];
  endpoints?: GpuEndpoint[];
  accounts?: BillingAccount[];
  kube?: Expect[];
  provider?: Expect[];
  leader?: boolean | (() => boolean);
  now: Date;
  settings?: Partial<MediaJobDeps["settings"]>;
  /** The endpoints' in-flight windows; absent: none (every job goes at once). */
  dispatcher?: MediaJobDeps["dispatcher"];
  /** Running jobs per account (the plans' concurrency cap); absent: not counted. */
  accountJobs?: MediaJobDeps["accountJobs"];
  /** The accounts bound to each namespace; absent: every namespace to the accounts its jobs name. */
  bound?: Record<string, string[]>;
}

export function harness(w: World) {
  const kube = new Script("kubernetes", w.kube ?? []);
  const provider = new Script("provider", w.provider ?? []);
  const events: Array<[string, string, string]> = [];
  const submissions: string[] = [];
  const recoveries: string[] = [];
  const dropped: number[] = [];
  const leader = w.leader ?? true;
  const deps: MediaJobDeps = {
    api: {
      replaceStatus: (...a: unknown[]) => kube.take("replaceStatus", a),
      mergePatch: (...a: unknown[]) => kube.take("mergePatch", a),
      updateStatusWithRetry: (...a: unknown[]) => kube.take("updateStatusWithRetry", a),
      create: (...a: unknown[]) => kube.take("create", a),
      get: (...a: unknown[]) => kube.take("get", a),
      rawJson: (...a: unknown[]) => kube.take("rawJson", a),
    } as unknown as MediaJobDeps["api"],
    jobs: new Cache(w.jobs),
    endpoints: new Cache(w.endpoints ?? []),
    accounts: new Cache(w.accounts ?? []),
    recordOrphan: (...a: unknown[]) => kube.take("recordOrphan", a) as never,
    boundAccounts: (ns: string) =>
      w.bound?.[ns] ?? [
        ...new Set(w.jobs.flatMap((j) => (j.spec.account === undefined ? [] : [j.spec.account]))),
      ],
    provider: {
      submit: (...a: unknown[]) => provider.take("submit", a),
      status: (...a: unknown[]) => provider.take("status", a),
      cancel: (...a: unknown[]) => provider.take("cancel", a),
    } as unknown as MediaJobDeps["provider"],
    events: {
      record: async (_t, type, reason, message) => {
        events.push([type, reason, message]);
      },
    },
    log: pino({ level: "silent" }),
    settings: {
      callbackBaseUrl: "https://hooks.example.test",
      callbackSecret: "x".repeat(32),
      defaultTimeoutSeconds: 600,
      tickMs: 30_000,
      ...w.settings,
    },
    fence: typeof leader === "function" ? leader : () => leader,
    now: () => w.now,
    onSubmission: (o) => submissions.push(o),
    onRecovery: (k) => recoveries.push(k),
    onUsageDropped: (seconds) => dropped.push(seconds),
    ...(w.dispatcher && { dispatcher: w.dispatcher }),
    ...(w.accountJobs && { accountJobs: w.accountJobs }),
  };
  const reconciler = new MediaJobReconciler(deps);
  return {
    reconciler,
    kube,
    provider,
    events,
    submissions,
    recoveries,
    /** GPU seconds counted as dropped on deletion (the metric). */
    dropped,
    done: () => {
      kube.done();
      provider.done();
    },
  };
}

/** A replaceStatus that succeeds, returning the object with a new resourceVersion. */
export const stored =
  (rv = "2") =>
  (obj: MediaJob) => ({ ...obj, metadata: { ...obj.metadata, resourceVersion: rv } });
