// The GPU work: single jobs and three-step pipelines, created while the faults run, and the
// invariants checked once everything has settled (or the deadline passed).
import { API_VERSION } from "../../src/crds/common.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import type { KubeApi } from "../../src/k8s/api.js";
import { PIPELINE_LABEL, STEP_LABEL } from "../../src/mediajob/pipeline.js";
import { failedUnconfirmed } from "../../src/mediajob/unconfirmed.js";
import type { Rng } from "./rng.js";

const WORKLOADS = ["asr", "tts", "render"] as const;
const TERMINAL = new Set(["Completed", "Failed", "Cancelled"]);
/** Every job may run twice: a FAILED first attempt is retried once. */
const MAX_ATTEMPTS = 2;

export interface PlannedJob {
  name: string;
  pipeline: boolean;
  body: Record<string, unknown>;
}

/**
 * `count` top-level MediaJobs; every third one is a pipeline asr -> tts -> render. Half are billed
 * to one of `accounts` (metered customers; a pipeline's steps inherit it).
 */
export function planJobs(rng: Rng, count: number, accounts: readonly string[] = []): PlannedJob[] {
  return Array.from({ length: count }, (_, i) => {
    const pipeline = rng.next() < 1 / 3;
    const account = accounts.length > 0 && rng.next() < 1 / 2 ? rng.pick(accounts) : undefined;
    const name = `chaos-${String(i).padStart(5, "0")}${pipeline ? "-p" : ""}`;
    const spec = pipeline
      ? {
          workload: "asr",
          maxAttempts: MAX_ATTEMPTS,
          input: { audio: `s3://chaos/${name}.wav` },
          then: [
            { workload: "tts", maxAttempts: MAX_ATTEMPTS },
            { workload: "render", maxAttempts: MAX_ATTEMPTS },
          ],
        }
      : { workload: rng.pick(WORKLOADS), maxAttempts: MAX_ATTEMPTS, input: { n: i } };
    return {
      name,
      pipeline,
      body: {
        apiVersion: API_VERSION,
        kind: "MediaJob",
        metadata: { name },
        spec: account === undefined ? spec : { ...spec, account },
      },
    };
  });
}

export const isTerminal = (j: MediaJob) => TERMINAL.has(j.status?.phase ?? "");

/** MediaJobs that should exist but do not: a Completed step whose next step was never created. */
function missingNextSteps(jobs: MediaJob[]): MediaJob[] {
  const names = new Set(jobs.map((j) => j.metadata.name));
  return jobs.filter(
    (j) =>
      j.status?.phase === "Completed" &&
      (j.spec.then?.length ?? 0) > 0 &&
      (j.status.nextJob === undefined || !names.has(j.status.nextJob)),
  );
}

/** Non-terminal MediaJobs plus next steps not yet created: the work still owed. */
export function outstanding(jobs: MediaJob[]): { unfinished: MediaJob[]; missingSteps: MediaJob[] } {
  return { unfinished: jobs.filter((j) => !isTerminal(j)), missingSteps: missingNextSteps(jobs) };
}

export interface JobCheck {
  mediaJobs: number;
  byPhase: Record<string, number>;
  lost: Array<{ name: string; phase?: string; reason: string }>;
  /**
   * Ran more often than its attempts allow (one run each: the first, a retry after a FAILED result,
   * a replay after the provider lost the job), whatever the cause of the extra runs: an unconfirmed
   * resubmission (policy `resubmit`) counts here too.
   */
  executedMoreThanOnce: Array<{ name: string; jobId: string; executions: number; allowed: number }>;
  /** Of those, jobs whose extra runs status.unconfirmedResubmissions accounts for (policy `resubmit`). */
  executedAgainAfterUnconfirmed: number;
  /** Of those: jobs whose provider dropped a callback (the residual window as documented)... */
  executedAgainCallbackDropped: number;
  /**
   * ...and jobs whose callbacks were sent but none was accepted before the confirmation deadline
   * (every attempt failed, e.g. while the control plane was down, or it came too late).
   */
  executedAgainCallbackLate: Array<{ name: string; jobId: string; executions: number; allowed: number }>;
  /**
   * Of the late ones, jobs never FAILED whose first callback the sidecar answered 2xx before the
   * last submission was made: a callback that arrived in time and still did not prevent the
   * resubmission. Expected 0.
   */
  answeredBeforeResubmission: Array<{
    name: string;
    jobId: string;
    callbackAt: string;
    resubmittedAt: string;
  }>;
  unconfirmedResubmissions: number;
  /**
   * Jobs that ended Failed with SubmissionUnconfirmed (policy `fail`): not an invariant, the cost of
   * at most once. `executed`: its unconfirmed submission did run at the provider (and its result
   * never arrived); otherwise it was never accepted (a 5xx before acceptance, an intent whose
   * sender died before /run).
   */
  endedUnconfirmed: Array<{ name: string; jobId: string; executed: boolean }>;
  jobsFailedOnce: number;
  providerLosses: number;
  /** More than one MediaJob for one pipeline step. */
  duplicateSteps: Array<{ pipeline: string; step: string; jobs: string[] }>;
  /** Executions at the provider for job ids no MediaJob carries. */
  orphanExecutions: number;
}

export function checkJobs(
  jobs: MediaJob[],
  executions: Record<string, number>,
  /** Job ids (ours) whose callback the provider dropped, once per dropped callback. */
  droppedCallbacks: string[],
  /** The provider's callback attempts: our job id, whether the sidecar answered 2xx, when (ms). */
  deliveries: Array<{ key: string; ok: boolean; at: number }>,
): JobCheck {
  const dropped = new Set(droppedCallbacks);
  const firstAnswered = new Map<string, number>();
  for (const d of deliveries)
    if (d.ok && d.at < (firstAnswered.get(d.key) ?? Infinity)) firstAnswered.set(d.key, d.at);
  const byPhase: Record<string, number> = {};
  for (const j of jobs)
    byPhase[j.status?.phase ?? "(none)"] = (byPhase[j.status?.phase ?? "(none)"] ?? 0) + 1;
  const { unfinished, missingSteps } = outstanding(jobs);
  const lost = [
    ...unfinished.map((j) => ({ name: j.metadata.name, phase: j.status?.phase, reason: "not terminal" })),
    ...missingSteps.map((j) => ({
      name: j.metadata.name,
      phase: j.status?.phase,
      reason: "next step never created",
    })),
  ];

  const executedMoreThanOnce: JobCheck["executedMoreThanOnce"] = [];
  let executedAgainAfterUnconfirmed = 0;
  let executedAgainCallbackDropped = 0;
  const executedAgainCallbackLate: JobCheck["executedAgainCallbackLate"] = [];
  const answeredBeforeResubmission: JobCheck["answeredBeforeResubmission"] = [];
  const endedUnconfirmed: JobCheck["endedUnconfirmed"] = [];
  const known = new Set<string>();
  for (const j of jobs) {
    const s = j.status ?? {};
    const jobId = s.jobId;
    if (jobId === undefined) continue;
    known.add(jobId);
    const runs = executions[jobId] ?? 0;
    // One run per attempt: the first, one more after each FAILED result the job was allowed to
    // retry (status.failures, at most maxAttempts - 1 of them lead to a retry), and one more each
    // time the provider lost the job and it was replayed.
    const retries = Math.min(s.failures ?? 0, (j.spec.maxAttempts ?? 1) - 1);
    const allowed = 1 + retries + (s.providerLosses ?? 0);
    // Its last attempt, unconfirmed, is one of the attempts allowed: it ran iff every one did.
    if (failedUnconfirmed(s))
      endedUnconfirmed.push({ name: j.metadata.name, jobId, executed: runs >= allowed });
    const extra = runs - allowed;
    if (extra <= 0) continue;
    executedMoreThanOnce.push({ name: j.metadata.name, jobId, executions: runs, allowed });
    if (extra <= (s.unconfirmedResubmissions ?? 0)) {
      executedAgainAfterUnconfirmed++;
      if (dropped.has(jobId)) executedAgainCallbackDropped++;
      else {
        executedAgainCallbackLate.push({ name: j.metadata.name, jobId, executions: runs, allowed });
        const answered = firstAnswered.get(jobId);
        const resubmitted = Date.parse(s.submittedAt ?? "");
        if ((s.failures ?? 0) === 0 && answered !== undefined && answered < resubmitted)
          answeredBeforeResubmission.push({
            name: j.metadata.name,
            jobId,
            callbackAt: new Date(answered).toISOString(),
            resubmittedAt: s.submittedAt!,
          });
      }
    }
  }

  const steps = new Map<string, string[]>();
  for (const j of jobs) {
    const labels = j.metadata.labels ?? {};
    const key = `${labels[PIPELINE_LABEL] ?? j.metadata.name}#${labels[STEP_LABEL] ?? "0"}`;
    steps.set(key, [...(steps.get(key) ?? []), j.metadata.name]);
  }
  const duplicateSteps = [...steps]
    .filter(([, names]) => names.length > 1)
    .map(([key, names]) => {
      const [pipeline = "", step = ""] = key.split("#");
      return { pipeline, step, jobs: names };
    });

  const sum = (f: (j: MediaJob) => number | undefined) => jobs.reduce((n, j) => n + (f(j) ?? 0), 0);
  return {
    mediaJobs: jobs.length,
    byPhase,
    lost,
    executedMoreThanOnce,
    executedAgainAfterUnconfirmed,
    executedAgainCallbackDropped,
    executedAgainCallbackLate,
    answeredBeforeResubmission,
    unconfirmedResubmissions: sum((j) => j.status?.unconfirmedResubmissions),
    endedUnconfirmed,
    jobsFailedOnce: jobs.filter((j) => (j.status?.failures ?? 0) > 0).length,
    providerLosses: sum((j) => j.status?.providerLosses),
    duplicateSteps,
    orphanExecutions: Object.entries(executions)
      .filter(([id]) => !known.has(id))
      .reduce((n, [, c]) => n + c, 0),
  };
}

export async function listJobs(api: KubeApi, namespace: string): Promise<MediaJob[]> {
  return (await api.list<MediaJob>("mediajobs", namespace)).items;
}
