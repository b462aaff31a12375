// The rules the CLI and the sidecar take from the MediaJob domain instead of spelling them out:
// which submission a callback speaks of, what an operator may reset, the stuck rule, why a job waits.
import { describe, expect, it } from "vitest";
import { makeGpuEndpoint, makeMediaJob } from "../support/builders.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { endpointMatches, pickEndpoint } from "../../src/mediajob/admission.js";
import type { Workload } from "../../src/crds/common.js";
import { holdingCondition } from "../../src/mediajob/holds.js";
import { currentProviderJobId, providerIdScope } from "../../src/mediajob/job.js";
import { msUntilStuckAfter, planReset, resetLostRace } from "../../src/mediajob/recovery.js";
import { matchSubmission } from "../../src/mediajob/result.js";

const job = (
  status: MediaJobStatus | undefined,
  o: { uid?: string; spec?: Partial<MediaJob["spec"]> } = {},
) =>
  makeMediaJob("clip")
    .ns("ns")
    .uid(o.uid ?? "uid-1")
    .spec(o.spec ?? {})
    .status(status)
    .build();
const sub = { attempt: 2, id: "sub-0002", startedAt: "2026-01-01T00:00:00Z", state: "Accepted" as const };
const ref = { uid: "uid-1", jobId: "job-1", attempt: 2, id: "sub-0002" };

describe("matchSubmission: which submission a result bound to one speaks of", () => {
  it.each([
    ["its current submission", job({ phase: "Processing", jobId: "job-1", submission: sub }), "current"],
    [
      "an object re-created under the name (another uid)",
      job({ phase: "Processing", jobId: "job-1", submission: sub }, { uid: "uid-2" }),
      "recreated",
    ],
    [
      "another job id (re-created with another spec.id)",
      job({ phase: "Processing", jobId: "job-9", submission: sub }),
      "recreated",
    ],
    [
      "an earlier attempt",
      job({ phase: "Processing", jobId: "job-1", submission: { ...sub, attempt: 3, id: "sub-0003" } }),
      "earlier",
    ],
    [
      "a job finished with this submission",
      job({ phase: "Completed", jobId: "job-1", submission: sub }),
      "finished",
    ],
    ["a job finished and its submission cleared", job({ phase: "Failed", jobId: "job-1" }), "finished"],
  ])("%s", (_what, j, expected) => {
    expect(matchSubmission(j, ref)).toBe(expected);
  });
  it("without a job id in the reference, only the uid and the submission are compared", () => {
    const { jobId: _omit, ...noJobId } = ref;
    expect(matchSubmission(job({ phase: "Processing", jobId: "job-9", submission: sub }), noJobId)).toBe(
      "current",
    );
  });
});

describe("planReset and resetLostRace: what an operator may reset", () => {
  const now = "2026-01-01T01:00:00.000Z";
  it("a Processing job: the reset patch", () => {
    const r = planReset({ phase: "Processing", jobId: "job-1" }, now, {});
    expect(r).toMatchObject({ from: "Processing" });
  });
  it("a job Failed unconfirmed: only when asked for", () => {
    const failed: MediaJobStatus = {
      phase: "Failed",
      jobId: "job-1",
      submission: { ...sub, state: "Unconfirmed" },
    };
    expect(planReset(failed, now, {})).toEqual({ refused: "it is Failed, not Processing" });
    expect(planReset(failed, now, { failedUnconfirmed: true })).toMatchObject({ from: "Failed" });
  });
  it("a Pending or Completed job: refused, saying why", () => {
    expect(planReset({ phase: "Pending" }, now, { failedUnconfirmed: true })).toEqual({
      refused: "it is Pending, not Processing",
    });
    expect(planReset({ phase: "Failed", jobId: "j" }, now, { failedUnconfirmed: true })).toEqual({
      refused: "it is Failed, not Processing or Failed with SubmissionUnconfirmed",
    });
  });
  it("a refused patch is explained by what changed meanwhile", () => {
    const seen: MediaJobStatus = { phase: "Processing", jobId: "job-1", submission: sub };
    expect(resetLostRace(seen, { ...seen, jobId: "job-2" }, {})).toMatch(/re-created/);
    expect(resetLostRace(seen, { ...seen, phase: "Completed" }, {})).toMatch(/it is Completed/);
    expect(resetLostRace(seen, { ...seen, submission: { ...sub, id: "sub-0003" } }, {})).toMatch(
      /submitted again/,
    );
    expect(resetLostRace(seen, seen, {})).toBeUndefined();
  });
});

describe("the stuck rule, the provider id, why a job waits, which endpoint", () => {
  it("stuck past the limit counted from its submission", () => {
    const j = job({ phase: "Processing", submittedAt: "2026-01-01T00:00:00.000Z" });
    const t = Date.parse("2026-01-01T00:10:00.000Z");
    expect(msUntilStuckAfter(j, t, 600_000)).toBe(0);
    expect(msUntilStuckAfter(j, t, 900_000)).toBe(300_000);
  });
  it("the provider id: the recorded one, else the id the submission was sent with", () => {
    expect(currentProviderJobId(job({ phase: "Processing", jobId: "job-1", providerJobId: "p-1" }))).toBe(
      "p-1",
    );
    const sent = job({ phase: "Processing", jobId: "job-1", failures: 1 });
    expect(currentProviderJobId(sent)).toBe(`${providerIdScope(sent.metadata)}.job-1-retry-1`);
  });
  it("a Pending job is held by Admitted/EndpointReady False or Suspended/Queued True", () => {
    const c = (type: string, status: "True" | "False") => ({
      type,
      status,
      reason: "R",
      message: "m",
      lastTransitionTime: "t",
    });
    expect(
      holdingCondition({ phase: "Pending", conditions: [c("Admitted", "True"), c("EndpointReady", "False")] })
        ?.type,
    ).toBe("EndpointReady");
    expect(holdingCondition({ phase: "Pending", conditions: [c("Suspended", "True")] })?.type).toBe(
      "Suspended",
    );
    expect(holdingCondition({ phase: "Processing", conditions: [c("Admitted", "False")] })).toBeUndefined();
  });
  it("the endpoint: the one named, else the first by name serving the workload", () => {
    const ep = (name: string, workload: Workload) => makeGpuEndpoint(name, workload).build();
    const eps = [ep("b", "asr"), ep("a", "asr"), ep("c", "tts")];
    expect(pickEndpoint(job(undefined), eps)?.metadata.name).toBe("a");
    expect(pickEndpoint(job(undefined, { spec: { endpointRef: "c" } }), eps)?.metadata.name).toBe("c");
    expect(endpointMatches(job(undefined, { spec: { endpointRef: "c" } }), ep("a", "asr"))).toBe(false);
  });
});
