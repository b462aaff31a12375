// afterSubmit: the domain's reading of the provider's answer to /run (src/mediajob/submit-answer.ts),
// as afterStop reads a cancel's. The executor sends and writes; what the answer means is decided here.
import { describe, expect, it } from "vitest";
import { trackedJob } from "../support/builders.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { afterSubmit, type SubmitAnswer } from "../../src/mediajob/submit-answer.js";
import { planSubmission } from "../../src/mediajob/write-ahead.js";

const NOW = new Date("2026-03-01T12:00:00.000Z");
const now = NOW.toISOString();
const settings = { defaultTimeoutSeconds: 600, confirmationWindowMs: 300_000 };
const pending: MediaJob = trackedJob()
  .input({ audio: "s3://bucket/a.wav" })
  .status({ phase: "Pending", jobId: "uid-1" })
  .build();
const p = planSubmission(pending, pending.status!, {
  endpointId: "ep-1",
  newSubmissionId: "sub-00000001",
  now,
  defaultTimeoutSeconds: 600,
});
/** The job as stored once the intent (step 1) landed. */
const stored: MediaJob = { ...pending, status: p.intent };

const cases: Array<{
  name: string;
  answer: SubmitAnswer;
  expect: (r: ReturnType<typeof afterSubmit>) => void;
}> = [
  {
    name: "accepted: the id for step (4), a Submitted Event, looked at again at the timeout",
    answer: { accepted: "p-1" },
    expect: (r) => {
      expect(r).toMatchObject({ outcome: "accepted", providerJobId: "p-1", requeueAfterMs: p.timeoutMs });
      expect(r.events).toEqual([["Normal", "Submitted", "submitted to endpoint ep-1 as p-1, attempt 1"]]);
    },
  },
  {
    name: "refused: the intent withdrawn with the provider's code, retried with backoff",
    answer: { refused: { code: "ENDPOINT_NOT_FOUND", error: "404 endpoint not found" } },
    expect: (r) => {
      if (r.outcome !== "refused") throw new Error(r.outcome);
      expect(r.error).toEqual({
        terminal: false,
        message: "submission to endpoint ep-1 failed: 404 endpoint not found",
      });
      expect(r.throttled).toBeUndefined();
      const back = r.write(stored);
      expect(back?.phase).toBe("Pending");
      expect(back?.conditions?.find((c) => c.type === "Submitted")).toMatchObject({
        status: "False",
        reason: "ENDPOINT_NOT_FOUND",
      });
      expect(r.events[0]?.slice(0, 2)).toEqual(["Warning", "ENDPOINT_NOT_FOUND"]);
    },
  },
  {
    name: "refused with a 429: the endpoint's window is told, with the provider's Retry-After",
    answer: { refused: { code: "RATE_LIMITED", error: "429", retryAfterMs: 2_000 } },
    expect: (r) => expect(r).toMatchObject({ outcome: "refused", throttled: { retryAfterMs: 2_000 } }),
  },
  {
    name: "unconfirmed: the attempt marked Unconfirmed, no resubmission before its confirmation deadline",
    answer: { unconfirmed: "socket hang up" },
    expect: (r) => {
      if (r.outcome !== "unconfirmed") throw new Error(r.outcome);
      // The timeout (600 s) and the confirmation window (300 s) from the submission's start.
      expect(r.requeueAfterMs).toBe(900_000);
      expect(r.events[0]?.[1]).toBe("SubmissionUnconfirmed");
      expect(r.events[0]?.[2]).toMatch(/is unconfirmed: socket hang up; the job may be running/);
      const marked = r.write(stored);
      expect(marked?.phase).toBe("Processing");
      expect(marked?.conditions?.find((c) => c.type === "Submitted")).toMatchObject({
        status: "Unknown",
        reason: "SubmissionUnconfirmed",
      });
    },
  },
];

describe("afterSubmit", () => {
  it.each(cases)("$name", (c) => c.expect(afterSubmit(stored, p, c.answer, now, settings)));
});
