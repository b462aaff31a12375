// After a cancel the provider still runs: the job stays Processing (condition Stopping), is read at
// every tick, told once (a Warning with the provider job id) when it runs on past the warning, and
// ends as its stop says once the provider reports it ended, with that final answer.
import { describe, expect, it } from "vitest";
import { submittedStatus, trackedJob } from "../support/builders.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { planJob } from "../../src/mediajob/plan.js";
import { type Facts } from "../../src/mediajob/pass.js";
import { providerReadDue } from "../../src/mediajob/processing.js";
import { afterDeletionCancel, afterStop, runningAfterCancel } from "../../src/mediajob/stop.js";

const T0 = new Date("2026-01-01T01:00:00.000Z");
const at = (s: number) => new Date(T0.getTime() + s * 1000);
const running: MediaJobStatus = submittedStatus(at(-60).toISOString());
const job = (spec: Partial<MediaJob["spec"]>, status: MediaJobStatus): MediaJob =>
  trackedJob().generation(2).spec(spec).status(status).build();
const facts = (now: Date, provider?: Facts["provider"]): Facts => ({
  now,
  settings: { defaultTimeoutSeconds: 600, tickMs: 30_000, cancelFollowWarningMs: 120_000 },
  newSubmissionId: "fresh",
  ...(provider && { provider }),
});

describe("a cancelled job the provider still runs", () => {
  const cancelled = job({ cancel: true }, running);
  const sent = afterStop(
    cancelled,
    running,
    "cancel",
    { result: { id: "p-1", status: "IN_PROGRESS" } },
    T0.toISOString(),
    30_000,
  );

  it("stays Processing, followed, with one Normal Event", () => {
    expect(sent.status.phase).toBe("Processing");
    expect(sent.status.conditions?.find((c) => c.type === "Stopping")).toMatchObject({
      status: "True",
      reason: "CancelSent",
    });
    expect(sent.events.map((e) => e[1])).toEqual(["CancelSent"]);
    expect(sent.requeueAfterMs).toBe(30_000);
  });

  it("is read at every pass, even past its deadline or suspended", () => {
    const j = job({ cancel: true, suspend: true, activeDeadlineSeconds: 1 }, sent.status);
    expect(providerReadDue(j, at(10).getTime(), 600)).toEqual({ endpointId: "ep-1", providerJobId: "p-1" });
  });

  it("is told once, with the provider job id, past the warning", () => {
    const j = job({ cancel: true }, sent.status);
    const early = planJob(j, facts(at(60), { result: { id: "p-1", status: "IN_PROGRESS" } }));
    expect(early.events).toEqual([]);
    expect(early.actions).toEqual([]);
    const late = planJob(j, facts(at(121), { result: { id: "p-1", status: "IN_PROGRESS" } }));
    expect(late.events).toEqual([
      ["Warning", "RunningAfterCancel", expect.stringContaining("job p-1 still reports IN_PROGRESS")],
    ]);
    expect(late.status.reason).toBe("RunningAfterCancel");
    expect(runningAfterCancel(late.status)).toBe(true);
    const later = planJob(
      job({ cancel: true }, late.status),
      facts(at(200), { result: { id: "p-1", status: "IN_PROGRESS" } }),
    );
    expect(later.events).toEqual([]);
    expect(later.status).toEqual(late.status);
  });

  it("ends Cancelled with the provider's final answer once it has ended there", () => {
    const final = { id: "p-1", status: "CANCELLED", executionTime: 61_000, delayTime: 900 };
    const end = planJob(job({ cancel: true }, sent.status), facts(at(150), { result: final }));
    expect(end.status.phase).toBe("Cancelled");
    // The provider's final figures are the attempt's usage, recorded in the same write.
    expect(end.status.usage?.attempts).toEqual([
      expect.objectContaining({ providerStatus: "CANCELLED", executionTimeMs: 61_000, delayTimeMs: 900 }),
    ]);
    expect(end.status.conditions?.find((c) => c.type === "Stopping")?.status).toBe("False");
    expect(runningAfterCancel(end.status)).toBe(false);
  });

  it("a suspension followed the same way goes back to Pending once the provider has ended it", () => {
    const s = afterStop(
      job({ suspend: true }, running),
      running,
      "suspend",
      { result: { id: "p-1", status: "IN_QUEUE" } },
      T0.toISOString(),
    );
    const end = planJob(
      job({ suspend: true }, s.status),
      facts(at(5), { result: { id: "p-1", status: "CANCELLED" } }),
    );
    expect(end.status.phase).toBe("Pending");
    expect(end.status.conditions?.find((c) => c.type === "Suspended")?.status).toBe("True");
  });

  it("a cancel that finds the job completed keeps its result", () => {
    const done = afterStop(
      cancelled,
      running,
      "cancel",
      { result: { id: "p-1", status: "COMPLETED", output: {} }, confirmed: true },
      T0.toISOString(),
    );
    expect(done.status.phase).toBe("Completed");
  });

  it("a cancel that fails is retried, never dropped", () => {
    const failed = afterStop(cancelled, running, "cancel", { error: "HTTP 503" }, T0.toISOString());
    expect([failed.status.phase, failed.error?.terminal]).toEqual(["Processing", false]);
  });
});

describe("a deleted job after its cancel", () => {
  const deleting = job({}, running);
  const o = { now: at(10), deletingForMs: 10_000, giveUpMs: 300_000, warnMs: 120_000, tickMs: 30_000 };

  it("ends Cancelled with the provider's final answer and is let go once the provider has ended it", () => {
    const final = { id: "p-1", status: "CANCELLED", executionTime: 4_000 };
    const out = afterDeletionCancel(deleting, final, { ...o, confirmed: true });
    expect(out).toMatchObject({ letGo: true, status: { phase: "Cancelled" } });
    expect(out.status?.usage?.attempts).toEqual([
      expect.objectContaining({ providerStatus: "CANCELLED", executionTimeMs: 4_000 }),
    ]);
  });

  it("records no usage from a cancel's own answer (only the job's status read has its times)", () => {
    const out = afterDeletionCancel(deleting, { id: "p-1", status: "CANCELLED", executionTime: 4_000 }, o);
    expect(out.status?.phase).toBe("Cancelled");
    expect(out.status?.usage).toBeUndefined();
  });

  it("is kept and followed while the provider runs it, and let go with a Warning at the give-up", () => {
    const kept = afterDeletionCancel(deleting, { id: "p-1", status: "IN_PROGRESS" }, o);
    expect(kept).toMatchObject({
      letGo: false,
      requeueAfterMs: 30_000,
      events: [["Normal", "DeleteCancelSent", expect.any(String)]],
    });
    const late = afterDeletionCancel(
      job({}, kept.status!),
      { id: "p-1", status: "IN_PROGRESS" },
      { ...o, now: at(200), deletingForMs: 200_000 },
    );
    expect(late.events).toEqual([
      ["Warning", "RunningAfterDeleteCancel", expect.stringContaining("job p-1")],
    ]);
    expect(runningAfterCancel(late.status)).toBe(true);
    const gone = afterDeletionCancel(
      job({}, late.status!),
      { id: "p-1", status: "IN_PROGRESS" },
      { ...o, now: at(400), deletingForMs: 400_000 },
    );
    expect(gone).toMatchObject({ letGo: true, events: [["Warning", "CancelAbandoned", expect.any(String)]] });
  });
});
