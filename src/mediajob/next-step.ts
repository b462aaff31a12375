// A Completed job's next pipeline step: created exactly once, under a fixed name, owned by the job.
import { adoptedWithoutEvidence } from "../callback/adoption.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { noteCondition, type PlannedEvent } from "./conditions.js";
import { nextStepObject } from "./pipeline.js";
import { terminal, type Plan } from "./pass.js";

/** The reason (condition, Event) of a next step whose name another object has taken. */
const NEXT_STEP_NAME_TAKEN = "NextStepNameTaken";

export function planCompleted(job: MediaJob, status: MediaJobStatus): Plan {
  const done: Plan = { status, events: [], actions: [] };
  if (status.nextJob || !job.spec.then?.length) return done;
  // An output adopted from a callback alone is not fed forward until the /run answer or an
  // operator (kubectl media accept) vouches for it: it may be another tenant's job.
  if (adoptedWithoutEvidence({ ...job, status })) return done;
  const object = nextStepObject({ ...job, status });
  if (!object) return done;
  const name = (object.metadata as { name: string }).name;
  return { ...done, actions: [{ type: "createNextStep", name, object }] };
}

/** What the create answered: created, or the name was taken by `existing` (undefined: gone again). */
export type CreateAnswer = { created: true } | { existing: MediaJob | undefined };

/**
 * The create's answer read. A step created by an earlier pass whose status write did not land is
 * adopted if it is ours (its owner is this job). A name taken by another object is a terminal
 * error: retrying cannot free the name, so a condition and a Warning say so, and the job is looked
 * at again only at the next tick or change (no backoff loop).
 */
export function afterNextStep(
  job: MediaJob,
  status: MediaJobStatus,
  name: string,
  answer: CreateAnswer,
  now: string,
): Plan {
  const created: PlannedEvent = [
    "Normal",
    "NextStepCreated",
    `created MediaJob ${name} for the next pipeline step`,
  ];
  if ("created" in answer) return { status: { ...status, nextJob: name }, events: [created], actions: [] };
  // Ours, created by a pass whose status write did not land: its Events were not recorded either
  // (they follow the write), so this pass tells of the step.
  if (answer.existing?.metadata.ownerReferences?.some((o) => o.uid === job.metadata.uid))
    return { status: { ...status, nextJob: name }, events: [created], actions: [] };
  const message = `MediaJob ${name} already exists and does not belong to this pipeline`;
  const events: PlannedEvent[] = [];
  return {
    status: noteCondition(
      status,
      job.metadata.generation,
      { type: "NextStepCreated", status: "False", reason: NEXT_STEP_NAME_TAKEN, message },
      now,
      events,
      "Warning",
    ),
    events,
    actions: [],
    error: terminal(message),
  };
}
