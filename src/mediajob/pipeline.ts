// Pipelines: a job's `then` steps, each created once by the step before it, and the
// PipelineSucceeded condition on the pipeline's first job.
import { createHash } from "node:crypto";
import { type ConditionInput, getCondition, setCondition } from "../crds/conditions.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { failureText } from "./conditions.js";
import { FINALIZER, isTerminal, jobPhase } from "./job.js";
import { jobAccount } from "./tenancy.js";
import { nextStepInputs } from "./media.js";

export const PIPELINE_LABEL = "media-orchestrator.io/pipeline";
export const STEP_LABEL = "media-orchestrator.io/step";

/** The pipeline's own name (its first job's), kept whole on every step. */
const PIPELINE_ANNOTATION = "media-orchestrator.io/pipeline-name";
/** The first job's uid on every later step: the step reports its end to that job, not a namesake. */
const PIPELINE_UID_ANNOTATION = "media-orchestrator.io/pipeline-uid";

/** The condition on a pipeline's first job that speaks for the whole pipeline. */
const PIPELINE_SUCCEEDED = "PipelineSucceeded";

/** A pipeline's first job (or a job on its own): no step label. */
export const isFirstStep = (job: MediaJob): boolean => job.metadata.labels?.[STEP_LABEL] === undefined;

/**
 * The labels and annotations a pipeline's first job gets, as its later steps have them, so that
 * `-l media-orchestrator.io/pipeline=<name>` selects the whole pipeline. Undefined when it has them
 * (or is not a pipeline's first job).
 */
export function firstStepMetadata(
  job: MediaJob,
): { labels: Record<string, string>; annotations: Record<string, string> } | undefined {
  if (!isFirstStep(job) || !job.spec.then?.length) return undefined;
  const name = job.metadata.name;
  if (
    job.metadata.labels?.[PIPELINE_LABEL] !== undefined &&
    job.metadata.annotations?.[PIPELINE_ANNOTATION] !== undefined
  )
    return undefined;
  // The annotation keeps the whole name, which nextStepName reads before the (shortened) label.
  return { labels: { [PIPELINE_LABEL]: pipelineLabel(name) }, annotations: { [PIPELINE_ANNOTATION]: name } };
}

/**
 * PipelineSucceeded on a pipeline's first job (on any job with no step label: a job on its own is a
 * pipeline of one step), from what the job itself knows: Unknown while it runs or its later steps
 * do, False when it failed, True when it was the only step. Once a later step has decided it (True
 * or False), the first job keeps that.
 */
export function ownPipelineCondition(job: MediaJob, status: MediaJobStatus): ConditionInput | undefined {
  if (!isFirstStep(job)) return undefined;
  const steps = 1 + (job.spec.then?.length ?? 0);
  const phase = jobPhase(status);
  if (phase === "Failed" || phase === "Cancelled") return stepFailed(job, status, 1);
  if (phase === "Completed" && steps === 1)
    return {
      type: PIPELINE_SUCCEEDED,
      status: "True",
      reason: "PipelineCompleted",
      message: "the job (a pipeline of one step) completed",
    };
  const decided = getCondition(status.conditions, PIPELINE_SUCCEEDED);
  if (decided && decided.status !== "Unknown") return undefined;
  return {
    type: PIPELINE_SUCCEEDED,
    status: "Unknown",
    reason: "StepsRunning",
    message:
      phase === "Completed"
        ? `step 1 of ${steps} completed${status.nextJob ? `; next: ${status.nextJob}` : ""}`
        : `step 1 of ${steps} has not ended yet`,
  };
}

function stepFailed(job: MediaJob, status: MediaJobStatus, step: number): ConditionInput {
  return {
    type: PIPELINE_SUCCEEDED,
    status: "False",
    reason: "StepFailed",
    message: `step ${step} (${job.metadata.name}) ended ${status.phase}: ${failureText(status)}`,
  };
}

/**
 * What a later step's end means for the pipeline, written onto its first job: False when the step
 * failed, True when it was the last and completed. Undefined while the pipeline goes on.
 */
export function stepPipelineCondition(job: MediaJob, status: MediaJobStatus): ConditionInput | undefined {
  if (isFirstStep(job)) return undefined;
  const step = Number(job.metadata.labels?.[STEP_LABEL]) + 1;
  const phase = status.phase;
  if (phase === "Failed" || phase === "Cancelled") return stepFailed(job, status, step);
  if (phase === "Completed" && !job.spec.then?.length)
    return {
      type: PIPELINE_SUCCEEDED,
      status: "True",
      reason: "PipelineCompleted",
      message: `all ${step} steps completed; the last: ${job.metadata.name}`,
    };
  return undefined;
}

/**
 * What a later step's deletion means for the pipeline, written onto its first job. A step deleted
 * before it ended (or before it created its next step) stops the pipeline: no later step will ever
 * be created, so PipelineSucceeded turns False rather than leave `kubectl wait` hanging. A step that
 * had ended tells what its end told.
 */
export function deletedStepPipelineCondition(job: MediaJob): ConditionInput | undefined {
  if (isFirstStep(job)) return undefined;
  const status = job.status ?? {};
  const phase = jobPhase(status);
  const stopsPipeline =
    !isTerminal(phase) || (phase === "Completed" && !!job.spec.then?.length && !status.nextJob);
  if (!stopsPipeline) return stepPipelineCondition(job, status);
  const step = Number(job.metadata.labels?.[STEP_LABEL]) + 1;
  return {
    type: PIPELINE_SUCCEEDED,
    status: "False",
    reason: "StepDeleted",
    message: `step ${step} (${job.metadata.name}) was deleted while ${phase}${phase === "Completed" ? ", before its next step was created" : ""}: the pipeline stops there`,
  };
}

/** The first job of `job`'s pipeline, by name and (when known) uid; undefined for a first step. */
export function pipelineFirstOf(job: MediaJob): { first: string; uid?: string } | undefined {
  const first = job.metadata.annotations?.[PIPELINE_ANNOTATION] ?? job.metadata.labels?.[PIPELINE_LABEL];
  if (!first || isFirstStep(job)) return undefined;
  const uid = job.metadata.annotations?.[PIPELINE_UID_ANNOTATION];
  return { first, ...(uid && { uid }) };
}

const shortHash = (text: string): string => createHash("sha256").update(text).digest("hex").slice(0, 10);

/**
 * `text` if it fits in `max` characters, else a prefix and a hash of the whole: valid for any
 * length (the prefix is cut back to end in a letter or digit, as names and label values must)
 * and unique per input, so two long names that share a prefix never collide.
 */
function fitName(text: string, max: number): string {
  if (text.length <= max) return text;
  const prefix = text.slice(0, max - 11).replace(/[^A-Za-z0-9]+$/, "");
  return prefix ? `${prefix}-${shortHash(text)}` : shortHash(text);
}

/** The pipeline a job belongs to: the first job's name (older steps carry only the label). */
function pipelineOf(job: MediaJob): string {
  return (
    job.metadata.annotations?.[PIPELINE_ANNOTATION] ??
    job.metadata.labels?.[PIPELINE_LABEL] ??
    job.metadata.name
  );
}

/** A label value (at most 63 characters, starting and ending alphanumeric) that names the pipeline. */
function pipelineLabel(pipeline: string): string {
  const value = fitName(pipeline, 63);
  return /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(value) ? value : `p-${shortHash(pipeline)}`;
}

/** The deterministic name of the MediaJob for the next pipeline step: valid for any pipeline name. */
export function nextStepName(job: MediaJob): string {
  const step = Number(job.metadata.labels?.[STEP_LABEL] ?? "0") + 1;
  const workload = job.spec.then?.[0]?.workload ?? "step";
  const suffix = `-${step}-${workload}`;
  return `${fitName(pipelineOf(job), 253 - suffix.length)}${suffix}`;
}

/** The next step's MediaJob: created once (fixed name), owned by this job, fed its output. */
export function nextStepObject(job: MediaJob): Record<string, unknown> | undefined {
  const [step, ...rest] = job.spec.then ?? [];
  if (!step || job.status?.phase !== "Completed") return undefined;
  const pipeline = pipelineOf(job);
  const index = Number(job.metadata.labels?.[STEP_LABEL] ?? "0") + 1;
  return {
    apiVersion: job.apiVersion,
    kind: "MediaJob",
    metadata: {
      name: nextStepName(job),
      namespace: job.metadata.namespace,
      // From its creation, so that a step deleted while it waits still tells its pipeline.
      finalizers: [FINALIZER],
      labels: { [PIPELINE_LABEL]: pipelineLabel(pipeline), [STEP_LABEL]: String(index) },
      annotations: {
        [PIPELINE_ANNOTATION]: pipeline,
        [PIPELINE_UID_ANNOTATION]: isFirstStep(job)
          ? (job.metadata.uid ?? "")
          : (job.metadata.annotations?.[PIPELINE_UID_ANNOTATION] ?? ""),
      },
      ownerReferences: [
        {
          apiVersion: job.apiVersion,
          kind: "MediaJob",
          name: job.metadata.name,
          uid: job.metadata.uid,
          controller: true,
        },
      ],
    },
    spec: {
      ...step,
      ...(step.account === undefined && jobAccount(job) !== undefined ? { account: jobAccount(job) } : {}),
      ...(step.ttlSecondsAfterFinished === undefined &&
        job.spec.ttlSecondsAfterFinished !== undefined && {
          ttlSecondsAfterFinished: job.spec.ttlSecondsAfterFinished,
        }),
      // The previous step's outputs, by name, as references its workers read (media.ts).
      ...(job.status?.outputs?.length && {
        media: { ...step.media, inputs: nextStepInputs(step.media?.inputs, job.status.outputs) },
      }),
      input: {
        ...step.input,
        previous: {
          job: job.metadata.name,
          jobId: job.status?.jobId,
          workload: job.spec.workload,
          output: job.status?.output ?? {},
        },
      },
      ...(rest.length ? { then: rest } : {}),
    },
  };
}

/**
 * A later step's end written onto the pipeline's first job as it is now (`cur`): undefined when
 * `cur` is a namesake (another uid) or already says so. The first failure told stays (a pipeline
 * stops at its first failed step anyway).
 */
export function pipelineReportStatus(
  cur: MediaJob,
  c: ConditionInput,
  uid: string | undefined,
  now: string,
): MediaJobStatus | undefined {
  if (uid && cur.metadata.uid !== uid) return undefined;
  const told = getCondition(cur.status?.conditions, PIPELINE_SUCCEEDED);
  if (told?.status === "False" || (told?.status === c.status && told.reason === c.reason)) return undefined;
  return { ...cur.status, conditions: setCondition(cur.status?.conditions, c, now, cur.metadata.generation) };
}
