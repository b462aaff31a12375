import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { stripMetadata, trimMediaJob } from "../../src/controller/cache-transform.js";

const job = (phase: NonNullable<MediaJob["status"]>["phase"]) =>
  ({
    apiVersion: "media-orchestrator.io/v1alpha1",
    kind: "MediaJob",
    metadata: {
      name: "j",
      namespace: "ns",
      managedFields: [{ manager: "kubectl", fieldsV1: { "f:spec": {} } }],
      annotations: { "kubectl.kubernetes.io/last-applied-configuration": "{}", team: "media" },
    },
    spec: { workload: "asr", input: { audio: "a.wav" }, then: [{ workload: "tts" }] },
    status: { phase, nextJob: "j-2", output: { text: "ok" } },
  }) as unknown as MediaJob;

describe("cache transform", () => {
  it("drops managedFields and the last-applied annotation, keeps other annotations", () => {
    const j = stripMetadata(job("Processing"));
    expect(j.metadata).not.toHaveProperty("managedFields");
    expect(j.metadata.annotations).toEqual({ team: "media" });
  });

  it("drops a finished job's input and steps, never its status; keeps a running job's spec", () => {
    const done = trimMediaJob(job("Completed"));
    expect(done.spec).toEqual({ workload: "asr" });
    expect(done.status).toEqual({ phase: "Completed", nextJob: "j-2", output: { text: "ok" } });
    const running = trimMediaJob(job("Processing"));
    expect(running.spec.input).toEqual({ audio: "a.wav" });
    expect(running.spec.then).toHaveLength(1);
  });
});
