// A plan's GPU-seconds cap holds at the provider too: once its account has used the period's
// seconds, a job still queued at the provider is marked held, then cancelled there and returned to
// Pending (its plan holds it there); a job a worker already runs is left to end. Pure: the plan,
// the cancel's answer and the cancel's callback.
import { describe, expect, it } from "vitest";
import { submittedStatus, trackedJob } from "../support/builders.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { planJob } from "../../src/mediajob/plan.js";
import { type Facts } from "../../src/mediajob/pass.js";
import { providerReadDue } from "../../src/mediajob/processing.js";
import { applyProviderResult } from "../../src/mediajob/provider-result.js";
import { afterStop } from "../../src/mediajob/stop.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();
const job = (status: MediaJobStatus): MediaJob => trackedJob().account("cus_a").status(status).build();
const queued: MediaJobStatus = submittedStatus(ago(10));
const facts = (o: Partial<Facts>): Facts => ({
  now: NOW,
  settings: { defaultTimeoutSeconds: 600, tickMs: 30_000 },
  newSubmissionId: "fresh",
  ...o,
});
const admitted = (s: MediaJobStatus) => s.conditions?.find((c) => c.type === "Admitted");

describe("an account at its plan's GPU-seconds cap", () => {
  it("its submitted jobs not seen started are read at the provider; others are not", () => {
    expect(providerReadDue(job(queued), NOW.getTime(), 600, true)).toEqual({
      endpointId: "ep-1",
      providerJobId: "p-1",
    });
    expect(providerReadDue(job(queued), NOW.getTime(), 600, false)).toBeUndefined();
  });

  it("a job still queued there is marked held first, then cancelled at the next read", () => {
    const first = planJob(
      job(queued),
      facts({ usageCapReached: true, provider: { result: { id: "p-1", status: "IN_QUEUE" } } }),
    );
    expect(first.actions).toEqual([]);
    expect(first.status.phase).toBe("Processing");
    expect(admitted(first.status)).toMatchObject({ status: "False", reason: "UsageLimitReached" });
    expect(first.requeueAfterMs).toBe(50);
    const second = planJob(
      job(first.status),
      facts({ usageCapReached: true, provider: { result: { id: "p-1", status: "IN_QUEUE" } } }),
    );
    expect(second.actions).toEqual([
      { type: "cancel", why: "usage-limit", endpointId: "ep-1", providerJobId: "p-1" },
    ]);
  });

  it("cancelled there: Pending again, held by its plan, not a failed attempt", () => {
    const marked = planJob(
      job(queued),
      facts({ usageCapReached: true, provider: { result: { id: "p-1", status: "IN_QUEUE" } } }),
    ).status;
    const plan = afterStop(
      job(marked),
      marked,
      "usage-limit",
      { result: { id: "p-1", status: "CANCELLED", delayTime: 10_000, executionTime: 0 }, confirmed: true },
      NOW.toISOString(),
    );
    expect(plan.status.phase).toBe("Pending");
    expect(plan.status.failures).toBeUndefined();
    expect(plan.status.providerJobId).toBeUndefined();
    expect(admitted(plan.status)?.reason).toBe("UsageLimitReached");
    expect(plan.events.map((e) => e[1])).toEqual(["UsageLimitReached"]);
    expect(plan.status.usage?.attempts).toEqual([
      expect.objectContaining({ executionTimeMs: 0, delayTimeMs: 10_000 }),
    ]);
  });

  it("the cancel's callback, if it comes first, holds the job the same way", () => {
    const marked = planJob(
      job(queued),
      facts({ usageCapReached: true, provider: { result: { id: "p-1", status: "IN_QUEUE" } } }),
    ).status;
    const next = applyProviderResult(
      job(marked),
      { id: "p-1", status: "CANCELLED", delayTime: 10_000 },
      NOW.toISOString(),
    );
    expect(next?.phase).toBe("Pending");
  });

  it("a job a worker already runs is left to end, and not read again for the cap", () => {
    const plan = planJob(
      job(queued),
      facts({ usageCapReached: true, provider: { result: { id: "p-1", status: "IN_PROGRESS" } } }),
    );
    expect(plan.actions).toEqual([]);
    expect(plan.status.phase).toBe("Processing");
    expect(plan.status.conditions?.find((c) => c.type === "Started")?.status).toBe("True");
    expect(providerReadDue(job(plan.status), NOW.getTime(), 600, true)).toBeUndefined();
  });
});
