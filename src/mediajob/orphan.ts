// A run the provider may still be doing after its MediaJob is gone: an operator deleted a running
// job without a cancel (media-orchestrator.io/skip-provider-cancel), or the deletion gave up on a
// provider that would not cancel. The provider bills it to the end, so the product follows it there
// and bills it too: the record outlives the MediaJob on its BillingAccount (status.orphans), the
// leader asks the provider until the run ends, then bills and meters it under the jobs' own rule,
// with the identifier the job itself would have used, so a report the job made already is not
// made twice (docs/design.md, "Tenancy"). Pure: the provider's answer is a fact from the caller.
import type { OrphanedRun } from "../crds/billingaccount.js";
import type { MediaJob } from "../crds/mediajob.js";
import type { ProviderResult } from "./job.js";
import { jobAccount } from "./tenancy.js";
import { withBilledUsage, withRecordedUsage, type UsageSettings } from "./usage.js";

/** The record of a job let go while its current attempt may still run at the provider. */
export function orphanOf(job: MediaJob, now: string): OrphanedRun | undefined {
  const s = job.status;
  const account = jobAccount(job);
  const uid = job.metadata.uid;
  if (s?.phase !== "Processing" || !s.providerJobId || !s.endpointId || !account || !uid) return undefined;
  // The attempt's usage is on the job already (its end was recorded): nothing runs on.
  const attempt = s.submission?.attempt ?? Math.max(1, s.attempts ?? 1);
  if (s.usage?.attempts.some((a) => a.attempt === attempt)) return undefined;
  return {
    uid,
    namespace: job.metadata.namespace ?? "",
    name: job.metadata.name,
    workload: job.spec.workload,
    account,
    endpointId: s.endpointId,
    providerJobId: s.providerJobId,
    attempt,
    deletedAt: job.metadata.deletionTimestamp ? new Date(job.metadata.deletionTimestamp).toISOString() : now,
  };
}

/** The run's end as the provider reports it: "lost" when it answers 404 (nothing to bill). */
export type OrphanEnd = ProviderResult | "lost";

/**
 * The record once the provider says the run ended: its usage recorded and billed by the rule of a
 * job's attempt (usage.ts), as the MediaJob would have. Undefined while the run goes on.
 */
export function endedOrphan(
  o: OrphanedRun,
  end: OrphanEnd,
  settings: UsageSettings,
  now: string,
): OrphanedRun | undefined {
  if (end === "lost")
    return {
      ...o,
      usage: {
        attempt: o.attempt,
        providerJobId: o.providerJobId,
        endpointId: o.endpointId,
        providerStatus: "CANCELLED",
        endedAt: now,
        billedSeconds: 0,
        meter: "NotMetered",
        message: "the provider no longer knows the run (404): nothing to bill",
      },
    };
  const job = {
    apiVersion: "media-orchestrator.io/v1alpha1",
    kind: "MediaJob",
    metadata: { name: o.name, namespace: o.namespace, uid: o.uid },
    spec: { workload: o.workload, account: o.account },
  } as MediaJob;
  const running = {
    phase: "Processing" as const,
    attempts: o.attempt,
    providerJobId: o.providerJobId,
    endpointId: o.endpointId,
  };
  const recorded = withRecordedUsage(job, running, end, now);
  if (recorded === running) return undefined; // not ended
  const billed = withBilledUsage(job, recorded, settings);
  const usage = billed.usage?.attempts.find((a) => a.attempt === o.attempt);
  return usage ? { ...o, usage } : undefined;
}

/** Whether the record is done with: its run ended, billed, and reported (or not to be). */
export function orphanSettled(o: OrphanedRun): boolean {
  return o.usage !== undefined && o.usage.meter !== "Pending" && o.usage.counted === true;
}
