// make demo's live table is `kubectl get mediajobs` (the CRD's default printer columns, REASON
// among them), and its wait for Enter ends when the input ends or after its timeout.
import { PassThrough } from "node:stream";
import { describe, expect, it, vi } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import { mediaJobDefinition, type MediaJob } from "../../src/crds/mediajob.js";
import { mediaJobTable, waitForEnter } from "../../scripts/demo-view.js";

const NOW = Date.parse("2026-01-01T00:01:00Z");
const job: MediaJob = makeMediaJob("episode-42")
  .ns("default")
  .created("2026-01-01T00:00:30Z")
  .status({ phase: "Pending", reason: "AccountUnknown", endpointId: "ep-asr", attempts: 0, replay: true })
  .build();

describe("the demo's table", () => {
  it("has kubectl get mediajobs' columns, in its order", () => {
    const [header, row] = mediaJobTable([job], NOW);
    expect(header!.split(/\s+/)).toEqual([
      "NAME",
      "WORKLOAD",
      "PHASE",
      "REASON",
      "ENDPOINT",
      "ATTEMPTS",
      "AGE",
    ]);
    expect(header).not.toContain("REPLAY");
    expect(row!.split(/\s+/)).toEqual([
      "episode-42",
      "asr",
      "Pending",
      "AccountUnknown",
      "ep-asr",
      "0",
      "30s",
    ]);
  });

  it("follows the CRD's printer columns (the ones kubectl shows without -o wide)", () => {
    const names = mediaJobDefinition.printerColumns
      .filter((c) => !c.priority)
      .map((c) => c.name.toUpperCase());
    expect(mediaJobTable([], NOW)[0]!.split(/ {3,}/)).toEqual(["NAME", ...names]);
  });
});

describe("the demo's wait for Enter", () => {
  it("ends on Enter", async () => {
    const input = new PassThrough();
    const waited = waitForEnter(input, 60_000);
    input.write("\n");
    expect(await waited).toBe("enter");
  });

  it("ends when the input ends (no one at the terminal)", async () => {
    const input = new PassThrough();
    const waited = waitForEnter(input, 60_000);
    input.end();
    expect(await waited).toBe("input ended");
  });

  it("ends after its timeout when nothing comes", async () => {
    vi.useFakeTimers();
    try {
      const waited = waitForEnter(new PassThrough(), 15 * 60_000);
      await vi.advanceTimersByTimeAsync(15 * 60_000);
      expect(await waited).toBe("timeout");
    } finally {
      vi.useRealTimers();
    }
  });
});
