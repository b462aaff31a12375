// MediaJob operations shared by the commands: finding stuck jobs, asking the provider about one,
// and the two writes of the runbook (reset, and applying the provider's result). The writes use
// the controller's own lifecycle functions, so a CLI write is exactly what the controller or a
// callback would have written.
import { userInfo } from "node:os";
import type { Logger } from "pino";
import type { MediaJob } from "../crds/mediajob.js";
import { currentProviderJobId } from "../mediajob/job.js";
import {
  msUntilStuckAfter,
  planReset,
  processingSinceMs,
  resetLostRace,
  stuckLimitMs,
} from "../mediajob/recovery.js";
import { writeProviderResult } from "../controller/mediajob/result-write.js";
import type { KubeApi } from "../k8s/api.js";
import { isNotFound } from "../k8s/errors.js";
import { EventRecorder, type EventType } from "../k8s/events.js";
import { isProviderError, type GpuProviderClient, type ProviderJob } from "../provider/index.js";
import { CliError, providerProblem } from "./errors.js";

const key = (job: MediaJob): string => `${job.metadata.namespace}/${job.metadata.name}`;

/** The provider id the current submission is known by. */
export const providerJobId = currentProviderJobId;

export interface StuckJob {
  job: MediaJob;
  processingForMs: number;
  /** The limit it is past: its timeout, or --older-than. */
  limitMs: number;
}

/**
 * Processing jobs past their timeout (spec.timeoutSeconds, else the default), or, with
 * `olderThanMs`, Processing longer than that whatever their timeout. Oldest first.
 */
export function findStuck(
  jobs: MediaJob[],
  nowMs: number,
  opts: { olderThanMs?: number; defaultTimeoutSeconds: number },
): StuckJob[] {
  const stuck: StuckJob[] = [];
  for (const job of jobs) {
    if (job.status?.phase !== "Processing") continue;
    const limitMs = opts.olderThanMs ?? stuckLimitMs(job, opts.defaultTimeoutSeconds);
    if (msUntilStuckAfter(job, nowMs, limitMs) > 0) continue;
    stuck.push({ job, processingForMs: nowMs - (processingSinceMs(job.status) ?? nowMs), limitMs });
  }
  return stuck.sort((a, b) => b.processingForMs - a.processingForMs || key(a.job).localeCompare(key(b.job)));
}

export function jobNotFound(namespace: string, name: string): CliError {
  return new CliError(
    `MediaJob "${name}" not found in namespace "${namespace}"`,
    `list the jobs with: kubectl get mediajobs -n ${namespace} (or pass -n NAMESPACE)`,
  );
}

export async function getJob(api: KubeApi, namespace: string, name: string): Promise<MediaJob> {
  const job = await api.get<MediaJob>("mediajobs", namespace, name);
  if (!job) throw jobNotFound(namespace, name);
  return job;
}

export async function listJobs(api: KubeApi, namespace: string | undefined): Promise<MediaJob[]> {
  return (await api.list<MediaJob>("mediajobs", namespace)).items;
}

/** What the provider says about a job's current submission. */
export type ProviderView =
  | { state: "not-submitted"; message: string }
  | { state: "found"; id: string; endpointId: string; job: ProviderJob }
  | { state: "not-found"; id: string; endpointId: string; message: string }
  | { state: "error"; id?: string; endpointId?: string; code: string; message: string };

export async function askProvider(gpu: GpuProviderClient, job: MediaJob): Promise<ProviderView> {
  const endpointId = job.status?.endpointId;
  if (!endpointId) {
    return { state: "not-submitted", message: "no endpoint id recorded: the job was never submitted" };
  }
  // Pending with neither a provider id nor a submission (suspended, or a refused submission
  // withdrawn): the provider has nothing of the next attempt yet, and its id is not the last one's.
  const status = job.status;
  if (status?.phase === "Pending" && !status.providerJobId && !status.submission) {
    return {
      state: "not-submitted",
      message: "no submission in flight: the job waits to be submitted (again)",
    };
  }
  const id = providerJobId(job);
  try {
    return { state: "found", id, endpointId, job: await gpu.status(endpointId, id) };
  } catch (err) {
    if (isProviderError(err, "JOB_NOT_FOUND")) {
      return {
        state: "not-found",
        id,
        endpointId,
        message: "the provider does not know this job (never received, expired, or lost)",
      };
    }
    return {
      state: "error",
      id,
      endpointId,
      code: isProviderError(err) ? err.code : "ERROR",
      message: providerProblem(err),
    };
  }
}

/** What to do when the provider could not be asked about a job. */
export function providerErrorHint(view: Extract<ProviderView, { state: "error" }>): string {
  if (view.code === "INVALID_API_KEY" || view.code === "ACCOUNT_PROBLEM")
    return "run 'kubectl media check-key' and follow its fix";
  if (view.code === "ENDPOINT_NOT_FOUND")
    return `the endpoint ${view.endpointId} is gone at the provider: run 'kubectl media doctor'`;
  return "try again; if it persists, check GPU_PROVIDER_API_URL and run 'kubectl media doctor'";
}

/** The provider status to show: COMPLETED, IN_PROGRESS, ..., or NOT_FOUND / NOT_SUBMITTED / ERROR. */
export function providerState(view: ProviderView): string {
  switch (view.state) {
    case "found":
      return view.job.status;
    case "not-found":
      return "NOT_FOUND";
    case "not-submitted":
      return "NOT_SUBMITTED";
    case "error":
      return `ERROR (${view.code})`;
  }
}

export type WriteOutcome =
  | {
      written: true;
      job: MediaJob;
      /** What a reset reset: a Processing job, or one Failed with SubmissionUnconfirmed. */
      from?: "Processing" | "Failed";
    }
  | { written: false; job?: MediaJob; message: string };

/**
 * Applies the provider's result to a Processing job, as a callback would: the one
 * writeProviderResult that the sidecar uses too, written with optimistic concurrency (re-read and
 * re-applied on conflict). Nothing is written when the job left Processing or moved on to another
 * submission in the meantime.
 */
export async function applyResult(
  api: KubeApi,
  namespace: string,
  name: string,
  result: ProviderJob,
  now: string,
): Promise<WriteOutcome> {
  const res = await writeProviderResult(api, namespace, name, { result, now, requireProcessing: true });
  if (res.outcome === "applied") return { written: true, job: res.job! };
  if (!res.job) return { written: false, message: "the MediaJob was deleted" };
  const current = res.job;
  const message =
    res.outcome === "terminal" || res.outcome === "not-processing"
      ? `it is ${current.status?.phase ?? "without a phase"} now, no longer Processing`
      : `the provider's job ${result.id} is not its current submission (${providerJobId(current)})`;
  return { written: false, job: current, message };
}

/**
 * The runbook's reset as one JSON patch whose `test` ops make it apply only to a Processing job
 * with the job id read first (as docs/cli.md's kubectl patch), so an object re-created under the same
 * name in between is left alone. With `failedUnconfirmed`, a job Failed because its submission was
 * never confirmed (SubmissionUnconfirmed) is reset too: the operator's deliberate resubmission.
 * On refusal, the job is read again to say why.
 */
export async function resetJob(
  api: KubeApi,
  namespace: string,
  name: string,
  now: string,
  opts: { failedUnconfirmed?: boolean } = {},
): Promise<WriteOutcome> {
  const seen = await api.get<MediaJob>("mediajobs", namespace, name);
  if (!seen) return { written: false, message: "the MediaJob does not exist" };
  const reset = planReset(seen.status, now, opts);
  if ("refused" in reset) return { written: false, job: seen, message: reset.refused };
  try {
    const job = await api.jsonPatchStatus<MediaJob>("mediajobs", namespace, name, reset.patch);
    return { written: true, job, from: reset.from };
  } catch (err) {
    if (isNotFound(err)) return { written: false, message: "the MediaJob does not exist" };
    const current = await api.get<MediaJob>("mediajobs", namespace, name);
    if (!current) return { written: false, message: "the MediaJob does not exist" };
    const why = resetLostRace(seen.status!, current.status, opts);
    if (why) return { written: false, job: current, message: why };
    throw err;
  }
}

const quiet = { warn: () => undefined } as unknown as Logger;

/** An Event on the job, so `kubectl describe` shows who did what. Never fails the command. */
export async function recordEvent(
  api: KubeApi,
  job: MediaJob,
  type: EventType,
  reason: string,
  message: string,
): Promise<void> {
  let who = "kubectl-media";
  try {
    who = `${userInfo().username} via kubectl-media`;
  } catch {
    /* no user entry (some containers): keep the tool's name */
  }
  await new EventRecorder(api, "kubectl-media", quiet).record(job, type, reason, `${message} (by ${who})`);
}
