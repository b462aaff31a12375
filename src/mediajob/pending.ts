// A Pending job: held while suspended, failed past its deadline, admitted by its account and its
// plan, matched to a Ready endpoint, given a slot of that endpoint's in-flight window, then
// submitted (the finalizer first, so a deletion always cancels it).
import { getCondition, type ConditionInput } from "../crds/conditions.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { admission } from "./admission.js";
import { admit } from "./admission-chain.js";
import { noteCondition, withCondition, type PlannedEvent } from "./conditions.js";
import { deadlineExceeded } from "./deadline.js";
import { FINALIZER } from "./job.js";
import { firstStepMetadata } from "./pipeline.js";
import type { Action, Facts, Plan } from "./pass.js";
import { cancelledStatus } from "./stop.js";
import { dequeuedStatus, queuedStatus } from "./queued.js";
import { planSubmission } from "./write-ahead.js";
import { attemptIOFor, declaresMedia, mediaRefused, STORAGE_NOT_CONFIGURED } from "./media.js";
import { stageKey } from "./stage-cache.js";

function withoutAccount(status: MediaJobStatus): MediaJobStatus {
  const { account: _dropped, ...rest } = status;
  return rest;
}

export function planPending(job: MediaJob, status: MediaJobStatus, facts: Facts): Plan {
  const now = facts.now.toISOString();
  const gen = job.metadata.generation;
  const events: PlannedEvent[] = [];
  // A pipeline's first job is labelled as its later steps are, from its first pass: while it
  // waits, `-l media-orchestrator.io/pipeline=NAME` must find it too (a submitted job gets the
  // label with its finalizer instead, in the same write).
  const label = firstStepMetadata(job);
  const labelling: Action[] = label ? [{ type: "labelPipeline", metadata: label }] : [];
  const wait = (s: MediaJobStatus): Plan => ({
    status: s,
    events,
    actions: labelling,
    requeueAfterMs: facts.settings.tickMs,
  });
  // The admission chain (admission-chain.ts) asks its checks in order: cancel, suspension,
  // deadline, the namespace's binding, the subscription, the account's plan, a Ready endpoint.
  const verdict = admit({
    job,
    status,
    nowMs: facts.now.getTime(),
    boundAccounts: facts.boundAccounts ?? [],
    accountRequired: facts.settings.accountRequired ?? false,
    subscriptionState: facts.subscriptionState,
    plans: facts.settings.plans,
    account: facts.account,
    endpoint: facts.endpoint,
  });
  const hold = verdict.admitted ? undefined : verdict.hold;
  if (hold?.check === "cancel") {
    const cancelled = cancelledStatus(status, now, "the job was never submitted");
    return { status: cancelled, events: [], actions: [] };
  }
  // A suspended job is not submitted; it waits for spec.suspend to be false (a watch event).
  const suspended = getCondition(status.conditions, "Suspended");
  if (hold?.check === "suspend") {
    if (suspended?.status !== "True") {
      events.push(["Normal", "Suspended", hold.message]);
      status = withCondition(
        status,
        gen,
        { type: "Suspended", status: "True", reason: hold.reason, message: hold.message },
        now,
      );
    }
    return { status, events, actions: labelling };
  }
  if (suspended && suspended.status !== "False") {
    const message = "spec.suspend is false: the job is submitted again";
    events.push(["Normal", "Resumed", message]);
    status = withCondition(
      status,
      gen,
      { type: "Suspended", status: "False", reason: "Resumed", message },
      now,
    );
  }
  if (hold?.check === "deadline") {
    const failed = deadlineExceeded(status, now, "waiting to be submitted again");
    events.push(["Warning", "DeadlineExceeded", failed.error!]);
    return { status: failed, events, actions: [] };
  }
  // The account a binding supplied is recorded before the job is submitted: the reporter, the
  // dispatcher and the CLI read it from the job (jobAccount).
  const billed = verdict.account;
  if (
    hold?.check !== "binding" &&
    job.spec.account === undefined &&
    billed !== status.account &&
    !status.attempts
  )
    status = billed === undefined ? withoutAccount(status) : { ...status, account: billed };
  // Admitted: the binding, the subscription and the plan; EndpointReady: the endpoint.
  const admitted: ConditionInput = verdict.admitted
    ? verdict.admittedCondition
    : hold!.check === "endpoint"
      ? admission(billed, facts.subscriptionState)
      : hold!.condition!;
  status = noteCondition(
    status,
    gen,
    admitted,
    now,
    events,
    admitted.status === "True" ? "Normal" : "Warning",
  );
  if (admitted.status !== "True") return wait(status);
  const ready = verdict.admitted ? verdict.readyCondition : hold!.condition!;
  status = noteCondition(status, gen, ready, now, events, ready.status === "True" ? "Normal" : "Warning");
  const endpointId = facts.endpoint?.status?.endpointId;
  if (!verdict.admitted || !endpointId) return wait(status);
  const executionTimeoutMs = verdict.executionTimeoutMs;

  // The endpoint's in-flight window (queued.ts): without a slot the job waits here, Queued.
  const slot = facts.slot;
  if (slot && !slot.granted) return wait(queuedStatus(status, gen, slot, now));
  status = dequeuedStatus(status, gen, now);

  const actions: Action[] = [];
  // The finalizer goes on before the job exists at the provider, so a deletion always cancels it.
  // A pipeline's first job gets the pipeline's label in the same write, as its later steps have.
  if (!job.metadata.finalizers?.includes(FINALIZER)) {
    actions.push({ type: "addFinalizer", ...(label && { metadata: label }) });
  }
  const submission = planSubmission(job, status, {
    endpointId,
    newSubmissionId: facts.newSubmissionId,
    now,
    defaultTimeoutSeconds: facts.settings.defaultTimeoutSeconds,
    ...(facts.settings.defaultStartDeadlineSeconds && {
      defaultStartDeadlineSeconds: facts.settings.defaultStartDeadlineSeconds,
    }),
    ...(executionTimeoutMs !== undefined && { executionTimeoutMs }),
    ...(facts.endpoint?.status?.executionTimeoutMs !== undefined && {
      endpointExecutionTimeoutMs: facts.endpoint.status.executionTimeoutMs,
    }),
  });
  // A job with media: its attempt's GETs and PUTs, or why it cannot be sent at all (media.ts).
  if (declaresMedia(job.spec)) {
    const bucket = facts.settings.storageBucket;
    const io = bucket === undefined ? undefined : attemptIOFor(job, submission, bucket, now);
    if (!io?.ok) {
      const { reason, message } = io ?? STORAGE_NOT_CONFIGURED;
      const failed = mediaRefused(status, reason, message, now);
      events.push(["Warning", reason, failed.error!]);
      return { status: failed, events, actions: [] };
    }
    submission.io = io.plan;
    // A stage whose outputs an earlier job of this namespace stored may complete from them.
    const key = stageKey(job, facts.endpoint);
    if (key !== undefined) {
      submission.stageKey = key;
      submission.intent = { ...submission.intent, stageKey: key };
    }
  }
  actions.push({ type: "submit", submission });
  return { status, events, actions };
}
