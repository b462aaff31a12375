// The write-ahead submission (src/mediajob/write-ahead.ts), carried out step by step: the only
// sequence of a pass that writes status more than once, each write by name. (1) the intent, with
// the resourceVersion the pass read; (2) the leader fence; (3) /run, once; (4) the provider's id.
import type { Logger } from "pino";
import { callbackUrl } from "../../callback/token.js";
import type { MediaJob } from "../../crds/mediajob.js";
import { describeError, isConflict } from "../../k8s/errors.js";
import { withPhaseConditions, type PlannedEvent } from "../../mediajob/conditions.js";
import { retry, type Plan, type SubmissionOutcome } from "../../mediajob/pass.js";
import { afterSubmit, type SubmitAnswer } from "../../mediajob/submit-answer.js";
import {
  acceptedStatus,
  unconfirmedNote,
  unconfirmedStatus,
  withdrawnStatus,
  type SubmissionPlan,
} from "../../mediajob/write-ahead.js";
import { isProviderError, type GpuProviderClient } from "../../provider/index.js";
import { jobKey, type JobWrites } from "./writes.js";
import type { Store } from "../../storage/index.js";
import { mintAttemptIO, redactPresigned, withAttemptIO } from "../../storage/mint.js";
import { lookupStage } from "../../storage/stage-cache.js";
import { cacheHitStatus } from "../../mediajob/stage-cache.js";

export interface SubmitDeps {
  writes: JobWrites;
  provider: Pick<GpuProviderClient, "submit">;
  settings: {
    callbackBaseUrl: string;
    callbackSecret: string;
    defaultTimeoutSeconds: number;
    confirmationWindowMs?: number;
  };
  fence: () => boolean;
  leadership?: () => AbortSignal | undefined;
  log: Logger;
  /**
   * Provider ids of accepted submissions whose record write failed, by key: retried on the next
   * pass so the id is not left to the callback alone.
   */
  unrecorded: Map<string, { attempt: number; providerJobId: string }>;
  onSubmission?: (outcome: SubmissionOutcome) => void;
  /**
   * The MediaJobs (`namespace/name`) that hold a provider job id (src/callback/holders.ts), or
   * "unsupported" where the apiserver cannot say. Undefined: not asked.
   */
  holders?: (providerJobId: string) => Promise<string[] | "unsupported">;
  onTransition?: (from: string | undefined, to: string | undefined) => void;
  /**
   * The endpoint's in-flight window (dispatch/dispatcher.ts): told of a 429 at once, so the window
   * shrinks and the job waits out Retry-After in Kubernetes; the client then does not retry a 429
   * itself. Undefined: the client retries 429s within its budget, as without a window.
   */
  onThrottled?: (endpointId: string, retryAfterMs?: number) => void;
  /** The object store, for a submission with presigned I/O (SubmissionPlan.io). */
  store?: () => Store | undefined;
}

/** What the sequence leaves: the pass's plan with its Events, requeue or error, and the job as stored. */
export interface Submitted {
  plan: Plan;
  written?: MediaJob;
}

export async function submit(
  d: SubmitDeps,
  job: MediaJob,
  plan: Plan,
  p: SubmissionPlan,
  now: string,
): Promise<Submitted> {
  const key = jobKey(job);
  const outcome = (o: SubmissionOutcome, more: Partial<Plan>, written?: MediaJob): Submitted => {
    d.onSubmission?.(o);
    return { plan: { ...plan, ...more, events: [...plan.events, ...(more.events ?? [])] }, written };
  };
  if (!d.fence()) return outcome("fenced", { error: retry("not the leader: no submission") });

  // (0) The attempt's URLs, signed before anything is written: a store that cannot sign (its
  // credentials unreadable) leaves the job as it was. They go into the /run body only.
  let input = p.request.input;
  if (p.io) {
    const store = d.store?.();
    if (!store)
      return outcome("storage-unavailable", { error: retry("the object store is not open: no submission") });
    // The stage cache first: a stage this namespace already paid for completes from its outputs.
    if (p.stageKey !== undefined) {
      const hit = await lookupStage(store.client, job.metadata.namespace ?? "", p.stageKey).catch(
        (err: unknown) => {
          // Not found is not an error; a store that cannot be read now runs the job.
          d.log.info({ job: key, err: describeError(err) }, "stage cache not read; the job runs");
          return undefined;
        },
      );
      if (hit) {
        const done = cacheHitStatus(job, plan.status, hit, store.config.bucket, now);
        const written = await d.writes.replaceStatus(
          job,
          withPhaseConditions(done.status, job.metadata.generation, now),
        );
        return outcome("cache-hit", { events: done.events, requeueAfterMs: 0 }, written);
      }
    }
    try {
      input = withAttemptIO(input, await mintAttemptIO(p.io, store.signer));
    } catch (err) {
      return outcome("storage-unavailable", {
        error: retry(`could not sign the attempt's URLs: ${describeError(err)}`),
      });
    }
  }

  // (1) The intent.
  let stored: MediaJob;
  try {
    stored = await d.writes.replaceStatus(job, p.intent);
  } catch (err) {
    if (!isConflict(err)) throw err;
    // Someone else wrote first (the sidecar, another replica, an operator): decide again from
    // their version, which the watch delivers.
    return outcome("intent-conflict", { requeueAfterMs: 1_000 }, job);
  }
  d.onTransition?.(p.before.phase, "Processing");

  // (2) The fence, immediately before the side effect. Nothing was sent: withdraw the intent.
  if (!d.fence()) {
    const withdrawn = withdrawnStatus(stored, p, now);
    if (withdrawn)
      await d.writes
        .replaceStatus(stored, withPhaseConditions(withdrawn, stored.metadata.generation, now), false)
        .catch(() => undefined); // left as it is, it is resubmitted after its deadline: late, not twice
    return outcome("fenced", { error: retry("lost the leadership before submitting") }, stored);
  }

  // (3) /run, once; its answer is the domain's to read (afterSubmit).
  let answer: SubmitAnswer;
  try {
    const signal = d.leadership?.();
    const webhook = callbackUrl(d.settings.callbackBaseUrl, d.settings.callbackSecret, p.callback, {
      expiresAt: p.callbackExpiresAt,
    });
    const submitted = await d.provider.submit(
      p.endpointId,
      { ...p.request, input, webhook },
      { ...(signal && { signal }), ...(d.onThrottled && { retryRateLimited: false }) },
    );
    answer = { accepted: submitted.id };
  } catch (err) {
    // The provider's error may echo the body sent, URLs included: they never reach the status.
    const error = p.io ? redactPresigned(describeError(err)) : describeError(err);
    answer =
      isProviderError(err) && !err.mayHaveBeenAccepted
        ? {
            refused: {
              code: err.code,
              error,
              ...(err.retryAfterMs !== undefined && { retryAfterMs: err.retryAfterMs }),
            },
          }
        : { unconfirmed: error };
  }
  const next = afterSubmit(stored, p, answer, now, d.settings);
  if (next.outcome === "refused") {
    if (next.throttled) d.onThrottled?.(p.endpointId, next.throttled.retryAfterMs);
    const written = await d.writes.writeOnto(stored, next.write);
    return outcome("refused", { events: next.events, error: next.error }, written);
  }
  if (next.outcome === "unconfirmed") {
    const written = await d.writes.writeOnto(stored, next.write).catch((e: unknown) => {
      d.log.warn({ job: key, err: describeError(e) }, "could not record an unconfirmed submission");
      return stored;
    });
    return outcome("unconfirmed", { events: next.events, requeueAfterMs: next.requeueAfterMs }, written);
  }
  const { providerJobId } = next;

  // (4) The provider's id. A failed write here does not resubmit: the job stays Processing.
  let held: boolean;
  try {
    held = await heldElsewhere(d, job, providerJobId);
  } catch (err) {
    d.unrecorded.set(key, { attempt: p.attempt, providerJobId });
    d.log.warn(
      { job: key, providerJobId, err: describeError(err) },
      "submitted, but could not check who holds the provider's job id yet; retrying the record (never the submission)",
    );
    return outcome("accepted", { requeueAfterMs: 1_000 }, stored);
  }
  if (held) {
    const { written, events, waitMs } = await refuseHeldAnswer(d, stored, p.attempt, providerJobId, now);
    return outcome("held-elsewhere", { events, requeueAfterMs: Math.max(1_000, waitMs) }, written);
  }
  const { events } = next;
  try {
    const written = await d.writes.writeOnto(stored, (cur) =>
      acceptedStatus(cur, p.attempt, providerJobId, now),
    );
    d.unrecorded.delete(key);
    return outcome("accepted", { events, requeueAfterMs: next.requeueAfterMs }, written);
  } catch (err) {
    d.unrecorded.set(key, { attempt: p.attempt, providerJobId });
    d.log.warn(
      { job: key, providerJobId, err: describeError(err) },
      "submitted, but could not record the provider's job id yet; retrying the record (never the submission)",
    );
    return outcome("accepted", { events, requeueAfterMs: 1_000 }, stored);
  }
}

/**
 * Whether a MediaJob other than `job` holds `providerJobId` (status.providerJobId), as the
 * callback path asks before it adopts (src/webhooks/callbacks.ts). An apiserver that cannot filter
 * on the field answers nothing: the id is recorded, as a callback would adopt it there.
 */
export async function heldElsewhere(
  d: Pick<SubmitDeps, "holders">,
  job: MediaJob,
  providerJobId: string,
): Promise<boolean> {
  const holders = await d.holders?.(providerJobId);
  if (holders === undefined || holders === "unsupported") return false;
  return holders.some((h) => h !== jobKey(job));
}

/**
 * The /run answer names a provider job another MediaJob holds (a provider that honoured a colliding
 * id, or one that answers wrongly): it is not this job's, so it is not recorded. The attempt is
 * left Unconfirmed, as when the answer is lost: its own callback can still name its own job, and
 * it is never sent again before its confirmation deadline. The holder is logged, never named in the
 * job's status or Events (another tenant's).
 */
export async function refuseHeldAnswer(
  d: Pick<SubmitDeps, "writes" | "log" | "settings" | "unrecorded">,
  stored: MediaJob,
  attempt: number,
  providerJobId: string,
  now: string,
): Promise<{ written: MediaJob; events: PlannedEvent[]; waitMs: number }> {
  const key = jobKey(stored);
  d.unrecorded.delete(key);
  d.log.warn(
    { job: key, providerJobId },
    "the provider answered /run with a job another MediaJob holds; not recorded for this job",
  );
  const { note, waitMs } = unconfirmedNote(
    stored,
    `the provider answered the submission with job ${providerJobId}, which another MediaJob holds: not recorded for this job`,
    Date.parse(now),
    d.settings,
  );
  const written = await d.writes
    .writeOnto(stored, (cur) => unconfirmedStatus(cur, attempt, note, now))
    .catch((e: unknown) => {
      d.log.warn({ job: key, err: describeError(e) }, "could not record an unconfirmed submission");
      return stored;
    });
  return { written, events: [["Warning", "ProviderJobHeldElsewhere", note]], waitMs };
}
