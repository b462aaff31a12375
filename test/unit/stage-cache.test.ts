// The stage cache's pure parts: which jobs are cached and under which key, what an entry may name,
// and what the sweep keeps for a live entry.
import { describe, expect, it } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { stageEntryFor, stageKey } from "../../src/mediajob/stage-cache.js";
import { parseStageEntry, parseStageEntryKey, stageEntryKey } from "../../src/storage/stage-cache.js";
import { planSweep } from "../../src/storage/retention.js";

const SHA = "a".repeat(64);
const UID = "0f8fad5b-d9cb-469f-a165-70867728950e";
const endpoint = (templateId: string) => ({ spec: { create: { templateId } } }) as unknown as GpuEndpoint;
const job = (spec: Partial<MediaJob["spec"]> = {}, ns = "team-a") =>
  makeMediaJob("j")
    .ns(ns)
    .uid(UID)
    .spec({
      workload: "asr",
      input: { language: "en" },
      media: {
        inputs: [{ name: "audio.wav", uri: `s3://b/${ns}/a.wav`, sha256: SHA }],
        outputs: [{ name: "t.json" }],
      },
      ...spec,
    } as MediaJob["spec"])
    .build();

describe("stageKey", () => {
  const base = stageKey(job(), endpoint("tpl-1"))!;
  it.each([
    [
      "another namespace (the entry is scoped, not the key)",
      stageKey(job({}, "team-b"), endpoint("tpl-1")),
      true,
    ],
    ["another input", stageKey(job({ input: { language: "fr" } }), endpoint("tpl-1")), false],
    ["another worker image", stageKey(job(), endpoint("tpl-2")), false],
    [
      "another input digest",
      stageKey(
        job({
          media: {
            inputs: [{ name: "audio.wav", uri: "s3://b/team-a/a.wav", sha256: "b".repeat(64) }],
            outputs: [{ name: "t.json" }],
          },
        }),
        endpoint("tpl-1"),
      ),
      false,
    ],
    [
      "another uri, same digest",
      stageKey(
        job({
          media: {
            inputs: [{ name: "audio.wav", uri: "s3://b/team-a/copy.wav", sha256: SHA }],
            outputs: [{ name: "t.json" }],
          },
        }),
        endpoint("tpl-1"),
      ),
      true,
    ],
    [
      "a pipeline step's previous job by another name, same output",
      stageKey(
        job({ input: { language: "en", previous: { job: "x", jobId: "1", output: { t: 1 } } } }),
        endpoint("tpl-1"),
      ) ===
      stageKey(
        job({ input: { language: "en", previous: { job: "y", jobId: "2", output: { t: 1 } } } }),
        endpoint("tpl-1"),
      )
        ? base
        : undefined,
      true,
    ],
  ])("%s: same key %s", (_name, key, same) => {
    expect(key).toBeDefined();
    expect(key === base).toBe(same);
  });

  it("is undefined for spec.cache Never, no declared output, or an input without its digest", () => {
    expect(stageKey(job({ cache: "Never" }), endpoint("t"))).toBeUndefined();
    expect(stageKey(job({ media: { inputs: [], outputs: [] } }), endpoint("t"))).toBeUndefined();
    expect(
      stageKey(
        job({ media: { inputs: [{ name: "a", uri: "s3://b/team-a/a" }], outputs: [{ name: "o" }] } }),
        endpoint("t"),
      ),
    ).toBeUndefined();
  });
});

describe("stage entries", () => {
  it("are named by namespace, stage and attempt, and read back", () => {
    const key = stageEntryKey("team-a", SHA, UID, 2);
    expect(key).toBe(`team-a/_cache/${SHA}/${UID}.2`);
    expect(parseStageEntryKey(key)).toEqual({ namespace: "team-a", stageKey: SHA, jobUid: UID, attempt: 2 });
    expect(parseStageEntryKey(`team-a/${UID}/2/out.json`)).toBeUndefined();
  });

  it("never name another namespace's object", () => {
    const body = (key: string) => JSON.stringify({ outputs: [{ name: "o", key, size: 1 }] });
    expect(parseStageEntry(body(`team-a/${UID}/1/o`), "team-a")).toBeDefined();
    expect(parseStageEntry(body(`team-b/${UID}/1/o`), "team-a")).toBeUndefined();
    expect(parseStageEntry("not json", "team-a")).toBeUndefined();
  });

  it("are left by a completed job that ran its stage, not by one completed from the cache", () => {
    const done = (reason: string) =>
      makeMediaJob("j")
        .ns("team-a")
        .uid(UID)
        .status({
          phase: "Completed",
          attempts: 1,
          stageKey: SHA,
          outputs: [{ name: "o", key: `team-a/${UID}/1/o`, uri: "s3://b/x", size: 3 }],
          conditions: [
            {
              type: "OutputsVerified",
              status: "True",
              reason,
              message: "",
              lastTransitionTime: "2026-01-01T00:00:00Z",
            },
          ],
        } as MediaJob["status"])
        .build();
    expect(stageEntryFor(done("Verified"))?.key).toBe(stageEntryKey("team-a", SHA, UID, 1));
    expect(stageEntryFor(done("CacheHit"))).toBeUndefined();
  });
});

describe("the sweep and the stage cache", () => {
  const NOW = Date.parse("2026-01-10T00:00:00Z");
  const obj = (key: string, ageS: number) => ({ key, size: 1, lastModifiedMs: NOW - ageS * 1000 });
  it("keeps a gone job's attempt a live entry names, and deletes expired entries", () => {
    const plan = planSweep({
      objects: [
        obj(`team-a/${UID}/1/o`, 7200),
        obj(`team-a/${UID}/2/o`, 7200),
        obj(stageEntryKey("team-a", SHA, UID, 1), 60),
        obj(stageEntryKey("team-a", "b".repeat(64), UID, 2), 8 * 86_400),
      ],
      liveJobs: new Set(),
      nowMs: NOW,
      minAgeMs: 0,
      cacheTtlMs: 7 * 86_400_000,
    });
    expect(plan.delete.map((o) => o.key).sort()).toEqual(
      [`team-a/${UID}/2/o`, stageEntryKey("team-a", "b".repeat(64), UID, 2)].sort(),
    );
  });
});
