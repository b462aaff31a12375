import { describe, expect, it } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { trimMediaJob } from "../../src/controller/cache-transform.js";
import { stripMetadata } from "../../src/runtime/strip-metadata.js";
import { atRest, finishedForGood, settled } from "../../src/mediajob/at-rest.js";
import { jobEventWorthALook } from "../../src/controller/job-at-rest.js";
import { FINALIZER } from "../../src/mediajob/job.js";

const job = (
  phase: NonNullable<MediaJob["status"]>["phase"],
  extra: { observedGeneration?: number; finalizers?: string[]; deleting?: boolean } = {},
) =>
  makeMediaJob("j")
    .ns("ns")
    .uid("0d7c2a52-1d2c-4b5a-9e8f-7a6b5c4d3e2f")
    .resourceVersion("42")
    .generation(2)
    .created("2026-01-01T00:00:00Z")
    .labels({ "media-orchestrator.io/pipeline": "p" })
    .meta({
      ownerReferences: [{ uid: "u", name: "p", kind: "MediaJob" }],
      managedFields: [{ manager: "kubectl", fieldsV1: { "f:spec": {} } }],
    })
    .annotations({ "kubectl.kubernetes.io/last-applied-configuration": "{}", team: "media" })
    .meta({
      ...(extra.finalizers && { finalizers: extra.finalizers }),
      ...(extra.deleting && { deletionTimestamp: "2026-01-01T00:01:00Z" }),
    })
    .input({ audio: "a.wav" })
    .spec({ then: [{ workload: "tts" }], timeoutSeconds: 60 })
    .status({
      phase,
      nextJob: "j-2",
      output: { text: "ok" },
      jobId: "j",
      providerJobId: "p-1",
      conditions: [
        {
          type: "Succeeded",
          status: "True",
          reason: "Completed",
          message: "done",
          lastTransitionTime: "2026-01-01T00:00:30Z",
        },
      ],
      observedGeneration: extra.observedGeneration ?? 2,
    })
    .build();

describe("cache transform", () => {
  it("drops managedFields and the last-applied annotation, keeps other annotations", () => {
    const j = stripMetadata(job("Processing"));
    expect(j.metadata).not.toHaveProperty("managedFields");
    expect(j.metadata.annotations).toEqual({ team: "media" });
  });

  it("keeps a settled job as the record of what the controller reads of it", () => {
    const record = trimMediaJob(job("Completed"));
    expect(record).toEqual({
      apiVersion: "media-orchestrator.io/v1alpha1",
      kind: "MediaJob",
      metadata: {
        name: "j",
        namespace: "ns",
        uid: "0d7c2a52-1d2c-4b5a-9e8f-7a6b5c4d3e2f",
        resourceVersion: "42",
        generation: 2,
      },
      spec: { workload: "asr" },
      // The provider job it holds: another job's /run answer naming it is refused.
      status: { phase: "Completed", observedGeneration: 2, nextJob: "j-2", providerJobId: "p-1" },
    });
    // The record answers every question the manager asks of a cached job the same way.
    expect(atRest(record)).toBe(true);
    expect(settled(record)).toBe(true);
    expect(jobEventWorthALook("update", record, record, false)).toBe(false);
    expect(
      jobEventWorthALook(
        "update",
        { ...record, metadata: { ...record.metadata, generation: 3 } },
        record,
        false,
      ),
    ).toBe(true);
    expect(jobEventWorthALook("delete", record, undefined, false)).toBe(true);
  });

  it("keeps another controller's finalizers in the record", () => {
    const record = trimMediaJob(job("Failed", { finalizers: ["example.com/archive"] }));
    expect(record.metadata.finalizers).toEqual(["example.com/archive"]);
    expect(record.status).toEqual({
      phase: "Failed",
      observedGeneration: 2,
      nextJob: "j-2",
      providerJobId: "p-1",
    });
  });

  it("keeps the whole status of a finished job whose spec edit is not observed yet (its reconcile writes status from it)", () => {
    const unobserved = trimMediaJob(job("Completed", { observedGeneration: 1 }));
    expect(settled(unobserved)).toBe(false);
    expect(unobserved.spec).toEqual({ workload: "asr", timeoutSeconds: 60 });
    expect(unobserved.status?.output).toEqual({ text: "ok" });
    expect(unobserved.status?.conditions).toHaveLength(1);
    expect(unobserved.metadata).not.toHaveProperty("managedFields");
  });

  it("keeps active, held and deleted jobs whole but for their metadata bookkeeping", () => {
    for (const j of [
      job("Processing"),
      job("Pending"),
      job("Completed", { finalizers: [FINALIZER] }),
      job("Failed", { deleting: true }),
    ]) {
      const cached = trimMediaJob(j);
      expect(cached.spec.input).toEqual({ audio: "a.wav" });
      expect(cached.spec.then).toHaveLength(1);
      expect(cached.status?.output).toEqual({ text: "ok" });
      expect(cached.metadata.labels).toBeDefined();
      expect(cached.metadata).not.toHaveProperty("managedFields");
    }
  });

  /** What a reader of a settled job sees, built from the whole job. */
  const readerView = (j: MediaJob) => ({
    apiVersion: j.apiVersion,
    kind: "MediaJob",
    metadata: {
      name: j.metadata.name,
      namespace: j.metadata.namespace,
      uid: j.metadata.uid,
      resourceVersion: j.metadata.resourceVersion,
      generation: j.metadata.generation,
      ...(j.metadata.finalizers?.length && { finalizers: j.metadata.finalizers }),
    },
    spec: { workload: j.spec.workload },
    status: {
      phase: j.status?.phase,
      observedGeneration: j.status?.observedGeneration,
      ...(j.status?.nextJob !== undefined && { nextJob: j.status.nextJob }),
      ...(j.status?.providerJobId !== undefined && { providerJobId: j.status.providerJobId }),
    },
  });
  const settledJob = (
    changes: {
      phase?: "Completed" | "Failed" | "Cancelled";
      namespace?: string;
      resourceVersion?: string;
      generation?: number;
      nextJob?: string;
      finalizers?: string[];
      then?: boolean;
    } = {},
  ) => {
    const j = job(changes.phase ?? "Completed", {
      observedGeneration: changes.generation ?? 2,
      finalizers: changes.finalizers,
    });
    j.metadata.namespace = changes.namespace ?? "ns";
    j.metadata.resourceVersion = "resourceVersion" in changes ? changes.resourceVersion : "42";
    j.metadata.generation = changes.generation ?? 2;
    if (changes.nextJob === undefined) delete j.status!.nextJob;
    else j.status!.nextJob = changes.nextJob;
    if (!changes.then) delete j.spec.then;
    return j;
  };

  it.each([
    ["a Completed job with its next step", settledJob({ nextJob: "j-2", then: true })],
    ["a Completed last step", settledJob()],
    ["a Failed job", settledJob({ phase: "Failed" })],
    ["a Cancelled job in another namespace", settledJob({ phase: "Cancelled", namespace: "other" })],
    ["a job edited a few times", settledJob({ generation: 7 })],
    ["a job another controller holds", settledJob({ finalizers: ["example.com/archive"] })],
    ["a resourceVersion of one digit", settledJob({ resourceVersion: "7" })],
    ["a resourceVersion past nine digits", settledJob({ resourceVersion: "12345678901" })],
    ["a resourceVersion with a leading zero", settledJob({ resourceVersion: "0042" })],
    ["a resourceVersion that is not a number", settledJob({ resourceVersion: "v1-abc" })],
    ["no resourceVersion", settledJob({ resourceVersion: undefined })],
  ])("keeps every field a reader of a settled job reads: %s", (_case, whole) => {
    const expected = readerView(whole);
    expect(settled(whole)).toBe(true);
    const record = trimMediaJob(structuredClone(whole));
    expect(record).toEqual(expected);
    expect(record.metadata.resourceVersion).toBe(whole.metadata.resourceVersion);
    // Read as the manager's handlers, the resync and the metrics read it.
    expect(settled(record)).toBe(true);
    expect(atRest(record)).toBe(true);
    expect(finishedForGood(record)).toBe(true);
    expect(record.metadata.deletionTimestamp).toBeUndefined();
    expect(record.spec.then).toBeUndefined();
    expect(record.spec.endpointRef).toBeUndefined();
    expect(record.spec.account).toBeUndefined();
    expect(record.status?.submission).toBeUndefined();
    // A spread, a JSON round trip and a structured clone see the same plain MediaJob.
    expect({ ...record }).toEqual(expected);
    expect(JSON.parse(JSON.stringify(record))).toEqual(JSON.parse(JSON.stringify(expected)));
    expect(structuredClone(record)).toEqual(expected);
    expect(Object.keys(record)).toEqual(["apiVersion", "kind", "metadata", "spec", "status"]);
  });

  it("keeps each record's own name, uid and resourceVersion", () => {
    const a = trimMediaJob(settledJob({ resourceVersion: "100" }));
    const other = settledJob({ resourceVersion: "101" });
    other.metadata.name = "k";
    other.metadata.uid = "1e8d3b63-2e3d-4c6b-8f90-8b7c6d5e4f30";
    const b = trimMediaJob(other);
    expect(a.metadata).toMatchObject({
      name: "j",
      uid: "0d7c2a52-1d2c-4b5a-9e8f-7a6b5c4d3e2f",
      resourceVersion: "100",
    });
    expect(b.metadata).toMatchObject({
      name: "k",
      uid: "1e8d3b63-2e3d-4c6b-8f90-8b7c6d5e4f30",
      resourceVersion: "101",
    });
    expect(b.status).toEqual(a.status);
  });

  it("refuses a write to a record instead of losing it", () => {
    const record = trimMediaJob(settledJob()) as { status?: unknown; metadata: { name: string } };
    expect(() => {
      record.status = { phase: "Pending" };
    }).toThrow(TypeError);
    expect(() => {
      record.metadata.name = "changed";
    }).toThrow(TypeError);
    expect(record.metadata.name).toBe("j");
  });

  it("refuses a change to another controller's finalizers in a record", () => {
    const record = trimMediaJob(settledJob({ finalizers: ["example.com/archive"] }));
    expect(() => record.metadata.finalizers!.push("example.com/other")).toThrow(TypeError);
    expect(record.metadata.finalizers).toEqual(["example.com/archive"]);
  });

  it("drops the annotations when the last-applied one was all there was", () => {
    const j = job("Processing");
    j.metadata.annotations = { "kubectl.kubernetes.io/last-applied-configuration": "{}" };
    expect(stripMetadata(j).metadata).not.toHaveProperty("annotations");
  });

  /** A job as the controller leaves it after submitting it, and what the cache must keep of it. */
  const submitted = () => {
    const j = job("Processing", { finalizers: [FINALIZER] });
    j.status = {
      phase: "Processing",
      jobId: "0d7c2a52-1d2c-4b5a-9e8f-7a6b5c4d3e2f",
      providerJobId: "sim-0d7c2a52-1d2c-4b5a-9e8f-7a6b5c4d3e2f",
      endpointId: "ep-asr",
      attempts: 1,
      submission: {
        attempt: 1,
        id: "Zm9vYmFyYmF6cXV4cXV1",
        startedAt: "2026-01-01T00:00:01.5Z",
        state: "Accepted",
      },
      submittedAt: "2026-01-01T00:00:01.5Z",
      updatedAt: "2026-01-01T00:00:01.5Z",
      conditions: [
        {
          type: "Admitted",
          status: "True",
          observedGeneration: 2,
          lastTransitionTime: "2026-01-01T00:00:01.5Z",
          reason: "NoAccount",
          message: "the job names no billing account",
        },
        {
          type: "Submitted",
          status: "True",
          lastTransitionTime: "2026-01-01T00:00:01.5Z",
          reason: "Submitted",
          message: "submitted as sim-0d7c2a52-1d2c-4b5a-9e8f-7a6b5c4d3e2f",
        },
      ],
      observedGeneration: 2,
    };
    return j;
  };

  it("keeps every field of an active job the reconciler reads, and adds none", () => {
    const whole = submitted();
    const {
      managedFields: _m,
      annotations: _a,
      ...metadata
    } = whole.metadata as typeof whole.metadata & {
      managedFields?: unknown;
    };
    const expected = { ...whole, metadata: { ...metadata, annotations: { team: "media" } } };
    // Strict: a field absent from the object stays absent (no key set to undefined).
    expect(trimMediaJob(structuredClone(whole))).toStrictEqual(expected);
  });

  it("keeps a condition with a field it does not know as it came", () => {
    const j = submitted();
    const extra = { ...j.status!.conditions![0]!, severity: "Info" };
    j.status!.conditions = [extra];
    expect(trimMediaJob(j).status?.conditions).toEqual([{ ...extra }]);
  });
});
