import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { settledJobRecord, stripMetadata, trimMediaJob } from "../../src/controller/cache-transform.js";
import { atRest, jobEventWorthALook, settled } from "../../src/controller/job-at-rest.js";
import { FINALIZER } from "../../src/mediajob/lifecycle.js";

const job = (
  phase: NonNullable<MediaJob["status"]>["phase"],
  extra: { observedGeneration?: number; finalizers?: string[]; deleting?: boolean } = {},
) =>
  ({
    apiVersion: "media-orchestrator.io/v1alpha1",
    kind: "MediaJob",
    metadata: {
      name: "j",
      namespace: "ns",
      uid: "0d7c2a52-1d2c-4b5a-9e8f-7a6b5c4d3e2f",
      resourceVersion: "42",
      generation: 2,
      creationTimestamp: "2026-01-01T00:00:00Z",
      labels: { "media-orchestrator.io/pipeline": "p" },
      ownerReferences: [{ uid: "u", name: "p", kind: "MediaJob" }],
      managedFields: [{ manager: "kubectl", fieldsV1: { "f:spec": {} } }],
      annotations: { "kubectl.kubernetes.io/last-applied-configuration": "{}", team: "media" },
      ...(extra.finalizers && { finalizers: extra.finalizers }),
      ...(extra.deleting && { deletionTimestamp: "2026-01-01T00:01:00Z" }),
    },
    spec: { workload: "asr", input: { audio: "a.wav" }, then: [{ workload: "tts" }], timeoutSeconds: 60 },
    status: {
      phase,
      nextJob: "j-2",
      output: { text: "ok" },
      jobId: "j",
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
    },
  }) as unknown as MediaJob;

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
      status: { phase: "Completed", observedGeneration: 2, nextJob: "j-2" },
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
    expect(record.status).toEqual({ phase: "Failed", observedGeneration: 2, nextJob: "j-2" });
  });

  it("shares the strings every record repeats (one copy of a namespace, not one per job)", () => {
    const a = settledJobRecord(job("Completed"));
    const b = settledJobRecord(JSON.parse(JSON.stringify(job("Completed"))) as MediaJob);
    expect(b.metadata.namespace).toBe(a.metadata.namespace);
    expect(b.spec.workload).toBe(a.spec.workload);
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
});
