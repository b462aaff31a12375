// Builders of the project's objects for tests, in the style of Kueue's pkg/util/testingjobs: a
// test names what matters to it and the builder fills the rest, so a fixture reads as the case it
// is (`makeMediaJob("clip").ns("ns").account("cus_1").status(running).build()`) and the shape of
// the objects lives in one place, typed with the zod-inferred types of src/crds.
//
// A builder adds nothing a test did not ask for besides apiVersion, kind, the name and the
// workload: no namespace, uid, generation or finalizer unless set, so an object built here is the
// one a literal with the same fields would be. `build()` returns a new object each time (its
// metadata and spec copied one level deep); the status given is used as it is, so a planner that
// returns the status it was handed can be asserted with `toBe`.
import {
  API_VERSION,
  billingAccountName,
  type BillingAccount,
  type BillingAccountStatus,
  type GpuEndpoint,
  type GpuEndpointSpec,
  type GpuEndpointStatus,
  type MediaJob,
  type MediaJobSpec,
  type MediaJobStatus,
  type ObjectMeta,
  type SubscriptionStatus,
  type UsageAttempt,
  Workload as WorkloadSchema,
  type Workload,
} from "../../src/crds/index.js";
import { FINALIZER } from "../../src/mediajob/job.js";

/** The metadata setters every builder shares. */
abstract class ObjectBuilder<T> {
  protected metadata: ObjectMeta;

  protected constructor(name: string) {
    this.metadata = { name };
  }

  ns(namespace: string): this {
    this.metadata.namespace = namespace;
    return this;
  }

  uid(uid: string): this {
    this.metadata.uid = uid;
    return this;
  }

  generation(generation: number): this {
    this.metadata.generation = generation;
    return this;
  }

  resourceVersion(resourceVersion: string): this {
    this.metadata.resourceVersion = resourceVersion;
    return this;
  }

  finalizers(...finalizers: string[]): this {
    this.metadata.finalizers = finalizers;
    return this;
  }

  labels(labels: Record<string, string>): this {
    this.metadata.labels = { ...this.metadata.labels, ...labels };
    return this;
  }

  annotations(annotations: Record<string, string>): this {
    this.metadata.annotations = { ...this.metadata.annotations, ...annotations };
    return this;
  }

  created(creationTimestamp: string): this {
    this.metadata.creationTimestamp = creationTimestamp;
    return this;
  }

  /** Being deleted since `deletionTimestamp`. */
  deleting(deletionTimestamp: string): this {
    this.metadata.deletionTimestamp = deletionTimestamp;
    return this;
  }

  /** Any other metadata (ownerReferences, managedFields), over what was set. */
  meta(metadata: Partial<ObjectMeta>): this {
    this.metadata = { ...this.metadata, ...metadata };
    return this;
  }

  abstract build(): T;
}

export class MediaJobBuilder extends ObjectBuilder<MediaJob> {
  private jobSpec: MediaJobSpec = { workload: "asr" };
  private jobStatus: MediaJobStatus | undefined;

  constructor(name: string) {
    super(name);
  }

  workload(workload: Workload): this {
    this.jobSpec.workload = workload;
    return this;
  }

  input(input: Record<string, unknown>): this {
    this.jobSpec.input = input;
    return this;
  }

  /** spec.account: the customer billed; undefined or "" leaves it out. */
  account(account: string | undefined): this {
    if (account) this.jobSpec.account = account;
    else delete this.jobSpec.account;
    return this;
  }

  /** Any spec fields, over what was set. */
  spec(spec: Partial<MediaJobSpec>): this {
    this.jobSpec = { ...this.jobSpec, ...spec };
    return this;
  }

  /** The status as it is (undefined: none). */
  status(status: MediaJobStatus | undefined): this {
    this.jobStatus = status;
    return this;
  }

  build(): MediaJob {
    return {
      apiVersion: API_VERSION,
      kind: "MediaJob",
      metadata: { ...this.metadata },
      spec: { ...this.jobSpec },
      ...(this.jobStatus !== undefined && { status: this.jobStatus }),
    };
  }
}

/**
 * A GpuEndpoint's spec as a user writes it: the fields with a schema default (minWorkers,
 * maxWorkers, idleTimeoutSeconds) may be left out, as the apiserver fills them.
 */
type EndpointSpecInput = Partial<GpuEndpointSpec> & { workload: Workload };

export class GpuEndpointBuilder extends ObjectBuilder<GpuEndpoint> {
  private endpointSpec: EndpointSpecInput;
  private endpointStatus: GpuEndpointStatus | undefined;

  constructor(name: string, workload: Workload) {
    super(name);
    this.endpointSpec = { workload };
  }

  workload(workload: Workload): this {
    this.endpointSpec.workload = workload;
    return this;
  }

  /** Any spec fields, over what was set. */
  spec(spec: Partial<GpuEndpointSpec>): this {
    this.endpointSpec = { ...this.endpointSpec, ...spec };
    return this;
  }

  /** The status as it is (undefined: none). */
  status(status: GpuEndpointStatus | undefined): this {
    this.endpointStatus = status;
    return this;
  }

  /**
   * Found at the provider as `endpointId` and Ready since `since` (`lastTransitionTime`: left out
   * when undefined, as some plans' fixtures do), with any other status fields.
   */
  ready(endpointId: string, since: string | undefined, more: Partial<GpuEndpointStatus> = {}): this {
    this.endpointStatus = {
      endpointId,
      ...more,
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "Ready",
          message: "",
          ...(since !== undefined && { lastTransitionTime: since }),
        } as NonNullable<GpuEndpointStatus["conditions"]>[number],
      ],
    };
    return this;
  }

  build(): GpuEndpoint {
    return {
      apiVersion: API_VERSION,
      kind: "GpuEndpoint",
      metadata: { ...this.metadata },
      spec: { ...this.endpointSpec } as GpuEndpointSpec,
      ...(this.endpointStatus !== undefined && { status: this.endpointStatus }),
    };
  }
}

export class BillingAccountBuilder extends ObjectBuilder<BillingAccount> {
  private accountStatus: BillingAccountStatus | undefined;

  constructor(private readonly customerId: string) {
    super(billingAccountName(customerId));
  }

  /** Another object name than billingAccountName(customerId) (an account under a wrong name). */
  named(name: string): this {
    this.metadata.name = name;
    return this;
  }

  /** status.subscriptionStatus, over the rest of the status. */
  subscription(state: SubscriptionStatus): this {
    this.accountStatus = { ...this.accountStatus, subscriptionStatus: state };
    return this;
  }

  /** The status as it is (undefined: none). */
  status(status: BillingAccountStatus | undefined): this {
    this.accountStatus = status;
    return this;
  }

  build(): BillingAccount {
    return {
      apiVersion: API_VERSION,
      kind: "BillingAccount",
      metadata: { ...this.metadata },
      spec: { customerId: this.customerId },
      ...(this.accountStatus !== undefined && { status: this.accountStatus }),
    };
  }
}

/** A MediaJob named `name`, workload asr until told otherwise. */
export const makeMediaJob = (name: string): MediaJobBuilder => new MediaJobBuilder(name);

/**
 * A GpuEndpoint named `name`, for `workload`; without one, the name must be a workload (the tests
 * name an endpoint after the workload it serves).
 */
export function makeGpuEndpoint(name: string, workload?: Workload): GpuEndpointBuilder {
  const served = workload ?? WorkloadSchema.safeParse(name).data;
  if (served === undefined) throw new Error(`makeGpuEndpoint("${name}"): name a workload for it`);
  return new GpuEndpointBuilder(name, served);
}

/** The BillingAccount of `customerId`, under the name billingAccountName gives it. */
export const makeBillingAccount = (customerId: string): BillingAccountBuilder =>
  new BillingAccountBuilder(customerId);

/**
 * The job the planners' tests are about: clip in ns (uid-1, generation 1), holding the controller's
 * finalizer, as every job does once the controller has taken it on.
 */
export const trackedJob = (): MediaJobBuilder =>
  makeMediaJob("clip").ns("ns").uid("uid-1").generation(1).finalizers(FINALIZER);

/**
 * A job's first attempt submitted at `at` to endpoint ep-1 and accepted as provider job p-1
 * (submission s-1), with `more` over it (a field given replaces the whole field, submission too).
 */
export const submittedStatus = (at: string, more: Partial<MediaJobStatus> = {}): MediaJobStatus => ({
  phase: "Processing",
  jobId: "uid-1",
  attempts: 1,
  endpointId: "ep-1",
  providerJobId: "p-1",
  submittedAt: at,
  startedAt: at,
  submission: { attempt: 1, id: "s-1", startedAt: at, state: "Accepted" },
  ...more,
});

/**
 * A completed job's status whose one attempt was billed to cus_1 and waits for its report (meter
 * Pending): attempt 1 of provider job p-1, 42 s, identifier mj_uid-1_1, with `attempt` over it.
 */
export const meteredStatus = (endedAt: string, attempt: Partial<UsageAttempt> = {}): MediaJobStatus => ({
  phase: "Completed",
  usage: {
    account: "cus_1",
    workload: "asr",
    attempts: [
      {
        attempt: 1,
        providerJobId: "p-1",
        providerStatus: "COMPLETED",
        endedAt,
        billedSeconds: 42,
        meter: "Pending",
        eventName: "gpu_seconds",
        identifier: "mj_uid-1_1",
        ...attempt,
      },
    ],
  },
});
