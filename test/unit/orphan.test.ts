import { describe, expect, it } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { planDeletion } from "../../src/mediajob/deletion.js";
import { FINALIZER, SKIP_CANCEL_ANNOTATION } from "../../src/mediajob/job.js";
import { endedOrphan, orphanOf, orphanSettled } from "../../src/mediajob/orphan.js";
import { DEFAULT_USAGE_SETTINGS } from "../../src/mediajob/usage.js";

const NOW = "2026-11-28T12:00:00.000Z";
const metering = { ...DEFAULT_USAGE_SETTINGS, metering: true };

const running = (
  spec: Partial<MediaJob["spec"]> = { account: "cus_a" },
  status: MediaJob["status"] = {},
): MediaJob =>
  makeMediaJob("clip")
    .ns("ns")
    .uid("uid-1")
    .finalizers(FINALIZER)
    .annotations({ [SKIP_CANCEL_ANNOTATION]: "true" })
    .deleting("2026-11-28T11:59:00Z")
    .spec(spec)
    .status({
      phase: "Processing",
      attempts: 2,
      endpointId: "ep-1",
      providerJobId: "p-2",
      submission: { attempt: 2, id: "s", startedAt: NOW, state: "Accepted" },
      ...status,
    })
    .build();

describe("a run left at the provider", () => {
  it("a deletion without a cancel records the run for its account, or says it is unbilled", () => {
    const withAccount = planDeletion(running(), Date.parse(NOW)).steps;
    expect(withAccount[0]).toEqual({
      type: "leaveRunning",
      orphan: {
        uid: "uid-1",
        namespace: "ns",
        name: "clip",
        workload: "asr",
        account: "cus_a",
        endpointId: "ep-1",
        providerJobId: "p-2",
        attempt: 2,
        deletedAt: "2026-11-28T11:59:00.000Z",
      },
    });
    expect(withAccount.at(-1)).toEqual({ type: "removeFinalizer" });
    expect(planDeletion(running({}), Date.parse(NOW)).steps[0]).toEqual({ type: "leaveRunning" });
    // The account a binding supplied counts the same.
    expect(orphanOf(running({}, { account: "cus_b" }), NOW)?.account).toBe("cus_b");
  });

  it("nothing is left running when the attempt's end is recorded already", () => {
    const ended = running(undefined, {
      usage: {
        workload: "asr",
        account: "cus_a",
        attempts: [{ attempt: 2, providerJobId: "p-2", providerStatus: "COMPLETED", endedAt: NOW }],
      },
    });
    expect(orphanOf(ended, NOW)).toBeUndefined();
  });

  it("is billed from the provider's figures once it ends, with the identifier the job would have used", () => {
    const o = orphanOf(running(), NOW)!;
    expect(endedOrphan(o, { id: "p-2", status: "IN_PROGRESS" }, metering, NOW)).toBeUndefined();
    const done = endedOrphan(
      o,
      { id: "p-2", status: "COMPLETED", executionTime: 2_100, delayTime: 900 },
      metering,
      NOW,
    )!;
    expect(done.usage).toMatchObject({
      attempt: 2,
      providerStatus: "COMPLETED",
      executionTimeMs: 2_100,
      billedSeconds: 3,
      meter: "Pending",
      identifier: "mj_uid-1_2",
    });
    expect(orphanSettled(done)).toBe(false);
    expect(orphanSettled({ ...done, usage: { ...done.usage!, meter: "Reported", counted: true } })).toBe(
      true,
    );
    const off = endedOrphan(
      o,
      { id: "p-2", status: "FAILED", executionTime: 1_000 },
      DEFAULT_USAGE_SETTINGS,
      NOW,
    )!;
    expect(off.usage).toMatchObject({ billedSeconds: 1, meter: "NotMetered" });
  });

  it("a run the provider no longer knows is billed nothing", () => {
    const lost = endedOrphan(orphanOf(running(), NOW)!, "lost", metering, NOW)!;
    expect(lost.usage).toMatchObject({ billedSeconds: 0, meter: "NotMetered" });
  });
});
