// The worker-cost rule's events: one per account, endpoint and settled bucket, with the account's
// allocated share of the provider's amount and an identifier that is the same at every pass.
import { describe, expect, it } from "vitest";
import { planWorkerCostEvents, workerCostIdentifier } from "../../src/billing/worker-cost.js";
import type { ExecutionSpan, ProviderBucket } from "../../src/billing/cost-allocation.js";

const H = 3_600_000;
const T0 = Date.UTC(2026, 10, 28, 10);
const bucket = (endpointId: string, hour: number, amountMicros: number): ProviderBucket => ({
  endpointId,
  startMs: T0 + hour * H,
  endMs: T0 + (hour + 1) * H,
  amountMicros,
});
const span = (account: string, endpointId: string, fromS: number, toS: number): ExecutionSpan => ({
  account,
  endpointId,
  startMs: T0 + fromS * 1000,
  endMs: T0 + toS * 1000,
});

describe("planWorkerCostEvents", () => {
  // A sparse customer (one 2 s job) and a busy one (18 s) share an hour that cost 10,000 micro-USD:
  // cold starts and idle tails included, the sparse one pays 2/20 of it.
  const buckets = [bucket("ep1", 0, 10_000), bucket("ep1", 1, 3_000), bucket("ep2", 0, 7)];
  const spans = [
    span("cus_sparse", "ep1", 10, 12),
    span("cus_busy", "ep1", 100, 118),
    span("cus_busy", "ep2", 5, 6),
  ];
  const table: Array<{
    name: string;
    account: string;
    from: number;
    to: number;
    want: Array<[string, number, number]>;
  }> = [
    {
      name: "the share of each bucket settled in the range",
      account: "cus_sparse",
      from: T0,
      to: T0 + 2 * H,
      want: [["ep1", 0, 1_000]],
    },
    {
      name: "two endpoints, one bucket each",
      account: "cus_busy",
      from: T0,
      to: T0 + H,
      want: [
        ["ep1", 0, 9_000],
        ["ep2", 0, 7],
      ],
    },
    {
      name: "a bucket not yet settled sends nothing",
      account: "cus_busy",
      from: T0,
      to: T0 + H - 1,
      want: [],
    },
    {
      name: "a bucket settled before sends nothing",
      account: "cus_busy",
      from: T0 + 1,
      to: T0 + 2 * H,
      want: [],
    },
    {
      name: "a bucket with no job of the account's sends nothing",
      account: "cus_busy",
      from: T0 + H,
      to: T0 + 2 * H,
      want: [],
    },
  ];
  it.each(table)("$name", ({ account, from, to, want }) => {
    const events = planWorkerCostEvents({ account, buckets, spans, fromMs: from, toMs: to });
    expect(events.map((e) => [e.endpointId, (e.bucketStartMs - T0) / H, e.micros])).toEqual(want);
    for (const e of events) {
      expect(e.identifier).toBe(workerCostIdentifier(account, e.endpointId, e.bucketStartMs));
      // The bucket's last second: the event lands in the period the bucket belongs to.
      expect(e.timestamp).toBe((e.bucketStartMs + H) / 1000 - 1);
    }
  });

  it("allocates a bucket's whole amount over the accounts: their events add up to it", () => {
    const total = ["cus_sparse", "cus_busy"]
      .flatMap((account) => planWorkerCostEvents({ account, buckets, spans, fromMs: T0, toMs: T0 + H }))
      .filter((e) => e.endpointId === "ep1")
      .reduce((n, e) => n + e.micros, 0);
    expect(total).toBe(10_000);
  });
});

describe("workerCostIdentifier", () => {
  it("is the same for the same account, endpoint and bucket, and differs otherwise", () => {
    const id = workerCostIdentifier("cus_a", "ep1", T0);
    expect(id).toBe(`wc:cus_a:ep1:${T0 / 1000}`);
    expect(workerCostIdentifier("cus_a", "ep1", T0)).toBe(id);
    expect(
      new Set([
        id,
        workerCostIdentifier("cus_b", "ep1", T0),
        workerCostIdentifier("cus_a", "ep2", T0),
        workerCostIdentifier("cus_a", "ep1", T0 + H),
      ]).size,
    ).toBe(4);
  });

  it("stays within the payment provider's 100 characters for long names, still distinct", () => {
    const long = "cus_" + "x".repeat(120);
    const a = workerCostIdentifier(long, "ep1", T0);
    expect(a.length).toBeLessThanOrEqual(100);
    expect(workerCostIdentifier(long + "y", "ep1", T0)).not.toBe(a);
  });
});
