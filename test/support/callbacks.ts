// GPU callbacks under test: MediaJobs in the state the controller leaves them in when it submits
// (the write-ahead submission intent, then the provider's id), real jobs at the simulator whose
// webhook is that submission's callback URL, and the URL itself. No controller runs: every change
// a test sees after this is the sidecar's.
import { randomBytes } from "node:crypto";
import { callbackExpiry, callbackUrl, type CallbackTarget } from "../../src/callback/token.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/index.js";
import type { KubeApi } from "../../src/k8s/api.js";
import { initialStatus, providerRequestId } from "../../src/mediajob/job.js";
import { intentStatus, recordAccepted } from "../../src/mediajob/submission.js";
import { resetToPending } from "../../src/mediajob/recovery.js";
import { GpuProviderClient } from "../../src/provider/index.js";
import type { SimJob, Simulator } from "../../tools/simulator/server.js";
import { makeMediaJob } from "./builders.js";
import { eventually } from "./kube.js";
import { PREFIX, SIM_KEY, TEST_ENV, simEndpointId } from "./stack.js";

const PROVIDER_TERMINAL = new Set(["COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED"]);

/** A client of the simulator's job API, as the controller and the sidecar hold one. */
export function simulatorClient(sim: Simulator, apiKey = SIM_KEY): GpuProviderClient {
  return new GpuProviderClient({
    apiUrl: sim.url,
    apiKey,
    timeoutMs: 5_000,
    retryBudgetMs: 5_000,
    retryBaseDelayMs: 20,
  });
}

/** What the callback URL of the job's current submission names. */
export function targetOf(job: MediaJob): CallbackTarget {
  const sub = job.status?.submission;
  if (!sub || !job.status?.jobId) throw new Error(`MediaJob ${job.metadata.name} has no submission intent`);
  return {
    namespace: job.metadata.namespace!,
    name: job.metadata.name,
    uid: job.metadata.uid!,
    jobId: job.status.jobId,
    attempt: sub.attempt,
    submission: sub.id,
  };
}

export interface CallbackJobsOptions {
  api: KubeApi;
  namespace: string;
  /** CALLBACK_SECRET of the sidecar under test. */
  secret: string;
  sim: Simulator;
  /** The sidecar's base URL, read when a URL is made (the sidecar may start after this). */
  sidecarUrl?: () => string;
  apiKey?: string;
}

export interface SubmitOptions {
  /** Send the callback URL as the job's webhook (default true); false: the provider never calls. */
  webhook?: boolean;
  /** Keep the job IN_PROGRESS at the provider until release(job). */
  hold?: boolean;
  /** Record the provider's id, as the controller does when /run answers (default true). */
  record?: boolean;
  policy?: { executionTimeout?: number; ttl?: number };
}

export class CallbackJobs {
  readonly provider: GpuProviderClient;

  constructor(private readonly o: CallbackJobsOptions) {
    this.provider = simulatorClient(o.sim, o.apiKey);
  }

  /** The simulator's endpoint for the asr workload. */
  get endpointId(): string {
    const id = simEndpointId(this.o.sim, `${PREFIX}-asr-${TEST_ENV}`);
    if (!id) throw new Error("the simulator has no asr endpoint");
    return id;
  }

  /**
   * Creates a MediaJob and writes its submission intent, as the controller does just before /run:
   * Processing, attempt 1, a random submission id, the endpoint. Its input is unique to it, so its
   * output at the provider is too.
   */
  async intent(
    name: string,
    opts: { spec?: Record<string, unknown>; status?: Partial<MediaJobStatus> } = {},
  ): Promise<MediaJob> {
    const created = await this.o.api.create<MediaJob>(
      "mediajobs",
      this.o.namespace,
      makeMediaJob(name)
        .input({ audio: `${name}.wav` })
        .spec((opts.spec ?? {}) as Partial<MediaJob["spec"]>)
        .build(),
    );
    const now = new Date().toISOString();
    const before = { ...initialStatus(created, now), ...opts.status };
    return this.o.api.replaceStatus<MediaJob>("mediajobs", {
      ...created,
      status: intentStatus(before, { endpointId: this.endpointId, submissionId: newSubmissionId(), now }),
    });
  }

  /** The intent of the job's next attempt, as written after a reset: the earlier URL is stale. */
  async nextIntent(job: MediaJob): Promise<MediaJob> {
    const now = new Date().toISOString();
    const current = (await this.o.api.get<MediaJob>("mediajobs", this.o.namespace, job.metadata.name))!;
    const reset = resetToPending(current.status!, now) ?? current.status!;
    return this.o.api.replaceStatus<MediaJob>("mediajobs", {
      ...current,
      status: intentStatus(reset, { endpointId: this.endpointId, submissionId: newSubmissionId(), now }),
    });
  }

  /**
   * The callback URL of the job's current submission, on the sidecar unless `base` is given, as the
   * controller mints it (it expires after the default timeout plus the provider's retention).
   */
  url(job: MediaJob, base = this.o.sidecarUrl?.(), expiresAt = callbackExpiry(Date.now(), 600)): string {
    if (base === undefined) throw new Error("no sidecar URL to make a callback URL with");
    return callbackUrl(base, this.o.secret, targetOf(job), { expiresAt });
  }

  /** POST /run to the simulator for the job's current submission; the provider's job id. */
  async submit(job: MediaJob, opts: SubmitOptions = {}): Promise<string> {
    const jobId = job.status!.jobId!;
    const id = providerRequestId(job, job.status, jobId);
    // The simulator keys a job by our job id in its webhook URL, else by the id it was sent with.
    if (opts.hold) this.o.sim.holdJob(opts.webhook === false ? id : jobId);
    const res = await this.provider.submit(this.endpointId, {
      id,
      input: job.spec.input ?? {},
      ...(opts.webhook !== false && { webhook: this.url(job) }),
      ...(opts.policy && { policy: opts.policy }),
    });
    return res.id;
  }

  /** Records the provider's id of the current attempt, as the controller does when /run answers. */
  async accept(job: MediaJob, providerJobId: string): Promise<MediaJob> {
    const res = await this.o.api.updateStatusWithRetry<MediaJob>(
      "mediajobs",
      this.o.namespace,
      job.metadata.name,
      (cur) => {
        const status = recordAccepted(cur.status, job.status!.submission!.attempt, providerJobId);
        return status && { ...cur, status };
      },
    );
    return res.object!;
  }

  /** A MediaJob submitted to the simulator: intent, /run, and (unless `record: false`) the id recorded. */
  async submitted(
    name: string,
    opts: SubmitOptions & { spec?: Record<string, unknown>; status?: Partial<MediaJobStatus> } = {},
  ): Promise<{ job: MediaJob; providerJobId: string }> {
    const intent = await this.intent(name, opts);
    const providerJobId = await this.submit(intent, opts);
    const job = opts.record === false ? intent : await this.accept(intent, providerJobId);
    return { job, providerJobId };
  }

  /** Lets the job's held submission finish at the provider (held by our job id, or by the id it was sent with). */
  release(job: MediaJob): void {
    const jobId = job.status!.jobId!;
    this.o.sim.releaseJob(jobId);
    this.o.sim.releaseJob(providerRequestId(job, job.status, jobId));
  }

  /**
   * The provider's final state of the job's newest submission, once it has one: found by our job
   * id (its webhook URL's), else by the id it was sent with (a submission without a webhook).
   */
  finished(job: MediaJob): Promise<SimJob> {
    const jobId = job.status!.jobId!;
    const id = providerRequestId(job, job.status, jobId);
    return eventually(
      () => {
        const j = this.o.sim.getJob(jobId) ?? this.o.sim.getJob(id);
        return j && PROVIDER_TERMINAL.has(j.status) ? j : undefined;
      },
      { message: `the provider to finish ${id}` },
    );
  }
}

const newSubmissionId = () => randomBytes(12).toString("base64url");
