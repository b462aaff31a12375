// afterStop as a table (KubeRay's rayjob_controller_unit_test.go style): each row a reason to stop
// a running job (cancel, suspend, deadline, start deadline, usage limit) and the provider's answer
// to the cancel, and what the job becomes: followed while the provider still runs it, its own end
// when it finished first, the stop's end once the provider ended it, a retry when the cancel failed.
import { describe, expect, it } from "vitest";
import { getCondition } from "../../src/crds/conditions.js";
import type { JobPhase, MediaJobStatus } from "../../src/crds/mediajob.js";
import type { StopReason } from "../../src/mediajob/pass.js";
import { afterStop, type CancelAnswer } from "../../src/mediajob/stop.js";
import { submittedStatus, trackedJob } from "../support/builders.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();
const FOLLOW_MS = 30_000;

/** Submitted a minute ago as p-1, its cancel just answered. */
const running: MediaJobStatus = submittedStatus(ago(60), {
  submission: { attempt: 1, id: "s-1", startedAt: ago(60), state: "Accepted", startBy: ago(0) },
});
/** The same job already followed after a cancel sent earlier (condition Stopping, CancelSent). */
const followed: MediaJobStatus = {
  ...running,
  conditions: [
    {
      type: "Stopping",
      status: "True",
      reason: "CancelSent",
      message: "cancelled job p-1 at the provider, which still reports it IN_PROGRESS",
      lastTransitionTime: ago(10),
    },
  ],
};

const answer = (status: string, confirmed = true): CancelAnswer => ({
  result: { id: "p-1", status, executionTime: 4_000, delayTime: 1_000, output: { text: "ok" } },
  ...(confirmed && { confirmed }),
});

interface Row {
  name: string;
  why: StopReason;
  answer: CancelAnswer;
  status?: MediaJobStatus;
  maxAttempts?: number;
  want: {
    phase: JobPhase;
    /** The Events told, as [type, reason]. */
    events: Array<[string, string]>;
    /** What status.error says, when the job ended or waits because of the stop. */
    error?: RegExp;
    /** The Stopping condition's reason while the job is followed. */
    stopping?: string;
    requeueAfterMs?: number;
    /** The pass fails, to be retried with backoff, with this message. */
    retry?: RegExp;
    /** The status handed in, as it was (nothing to write). */
    unchanged?: boolean;
    /** The attempt's usage recorded from the answer, with the provider's end. */
    usage?: string;
  };
}

const rows: Row[] = [
  // The provider still runs the job: followed, told once.
  ...(
    [
      ["cancel", "CancelSent"],
      ["suspend", "SuspendCancelSent"],
      ["deadline", "DeadlineCancelSent"],
      ["start-deadline", "StartDeadlineCancelSent"],
      ["usage-limit", "UsageLimitCancelSent"],
    ] as const
  ).map(([why, reason]): Row => ({
    name: `${why}, the provider still runs it: Processing, followed (${reason}), told once`,
    why,
    answer: answer("IN_PROGRESS"),
    want: { phase: "Processing", events: [["Normal", reason]], stopping: reason, requeueAfterMs: FOLLOW_MS },
  })),
  {
    name: "cancel, already followed and still running: nothing told again, nothing to write",
    why: "cancel",
    answer: answer("IN_QUEUE"),
    status: followed,
    want: { phase: "Processing", events: [], unchanged: true, requeueAfterMs: FOLLOW_MS },
  },
  {
    name: "cancel, ended by the cancel's answer only (not the job's own status): followed until its times are read",
    why: "cancel",
    answer: answer("CANCELLED", false),
    want: {
      phase: "Processing",
      events: [["Normal", "CancelSent"]],
      stopping: "CancelSent",
      requeueAfterMs: FOLLOW_MS,
    },
  },
  // The provider ended it as the cancel asked: the stop's own end, with the attempt's usage.
  {
    name: "cancel, CANCELLED: Cancelled for good, the time it ran recorded",
    why: "cancel",
    answer: answer("CANCELLED"),
    want: {
      phase: "Cancelled",
      events: [],
      error: /^Cancelled: spec\.cancel is true: cancelled job p-1 at the provider \(CANCELLED\)$/,
      usage: "CANCELLED",
    },
  },
  {
    name: "suspend, CANCELLED: Pending until resumed, told Suspended",
    why: "suspend",
    answer: answer("CANCELLED"),
    want: { phase: "Pending", events: [["Normal", "Suspended"]], usage: "CANCELLED" },
  },
  {
    name: "deadline, CANCELLED: Failed, DeadlineExceeded",
    why: "deadline",
    answer: answer("CANCELLED"),
    want: {
      phase: "Failed",
      events: [["Warning", "DeadlineExceeded"]],
      error: /^DeadlineExceeded: .*cancelled job p-1 at the provider \(CANCELLED\)/,
      usage: "CANCELLED",
    },
  },
  {
    name: "start deadline, CANCELLED, no attempt left: Failed, StartDeadlineExceeded",
    why: "start-deadline",
    answer: answer("CANCELLED"),
    want: {
      phase: "Failed",
      events: [["Warning", "StartDeadlineExceeded"]],
      error: /^StartDeadlineExceeded: /,
      usage: "CANCELLED",
    },
  },
  {
    name: "start deadline, CANCELLED, an attempt left (maxAttempts 2): Pending, submitted again",
    why: "start-deadline",
    answer: answer("CANCELLED"),
    maxAttempts: 2,
    want: {
      phase: "Pending",
      events: [["Warning", "StartDeadlineExceeded"]],
      error: /^StartDeadlineExceeded: /,
      usage: "CANCELLED",
    },
  },
  {
    name: "usage limit, CANCELLED: Pending, held for the next period, told UsageLimitReached",
    why: "usage-limit",
    answer: answer("CANCELLED"),
    want: { phase: "Pending", events: [["Warning", "UsageLimitReached"]], usage: "CANCELLED" },
  },
  // The provider finished the job before the cancel took: it ran once, its own end stands.
  ...(["cancel", "suspend", "deadline", "start-deadline", "usage-limit"] as const).map((why): Row => ({
    name: `${why}, COMPLETED before the cancel: Completed, with its result`,
    why,
    answer: answer("COMPLETED"),
    want: { phase: "Completed", events: [], usage: "COMPLETED" },
  })),
  {
    name: "cancel, FAILED for good before the cancel: keeps its failure",
    why: "cancel",
    answer: answer("FAILED"),
    want: { phase: "Failed", events: [], usage: "FAILED" },
  },
  {
    name: "cancel, FAILED with an attempt left: Cancelled, not retried",
    why: "cancel",
    answer: answer("FAILED"),
    maxAttempts: 2,
    want: {
      phase: "Cancelled",
      events: [],
      error: /^Cancelled: spec\.cancel is true: cancelled job p-1 at the provider \(FAILED\)$/,
      usage: "FAILED",
    },
  },
  {
    name: "suspend, FAILED for good before the cancel: keeps its failure",
    why: "suspend",
    answer: answer("FAILED"),
    want: { phase: "Failed", events: [], usage: "FAILED" },
  },
  {
    name: "deadline, FAILED before the cancel: the deadline's end (Failed, DeadlineExceeded)",
    why: "deadline",
    answer: answer("FAILED"),
    want: {
      phase: "Failed",
      events: [["Warning", "DeadlineExceeded"]],
      error: /^DeadlineExceeded: /,
      usage: "FAILED",
    },
  },
  // The provider no longer knows the job: nothing runs there, the stop's end without usage.
  {
    name: "cancel, lost: Cancelled",
    why: "cancel",
    answer: { lost: true },
    want: { phase: "Cancelled", events: [], error: /the provider no longer knows job p-1$/ },
  },
  {
    name: "suspend, lost: Pending, told Suspended",
    why: "suspend",
    answer: { lost: true },
    want: { phase: "Pending", events: [["Normal", "Suspended"]] },
  },
  {
    name: "deadline, lost: Failed, DeadlineExceeded",
    why: "deadline",
    answer: { lost: true },
    want: {
      phase: "Failed",
      events: [["Warning", "DeadlineExceeded"]],
      error: /^DeadlineExceeded: .*no longer knows job p-1/,
    },
  },
  // The cancel failed: the job is as it was, the pass retried (a deadline's cancel too).
  ...(["cancel", "deadline", "suspend"] as const).map((why): Row => ({
    name: `${why}, the cancel failed: unchanged, told CancelFailed, retried`,
    why,
    answer: { error: "503 Service Unavailable" },
    want: {
      phase: "Processing",
      events: [["Warning", "CancelFailed"]],
      unchanged: true,
      retry: /^could not cancel job p-1 at the provider: 503 Service Unavailable$/,
    },
  })),
];

describe("afterStop: a running job after its cancel's answer", () => {
  it.each(rows)("$name", ({ why, answer: a, status = running, maxAttempts, want }) => {
    const job = trackedJob()
      .spec({ ...(maxAttempts && { maxAttempts }), ...(why === "deadline" && { activeDeadlineSeconds: 30 }) })
      .status(status)
      .build();
    const plan = afterStop(job, status, why, a, NOW.toISOString(), FOLLOW_MS);
    expect(plan.actions).toEqual([]);
    expect(plan.status.phase).toBe(want.phase);
    expect(plan.events.map(([type, reason]) => [type, reason])).toEqual(want.events);
    if (want.error) expect(plan.status.error).toMatch(want.error);
    expect(getCondition(plan.status.conditions, "Stopping")?.reason).toBe(
      want.stopping ?? status.conditions?.find((c) => c.type === "Stopping")?.reason,
    );
    expect(plan.requeueAfterMs).toBe(want.requeueAfterMs);
    if (want.retry)
      expect(plan.error).toEqual({ terminal: false, message: expect.stringMatching(want.retry) });
    else expect(plan.error).toBeUndefined();
    if (want.unchanged) expect(plan.status).toBe(status);
    const recorded = plan.status.usage?.attempts.map((u) => [u.attempt, u.providerStatus, u.executionTimeMs]);
    expect(recorded).toEqual(want.usage ? [[1, want.usage, 4_000]] : undefined);
  });
});
