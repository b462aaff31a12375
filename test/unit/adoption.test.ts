// Pure pieces of adoption and of storing outputs: what marks a result adopted from a callback, what
// lifts the mark, and an output too deep for the status.
import { describe, expect, it } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import {
  ACCEPTED_PROVIDER_JOB_ANNOTATION,
  adoptedWithoutEvidence,
  confirmAdoption,
} from "../../src/callback/adoption.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { applyProviderResult, OUTPUT_MAX_DEPTH, storedOutput } from "../../src/mediajob/provider-result.js";
import { intentStatus } from "../../src/mediajob/submission.js";
import { decideResult } from "../../src/mediajob/result.js";

const NOW = "2026-01-01T00:00:00.000Z";

function unconfirmed(): MediaJob {
  return makeMediaJob("a")
    .ns("tenant-a")
    .uid("uid-a")
    .generation(1)
    .spec({ then: [{ workload: "tts" }] })
    .status({
      ...intentStatus(
        { phase: "Pending", jobId: "uid-a" },
        { endpointId: "ep", submissionId: "sub-1", now: NOW },
      ),
    })
    .build();
}

describe("adoption", () => {
  const submission = { uid: "uid-a", attempt: 1, id: "sub-1" };
  const result = { id: "other-tenant-job-u1", status: "COMPLETED", output: { text: "theirs" } };

  it("marks a result adopted from a callback, and holds it until the /run answer or an operator vouches", () => {
    const job = unconfirmed();
    const d = decideResult(job, { result, now: NOW, submission, adopt: true });
    expect(d).toMatchObject({ outcome: "applied", adopted: true, status: { phase: "Completed" } });
    const adopted = { ...job, status: d.status };
    expect(adopted.status?.conditions?.find((c) => c.type === "Submitted")?.reason).toBe("AdoptedByCallback");
    expect(adoptedWithoutEvidence(adopted)).toBe(true);

    // An operator's accept names the very id.
    const accepted = {
      ...adopted,
      metadata: { ...adopted.metadata, annotations: { [ACCEPTED_PROVIDER_JOB_ANNOTATION]: result.id } },
    };
    expect(adoptedWithoutEvidence(accepted)).toBe(false);
    const otherId = {
      ...adopted,
      metadata: { ...adopted.metadata, annotations: { [ACCEPTED_PROVIDER_JOB_ANNOTATION]: "x" } },
    };
    expect(adoptedWithoutEvidence(otherId)).toBe(true);

    // The /run answer naming the same id confirms it; another id does not.
    const confirmed = confirmAdoption(adopted.status, result.id, NOW, 1);
    expect(confirmed?.conditions?.find((c) => c.type === "Submitted")?.reason).toBe("Submitted");
    expect(adoptedWithoutEvidence({ ...adopted, status: confirmed })).toBe(false);
    expect(confirmAdoption(adopted.status, "our-own-job-u1", NOW, 1)).toBeUndefined();
  });

  it("does not mark a result whose provider id was recorded from /run", () => {
    const job = unconfirmed();
    job.status = {
      ...job.status,
      providerJobId: result.id,
      submission: { ...job.status!.submission!, state: "Accepted" },
    };
    const d = decideResult(job, { result, now: NOW, submission, adopt: true });
    expect(d.adopted).toBe(false);
    expect(adoptedWithoutEvidence({ ...job, status: d.status })).toBe(false);
  });
});

describe("outputs too deep for the status", () => {
  it("are stored as a marker, and the job still completes", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 5000; i++) deep = [deep];
    expect(() => JSON.stringify(deep)).toThrow();
    expect(storedOutput({ deep })).toEqual({
      truncated: true,
      reason: `nested deeper than ${OUTPUT_MAX_DEPTH} levels`,
      maxDepth: OUTPUT_MAX_DEPTH,
    });
    const job = unconfirmed();
    job.status = { ...job.status, providerJobId: "p-1" };
    const status = applyProviderResult(job, { id: "p-1", status: "COMPLETED", output: deep }, NOW);
    expect(status?.phase).toBe("Completed");
    // Just within the cap: kept as it is.
    let ok: unknown = 1;
    for (let i = 0; i < OUTPUT_MAX_DEPTH - 1; i++) ok = { k: ok };
    expect(storedOutput(ok)).toBe(ok);
  });
});
