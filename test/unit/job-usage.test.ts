// status.usage: what an ended attempt records from the provider's confirmed status, how the
// controller's pass bills it, and what waits on it (settling, the TTL).
import { describe, expect, it } from "vitest";
import { makeMediaJob, submittedStatus } from "../support/builders.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { settled } from "../../src/mediajob/at-rest.js";
import { planJob } from "../../src/mediajob/plan.js";
import { type Facts } from "../../src/mediajob/pass.js";
import { applyProviderResult } from "../../src/mediajob/provider-result.js";
import { afterStop } from "../../src/mediajob/stop.js";
import { msUntilExpiry } from "../../src/mediajob/ttl.js";
import { DEFAULT_USAGE_SETTINGS, withBilledUsage, type UsageSettings } from "../../src/mediajob/usage.js";
import { usageOutstanding } from "../../src/mediajob/usage-hold.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();

const job = (spec: Partial<MediaJob["spec"]> = {}, status?: MediaJobStatus): MediaJob =>
  makeMediaJob("clip")
    .ns("ns")
    .uid("uid-1")
    .generation(1)
    .finalizers()
    .account("cus_1")
    .spec(spec)
    .status(status)
    .build();
const running = (o: Partial<MediaJobStatus> = {}): MediaJobStatus => submittedStatus(ago(700), o);
const metering: UsageSettings = {
  ...DEFAULT_USAGE_SETTINGS,
  metering: true,
  eventNames: { render: "render_seconds" },
};
const facts = (usage?: UsageSettings, result?: Record<string, unknown>): Facts => ({
  now: NOW,
  settings: { defaultTimeoutSeconds: 600, tickMs: 30_000, ...(usage && { usage }) },
  newSubmissionId: "fresh",
  ...(result && { provider: { result: result as never } }),
});

describe("usage recorded when an attempt ends", () => {
  const table: Array<{
    name: string;
    spec?: Partial<MediaJob["spec"]>;
    result: Record<string, unknown>;
    usage?: UsageSettings;
    phase: string;
    attempt: Record<string, unknown>;
    billed: number;
  }> = [
    {
      name: "completed: its times, billed seconds rounded up, in the outbox under the default event name",
      result: { id: "p-1", status: "COMPLETED", executionTime: 2_001, delayTime: 300, output: {} },
      usage: metering,
      phase: "Completed",
      attempt: {
        attempt: 1,
        providerJobId: "p-1",
        endpointId: "ep-1",
        providerStatus: "COMPLETED",
        executionTimeMs: 2_001,
        delayTimeMs: 300,
        endedAt: NOW.toISOString(),
        billedSeconds: 3,
        meter: "Pending",
        eventName: "gpu_seconds",
        identifier: "mj_uid-1_1",
      },
      billed: 3,
    },
    {
      name: "failed for good: billed what the provider reports (billFailed by default)",
      result: { id: "p-1", status: "FAILED", executionTime: 1_000, error: "boom" },
      usage: metering,
      phase: "Failed",
      attempt: { providerStatus: "FAILED", executionTimeMs: 1_000, billedSeconds: 1, meter: "Pending" },
      billed: 1,
    },
    {
      name: "timed out, not billed under billFailed=false: recorded, billed 0, nothing to meter",
      result: { id: "p-1", status: "TIMED_OUT", executionTime: 600_000 },
      usage: { ...metering, rule: { ...metering.rule, billFailed: false } },
      phase: "Failed",
      attempt: {
        providerStatus: "TIMED_OUT",
        executionTimeMs: 600_000,
        billedSeconds: 0,
        meter: "NotMetered",
      },
      billed: 0,
    },
    {
      name: "cancelled at the provider: what it ran is billed",
      result: { id: "p-1", status: "CANCELLED", executionTime: 4_500, delayTime: 1_000 },
      usage: { ...metering, rule: { ...metering.rule, billedTime: "executionAndDelay" } },
      phase: "Cancelled",
      attempt: { providerStatus: "CANCELLED", billedSeconds: 6, meter: "Pending" },
      billed: 6,
    },
    {
      name: "a workload with its own event name",
      spec: { workload: "render" },
      result: { id: "p-1", status: "COMPLETED", executionTime: 10, output: {} },
      usage: metering,
      phase: "Completed",
      attempt: { billedSeconds: 1, eventName: "render_seconds" },
      billed: 1,
    },
    {
      name: "metering off (the default): billed, not metered",
      result: { id: "p-1", status: "COMPLETED", executionTime: 10, output: {} },
      phase: "Completed",
      attempt: { billedSeconds: 1, meter: "NotMetered" },
      billed: 1,
    },
    {
      name: "no account: nobody to bill, not metered",
      spec: { account: undefined },
      result: { id: "p-1", status: "COMPLETED", executionTime: 10, output: {} },
      usage: metering,
      phase: "Completed",
      attempt: { billedSeconds: 1, meter: "NotMetered" },
      billed: 1,
    },
    {
      name: "a time that is not a duration: refused, never guessed at",
      result: { id: "p-1", status: "COMPLETED", executionTime: -5, output: {} },
      usage: metering,
      phase: "Completed",
      attempt: { billedSeconds: 0, meter: "Refused" },
      billed: 0,
    },
  ];
  it.each(table)("$name", (c) => {
    const plan = planJob(job(c.spec, running()), facts(c.usage, c.result));
    expect(plan.status.phase).toBe(c.phase);
    expect(plan.status.usage?.attempts).toHaveLength(1);
    expect(plan.status.usage?.attempts[0]).toMatchObject(c.attempt);
    expect(plan.status.usage?.billedSeconds).toBe(c.billed);
    expect(plan.status.usage?.workload).toBe(c.spec?.workload ?? "asr");
  });

  it("a /cancel answer that finds the job ended records no usage from it: the job ends once /status is read", () => {
    const plan = afterStop(
      job({}, running()),
      running(),
      "suspend",
      { result: { id: "p-1", status: "COMPLETED", output: {} } },
      NOW.toISOString(),
    );
    // Not ended on the cancel's word: followed, so its own status (with its times) is read first.
    expect(plan.status.phase).toBe("Processing");
    expect(plan.status.usage).toBeUndefined();
    const read = planJob(
      job({ suspend: true }, plan.status),
      facts(metering, { id: "p-1", status: "COMPLETED", executionTime: 1_500, output: {} }),
    );
    expect(read.status.phase).toBe("Completed");
    expect(read.status.usage?.attempts).toEqual([
      expect.objectContaining({ providerStatus: "COMPLETED", executionTimeMs: 1_500 }),
    ]);
  });

  it("a job still running records nothing", () => {
    const plan = planJob(job({}, running()), facts(metering, { id: "p-1", status: "IN_PROGRESS" }));
    expect(plan.status.usage).toBeUndefined();
  });

  it("a retried failure keeps the failed attempt's usage; the next attempt adds its own", () => {
    const spec = { maxAttempts: 2 };
    const first = planJob(
      job(spec, running()),
      facts(metering, { id: "p-1", status: "FAILED", executionTime: 1_500 }),
    );
    expect(first.status.phase).toBe("Pending");
    const second = applyProviderResult(
      job(spec, {
        ...first.status,
        phase: "Processing",
        attempts: 2,
        providerJobId: "p-2",
        submission: { attempt: 2, id: "s-2", startedAt: ago(10), state: "Accepted" },
      }),
      { id: "p-2", status: "COMPLETED", executionTime: 2_000, output: {} },
      NOW.toISOString(),
    )!;
    const billed = withBilledUsage(job(spec), second, metering);
    expect(
      billed.usage?.attempts.map((a) => [a.attempt, a.providerJobId, a.billedSeconds, a.identifier]),
    ).toEqual([
      [1, "p-1", 2, "mj_uid-1_1"],
      [2, "p-2", 2, "mj_uid-1_2"],
    ]);
    expect(billed.usage?.billedSeconds).toBe(4);
  });

  it("a repeated result of the same attempt records once, and a late one after the end changes nothing", () => {
    const result = { id: "p-1", status: "COMPLETED", executionTime: 900, output: {} };
    const once = applyProviderResult(job({}, running()), result, NOW.toISOString())!;
    expect(once.usage?.attempts).toHaveLength(1);
    expect(applyProviderResult(job({}, once), result, NOW.toISOString())).toBeUndefined();
  });

  it("a writer without the configuration (the sidecar) records raw times; the controller's pass bills them", () => {
    const recorded = applyProviderResult(
      job({}, running()),
      { id: "p-1", status: "COMPLETED", executionTime: 1_200, output: {} },
      NOW.toISOString(),
    )!;
    expect(recorded.usage?.attempts[0]?.billedSeconds).toBeUndefined();
    const plan = planJob(job({}, recorded), facts(metering));
    expect(plan.status.usage?.attempts[0]).toMatchObject({ billedSeconds: 2, meter: "Pending" });
  });
});

describe("the sidecar bills in the write that records the end", () => {
  const result = { id: "p-1", status: "COMPLETED", executionTime: 1_200, output: {} };
  it("a job without an account: billed and settled there, so the controller's pass writes nothing more", () => {
    const j = job({ account: undefined }, running());
    const written = applyProviderResult(j, result, NOW.toISOString(), { billing: metering })!;
    expect(written.usage?.attempts[0]).toMatchObject({ billedSeconds: 2, meter: "NotMetered" });
    expect(usageOutstanding(job({ account: undefined }, written))).toBe(false);
    const plan = planJob(job({ account: undefined }, written), facts(metering));
    expect(plan.status.usage).toEqual(written.usage);
  });
  // In the same write as the result: a job deleted before the controller's next pass still owes
  // its report (its deletion waits for the outbox), so no deletion can slip between the two.
  it("a job with an account, metering on: billed there and put in the meter outbox in the same write", () => {
    const written = applyProviderResult(job({}, running()), result, NOW.toISOString(), {
      billing: metering,
    })!;
    expect(written.phase).toBe("Completed");
    expect(written.usage?.attempts[0]).toMatchObject({
      billedSeconds: 2,
      meter: "Pending",
      identifier: "mj_uid-1_1",
    });
    expect(usageOutstanding(job({}, written))).toBe(true);
    // The controller's pass keeps what the sidecar decided.
    expect(planJob(job({}, written), facts(metering)).status.usage).toEqual(written.usage);
  });
  it("a job with an account, metering off in the sidecar: billed there, the meter left to the controller", () => {
    const off = { ...metering, metering: false };
    const written = applyProviderResult(job({}, running()), result, NOW.toISOString(), { billing: off })!;
    expect(written.usage?.attempts[0]?.billedSeconds).toBe(2);
    expect(written.usage?.attempts[0]?.meter).toBeUndefined();
    expect(planJob(job({}, written), facts(metering)).status.usage?.attempts[0]?.meter).toBe("Pending");
  });
});

describe("what waits on usage", () => {
  const ended = (attempt: Record<string, unknown>): MediaJob =>
    job(
      { ttlSecondsAfterFinished: 0 },
      {
        phase: "Completed",
        completedAt: ago(60),
        observedGeneration: 1,
        usage: {
          workload: "asr",
          account: "cus_1",
          billedSeconds: 3,
          attempts: [
            {
              attempt: 1,
              providerJobId: "p-1",
              providerStatus: "COMPLETED",
              endedAt: ago(60),
              billedSeconds: 3,
              ...attempt,
            } as never,
          ],
        },
      },
    );
  const table: Array<[string, Record<string, unknown>, boolean]> = [
    ["not billed yet", { billedSeconds: undefined }, true],
    ["in the outbox", { meter: "Pending", counted: true }, true],
    ["reported, not yet counted into the account", { meter: "Reported" }, true],
    ["reported, counted as used, not yet as reported", { meter: "Reported", counted: true }, true],
    ["reported and counted", { meter: "Reported", counted: true, countedReported: true }, false],
    ["not metered and counted", { meter: "NotMetered", counted: true }, false],
    ["refused and counted: surfaced, not held forever", { meter: "Refused", counted: true }, false],
  ];
  it.each(table)("%s: outstanding %s, TTL and settling wait on it", (_n, attempt, outstanding) => {
    const j = ended(attempt);
    expect(usageOutstanding(j)).toBe(outstanding);
    expect(msUntilExpiry(j, NOW.getTime(), false) === undefined).toBe(outstanding);
    const { ttlSecondsAfterFinished: _ttl, ...spec } = j.spec;
    expect(settled({ ...j, spec })).toBe(!outstanding);
  });
});
