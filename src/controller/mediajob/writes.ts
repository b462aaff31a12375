// The MediaJob executor's Kubernetes writes. Every status write tells the stale-cache guard which
// resourceVersion it replaced, so the next pass waits for the cache to catch up rather than
// deciding from a version older than its own write.
import type { Logger } from "pino";
import { API_VERSION } from "../../crds/common.js";
import type { ConditionInput } from "../../crds/conditions.js";
import type { MediaJob, MediaJobStatus } from "../../crds/mediajob.js";
import type { KubeApi } from "../../k8s/api.js";
import { isConflict, isNotFound } from "../../k8s/errors.js";
import { withPhaseConditions } from "../../mediajob/conditions.js";
import { FINALIZER } from "../../mediajob/job.js";
import { pipelineReportStatus } from "../../mediajob/pipeline.js";
import { USAGE_FINALIZER } from "../../mediajob/usage-hold.js";
import type { StaleCacheGuard } from "../../runtime/stale-cache.js";

export type JobApi = Pick<
  KubeApi,
  "replaceStatus" | "mergePatch" | "updateStatusWithRetry" | "create" | "get" | "rawJson"
>;

export const jobKey = (job: MediaJob): string => `${job.metadata.namespace}/${job.metadata.name}`;

export class JobWrites {
  constructor(
    private readonly api: JobApi,
    private readonly stale: StaleCacheGuard,
    private readonly now: () => Date,
    private readonly log: Logger,
  ) {}

  /**
   * A status write with the resourceVersion the object was read at (a conflict throws). `remember`:
   * the next pass waits for the cache to hold this version.
   */
  async replaceStatus(job: MediaJob, status: MediaJobStatus, remember = true): Promise<MediaJob> {
    const written = await this.api.replaceStatus("mediajobs", { ...job, status });
    if (remember)
      this.stale.remember(jobKey(job), job.metadata.resourceVersion, written.metadata.resourceVersion);
    return {
      ...job,
      status,
      metadata: { ...job.metadata, resourceVersion: written.metadata.resourceVersion },
    };
  }

  /**
   * Writes `change(object)` onto the copy this pass wrote last (no read: the usual case), and on a
   * conflict onto a fresh read, as client-go's RetryOnConflict. Returns the object as stored.
   */
  async writeOnto(
    stored: MediaJob,
    change: (cur: MediaJob) => MediaJobStatus | undefined,
  ): Promise<MediaJob> {
    const ns = stored.metadata.namespace!;
    const name = stored.metadata.name;
    const now = this.now().toISOString();
    const first = change(stored);
    if (!first) return stored;
    try {
      const status = withPhaseConditions(first, stored.metadata.generation, now);
      const written = await this.api.replaceStatus("mediajobs", { ...stored, status });
      this.stale.remember(`${ns}/${name}`, stored.metadata.resourceVersion, written.metadata.resourceVersion);
      return { ...stored, status, metadata: { ...stored.metadata, ...written.metadata } };
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
    const res = await this.api.updateStatusWithRetry<MediaJob>("mediajobs", ns, name, (cur) => {
      const next = change(cur);
      return next ? { ...cur, status: withPhaseConditions(next, cur.metadata.generation, now) } : undefined;
    });
    if (res.object)
      this.stale.remember(
        `${ns}/${name}`,
        stored.metadata.resourceVersion,
        res.object.metadata.resourceVersion,
      );
    return res.object ?? stored;
  }

  /** The finalizer (and a pipeline's first job's labels), guarded by the resourceVersion read. */
  async addFinalizer(
    job: MediaJob,
    pipeline?: { labels: Record<string, string>; annotations: Record<string, string> },
  ): Promise<MediaJob> {
    const patched = await this.api.mergePatch<MediaJob>(
      "mediajobs",
      job.metadata.namespace!,
      job.metadata.name,
      {
        metadata: {
          finalizers: [...(job.metadata.finalizers ?? []), FINALIZER],
          resourceVersion: job.metadata.resourceVersion,
          ...pipeline,
        },
      },
    );
    return {
      ...job,
      metadata: {
        ...job.metadata,
        finalizers: patched.metadata.finalizers,
        resourceVersion: patched.metadata.resourceVersion,
        ...(pipeline && { labels: patched.metadata.labels, annotations: patched.metadata.annotations }),
      },
    };
  }

  /** A waiting pipeline's first job's label and annotation, guarded by the resourceVersion read. */
  async labelPipeline(
    job: MediaJob,
    pipeline: { labels: Record<string, string>; annotations: Record<string, string> },
  ): Promise<MediaJob> {
    const patched = await this.api.mergePatch<MediaJob>(
      "mediajobs",
      job.metadata.namespace!,
      job.metadata.name,
      {
        metadata: { resourceVersion: job.metadata.resourceVersion, ...pipeline },
      },
    );
    return {
      ...job,
      metadata: {
        ...job.metadata,
        resourceVersion: patched.metadata.resourceVersion,
        labels: patched.metadata.labels,
        annotations: patched.metadata.annotations,
      },
    };
  }

  /**
   * Our finalizers (the run's and the usage report's) removed; `keepForUsage`: the usage report's
   * put in place of the run's, in the same write. True when this call wrote (false: the job was gone).
   */
  async removeFinalizer(job: MediaJob, keepForUsage = false): Promise<boolean> {
    const others = (job.metadata.finalizers ?? []).filter((f) => f !== FINALIZER && f !== USAGE_FINALIZER);
    try {
      await this.api.mergePatch("mediajobs", job.metadata.namespace!, job.metadata.name, {
        metadata: {
          finalizers: keepForUsage ? [...others, USAGE_FINALIZER] : others,
          resourceVersion: job.metadata.resourceVersion,
        },
      });
      return true;
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return false;
    }
  }

  /** A later step's end, on the pipeline's first job (`first`, that very uid), retried on conflict. */
  async reportToPipeline(
    ns: string,
    first: string,
    uid: string | undefined,
    c: ConditionInput,
    now: string,
  ): Promise<void> {
    await this.api.updateStatusWithRetry<MediaJob>("mediajobs", ns, first, (cur) => {
      const status = pipelineReportStatus(cur, c, uid, now);
      return status ? { ...cur, status } : undefined;
    });
  }

  /** Deletes a job past its TTL: this very object (its uid), as Job's TTL controller does. */
  async deleteExpired(job: MediaJob): Promise<void> {
    const ns = job.metadata.namespace!;
    try {
      await this.api.rawJson(
        "DELETE",
        `/apis/${API_VERSION}/namespaces/${ns}/mediajobs/${job.metadata.name}`,
        {
          apiVersion: "v1",
          kind: "DeleteOptions",
          preconditions: { uid: job.metadata.uid },
        },
      );
      this.log.info({ job: `${ns}/${job.metadata.name}` }, "deleted: its ttlSecondsAfterFinished expired");
    } catch (err) {
      // Gone already, or a new object of the same name (another uid): nothing of ours to delete.
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
  }
}
