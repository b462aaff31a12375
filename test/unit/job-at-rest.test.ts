import { describe, expect, it } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { atRest } from "../../src/mediajob/at-rest.js";
import { jobEventWorthALook } from "../../src/controller/job-at-rest.js";
import { FINALIZER } from "../../src/mediajob/job.js";

const job = (
  status: MediaJob["status"],
  extra: { then?: boolean; finalizer?: boolean; generation?: number } = {},
) =>
  makeMediaJob("j")
    .ns("ns")
    .generation(extra.generation ?? 1)
    .meta(extra.finalizer ? { finalizers: [FINALIZER] } : {})
    .spec(extra.then ? { then: [{ workload: "tts" }] } : {})
    .status(status)
    .build();

describe("jobs at rest", () => {
  it("are finished for good and let go of", () => {
    expect(atRest(job({ phase: "Failed" }))).toBe(true);
    expect(atRest(job({ phase: "Cancelled" }))).toBe(true);
    expect(atRest(job({ phase: "Completed" }))).toBe(true);
    expect(atRest(job({ phase: "Completed", nextJob: "j-2" }, { then: true }))).toBe(true);
    expect(atRest(job({ phase: "Completed" }, { then: true }))).toBe(false); // next step to create
    expect(atRest(job({ phase: "Failed" }, { finalizer: true }))).toBe(false); // still to let go of
    expect(atRest(job({ phase: "Processing" }))).toBe(false);
    expect(atRest(job(undefined))).toBe(false);
  });

  it("are looked at again only when their spec changes or they go", () => {
    const done = job({ phase: "Completed" });
    expect(jobEventWorthALook("add", done, undefined, false)).toBe(false);
    expect(jobEventWorthALook("update", done, done, false)).toBe(false);
    expect(jobEventWorthALook("update", job({ phase: "Completed" }, { generation: 2 }), done, false)).toBe(
      true,
    );
    expect(jobEventWorthALook("delete", done, undefined, false)).toBe(true);
  });

  it("our own write is no news for a finished job, and always news for a running one", () => {
    expect(jobEventWorthALook("update", job({ phase: "Failed" }, { finalizer: true }), undefined, true)).toBe(
      false,
    );
    expect(jobEventWorthALook("update", job({ phase: "Pending" }), undefined, true)).toBe(true);
    expect(jobEventWorthALook("update", job({ phase: "Processing" }), undefined, true)).toBe(true);
    expect(jobEventWorthALook("update", job({ phase: "Completed" }, { then: true }), undefined, true)).toBe(
      true,
    );
    // Our write that a later write of ours replaced: the later one's event is the one to act on.
    expect(jobEventWorthALook("update", job({ phase: "Processing" }), undefined, true, true)).toBe(false);
    expect(jobEventWorthALook("update", job({ phase: "Pending" }), undefined, true, true)).toBe(false);
    // ...unless it is a deletion, and only our own writes are passed over.
    expect(jobEventWorthALook("delete", job({ phase: "Processing" }), undefined, true, true)).toBe(true);
    expect(jobEventWorthALook("update", job({ phase: "Processing" }), undefined, false, true)).toBe(true);
    // Someone else finished it (the sidecar's callback): the finalizer must come off.
    expect(
      jobEventWorthALook("update", job({ phase: "Completed" }, { finalizer: true }), undefined, false),
    ).toBe(true);
  });
});
