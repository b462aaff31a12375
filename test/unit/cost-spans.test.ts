// The cost loop's spans: read from a job's usage before the cache trims it, replaced by the job's
// newer copies, kept after the job is gone, forgotten once settled.
import { describe, expect, it } from "vitest";
import { CostSpans } from "../../src/controller/cost/spans.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { makeMediaJob } from "../support/builders.js";

const ended = (
  uid: string,
  account: string | undefined,
  attempts: Array<[string, number, string]>,
): MediaJob =>
  makeMediaJob(`job-${uid}`)
    .uid(uid)
    .status({
      phase: "Completed",
      usage: {
        workload: "asr",
        ...(account !== undefined && { account }),
        attempts: attempts.map(([endedAt, executionTimeMs, endpointId], i) => ({
          attempt: i + 1,
          providerJobId: `p${i}`,
          providerStatus: "COMPLETED" as const,
          endpointId,
          executionTimeMs,
          endedAt,
        })),
      },
    })
    .build();

describe("CostSpans", () => {
  it("keeps each attempt's execution as [end − executionTime, end) on its endpoint", () => {
    const spans = new CostSpans();
    spans.observe(
      ended("u1", "cus_a", [
        ["2026-11-28T10:00:10Z", 4_000, "ep1"],
        ["2026-11-28T10:01:00Z", 0, "ep1"],
      ]),
    );
    spans.observe(ended("u2", undefined, [["2026-11-28T10:00:05Z", 1_000, "ep2"]]));
    expect(spans.list()).toEqual([
      {
        account: "cus_a",
        endpointId: "ep1",
        startMs: Date.parse("2026-11-28T10:00:06Z"),
        endMs: Date.parse("2026-11-28T10:00:10Z"),
      },
      // No account: its share is nobody's, kept as "" so it is left unallocated.
      {
        account: "",
        endpointId: "ep2",
        startMs: Date.parse("2026-11-28T10:00:04Z"),
        endMs: Date.parse("2026-11-28T10:00:05Z"),
      },
    ]);
    spans.prune(Date.parse("2026-11-28T10:00:07Z"));
    expect(spans.list().map((s) => s.account)).toEqual(["cus_a"]);
  });
});
