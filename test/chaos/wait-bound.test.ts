// The chaos run's fair-share invariant (bench/chaos/accounts.ts): a job's wait from creation to
// first submission against the bound of docs/design.md ("Fair share"), lengthened by the outages
// it waited through.
import { describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { checkWaitBound } from "../../bench/chaos/accounts.js";

const T0 = Date.parse("2026-01-01T00:00:00Z");
const at = (s: number) => new Date(T0 + s * 1000).toISOString();

const job = (name: string, account: string | undefined, created: number, started?: number): MediaJob => ({
  apiVersion: "media-orchestrator.io/v1alpha1",
  kind: "MediaJob",
  metadata: { name, creationTimestamp: at(created) },
  spec: { workload: "asr", ...(account && { account }) },
  status: {
    phase: started === undefined ? "Pending" : "Completed",
    ...(started !== undefined && { startedAt: at(started) }),
  },
});

// One slot, 10 s per slot, a 1 s tick, two accounts of weight 1, a debt of up to 2 slots: a job
// with nothing of its own account ahead is picked within 0 + 1 + (0 + 2) × 1 + 1 = 4 picks, so
// within 1 + 4 × (10 + 1) = 45 s.
const settings = { slots: 1, maxInFlight: 2, slotSeconds: 10, tickSeconds: 1, outages: [] };
const top = () => true;

describe("the wait bound under chaos", () => {
  it("holds for a job submitted within its bound, and flags one that waited longer", () => {
    const ok = checkWaitBound([job("a", "A", 0, 44), job("b", "B", 0, 5)], settings, top);
    expect(ok.overBound).toEqual([]);
    expect(ok.checked).toBe(2);
    const late = checkWaitBound([job("a", "A", 0, 80), job("b", "B", 0, 5)], settings, top);
    expect(late.overBound).toEqual([expect.objectContaining({ name: "a", account: "A", waitedSeconds: 80 })]);
  });

  it("grows with the jobs of the same account ahead, and with the outages waited through", () => {
    const burst = Array.from({ length: 5 }, (_, i) => job(`a${i}`, "A", 0, 10 * i));
    // a4 has 4 jobs ahead: a bound of several minutes.
    expect(checkWaitBound([...burst, job("b", "B", 0, 5)], settings, top).overBound).toEqual([]);
    const outage = { from: T0 + 10_000, to: T0 + 40_000, recoveryMs: 30_000 };
    const waited = [job("a", "A", 0, 100), job("b", "B", 0, 5)];
    expect(checkWaitBound(waited, settings, top).overBound).toHaveLength(1);
    expect(checkWaitBound(waited, { ...settings, outages: [outage] }, top).overBound).toEqual([]);
  });

  it("leaves out the waits of accounts held at their plan's cap, which still count as competing", () => {
    const jobs = [job("held", "P", 0, 500), job("a", "A", 0, 44), job("b", "B", 0, 5)];
    const held = checkWaitBound(jobs, { ...settings, heldAccounts: new Set(["P"]) }, top);
    expect(held.overBound).toEqual([]);
    expect(held.checked).toBe(2);
    expect(checkWaitBound(jobs, settings, top).overBound).toEqual([
      expect.objectContaining({ name: "held", account: "P" }),
    ]);
  });

  it("leaves out low-priority jobs' own waits, but not the waits of the normal jobs sent after them", () => {
    // L's low jobs wait for a free worker by design; N's normal jobs came right after them and must
    // not wait behind them.
    const jobs = [job("low-0", "L", 0, 500), job("low-1", "L", 0, 600), job("after", "N", 1, 300)];
    const check = checkWaitBound(jobs, { ...settings, lowPriorityAccounts: new Set(["L"]) }, top);
    expect(check.checked).toBe(1);
    expect(check.overBound).toEqual([expect.objectContaining({ name: "after", account: "N" })]);
  });

  it("a job still Pending at the end counts with its wait so far", () => {
    const never = checkWaitBound([job("stuck", "A", -3600)], settings, top);
    expect(never.overBound).toHaveLength(1);
  });
});
