// The window's read-only answer (Dispatcher.wouldGrant), which a MediaJob pass gathers before its
// plan: it must say exactly what gate() would say at that moment, and leave the dispatcher as it
// found it (no job joins the waiting jobs, no grant is made or expires, no timer, no wake), so the
// slot is taken only by the pass's gate() after the plan.
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { makeGpuEndpoint, makeMediaJob } from "../support/builders.js";
import type { GpuEndpoint, GpuEndpointStatus } from "../../src/crds/gpuendpoint.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { Dispatcher } from "../../src/controller/dispatch/dispatcher.js";

const T0 = Date.parse("2026-01-01T00:00:00.000Z");

const endpoint = (
  id: string,
  o: {
    maxInFlight?: number;
    workersMax?: number;
    scalerType?: string;
    scalerValue?: number;
    health?: NonNullable<GpuEndpointStatus["health"]>;
  },
): GpuEndpoint =>
  makeGpuEndpoint(`asr-${id}`, "asr")
    .ns("ns")
    .spec({
      minWorkers: 0,
      maxWorkers: o.workersMax ?? 2,
      idleTimeoutSeconds: 5,
      ...(o.maxInFlight !== undefined && { maxInFlight: o.maxInFlight }),
    })
    .ready(id, "", {
      workersMax: o.workersMax ?? 2,
      ...(o.scalerType !== undefined && { scalerType: o.scalerType, scalerValue: o.scalerValue ?? 4 }),
      ...(o.health && { health: o.health }),
    } as Partial<GpuEndpointStatus>)
    .build();

/**
 * Two endpoints, each seen in several states: every wait reason the gate gives (WindowFull,
 * Throttled after a 429, NoCapacity, ScalerUnknown, LowPriority) and the grants between them.
 */
const ENDPOINTS: GpuEndpoint[] = [
  endpoint("ep-1", { maxInFlight: 2, health: { jobsInQueue: 0, jobsInProgress: 0, workersIdle: 1 } }),
  endpoint("ep-1", {
    scalerType: "QUEUE_DELAY",
    health: { jobsInQueue: 1, jobsInProgress: 1, workersIdle: 0, workersRunning: 1 },
  }),
  endpoint("ep-1", { scalerType: "REQUEST_COUNT", scalerValue: 2, workersMax: 1 }),
  endpoint("ep-2", {}),
  endpoint("ep-2", { scalerType: "QUEUE_DELAY", workersMax: 0 }),
  endpoint("ep-2", { maxInFlight: 1, health: { jobsInQueue: 0, jobsInProgress: 0, workersRunning: 1 } }),
];

const ACCOUNTS = ["A", "B", "C", undefined] as const;
const PRIORITIES = ["high", "normal", "low"] as const;
const JOBS: MediaJob[] = Array.from({ length: 8 }, (_, i) =>
  makeMediaJob(`j${i}`)
    .ns("ns")
    .uid(`uid-${i}`)
    .created(new Date(T0 + i * 1000).toISOString())
    .spec({
      ...(ACCOUNTS[i % 4] !== undefined && { account: ACCOUNTS[i % 4] }),
      priority: PRIORITIES[i % 3],
    })
    .status({ phase: "Pending" })
    .build(),
);

const withStatus = (j: MediaJob, status: MediaJob["status"]): MediaJob => ({ ...j, status });

/**
 * Everything the dispatcher holds, as plain data: its own fields (its options aside) and each
 * endpoint's, a pending timer as whether there is one. Private fields are ordinary properties.
 */
function stateOf(d: Dispatcher): unknown {
  const { o: _options, endpoints, ...rest } = d as unknown as Record<string, unknown>;
  const eps = [...(endpoints as Map<string, Record<string, unknown>>)].map(([id, e]) => [
    id,
    { ...e, holdTimer: e["holdTimer"] !== undefined },
  ]);
  return structuredClone({ ...rest, endpoints: eps });
}

type Op =
  | { op: "ask" | "peek"; job: number; ep: number }
  | { op: "start"; job: number; ep: number }
  | { op: "finish" | "pending" | "delete"; job: number }
  | { op: "advance"; ms: number }
  | { op: "throttled"; ep: number; retryAfterMs: number }
  | { op: "accepted" | "look"; ep: number }
  | { op: "release"; ep: number; job: number }
  | { op: "lead" | "stopLeading" };

const job = fc.integer({ min: 0, max: JOBS.length - 1 });
const ep = fc.integer({ min: 0, max: ENDPOINTS.length - 1 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constantFrom("ask" as const, "peek" as const), job, ep }), weight: 6 },
  { arbitrary: fc.record({ op: fc.constant("start" as const), job, ep }), weight: 2 },
  {
    arbitrary: fc.record({
      op: fc.constantFrom("finish" as const, "pending" as const, "delete" as const),
      job,
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({ op: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 40_000 }) }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      op: fc.constant("throttled" as const),
      ep,
      retryAfterMs: fc.integer({ min: 0, max: 5_000 }),
    }),
    weight: 1,
  },
  { arbitrary: fc.record({ op: fc.constantFrom("accepted" as const, "look" as const), ep }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant("release" as const), ep, job }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constantFrom("lead" as const, "stopLeading" as const) }), weight: 1 },
);

/** A dispatcher on the shared virtual clock, with the keys it woke. */
function dispatcher(clock: { now: number }, o: { eligible: boolean; grantTtlMs: number }) {
  const woken: string[] = [];
  const d = new Dispatcher({
    wake: (k) => woken.push(k),
    jobSeconds: 30,
    tickSeconds: 2,
    now: () => clock.now,
    grantTtlMs: o.grantTtlMs,
    // Even jobs could be submitted now to the first endpoint: they wait from their cache events.
    ...(o.eligible && {
      eligible: (j: MediaJob) => (Number(j.metadata.name!.slice(1)) % 2 === 0 ? ENDPOINTS[0] : undefined),
    }),
  });
  return { d, woken };
}

/** One event or step on a dispatcher (the read-only question aside). */
function apply(d: Dispatcher, op: Op, clock: { now: number }): void {
  switch (op.op) {
    case "ask":
      d.gate(JOBS[op.job]!, ENDPOINTS[op.ep]!);
      return;
    case "peek":
      return;
    case "start": {
      const id = ENDPOINTS[op.ep]!.status!.endpointId!;
      d.observe("update", withStatus(JOBS[op.job]!, { phase: "Processing", endpointId: id, attempts: 1 }));
      return;
    }
    case "finish":
      d.observe("update", withStatus(JOBS[op.job]!, { phase: "Completed", endpointId: "ep-1" }));
      return;
    case "pending":
      d.observe("update", JOBS[op.job]!);
      return;
    case "delete":
      d.observe("delete", JOBS[op.job]!);
      return;
    case "advance":
      clock.now += op.ms;
      return;
    case "throttled":
      d.throttled(ENDPOINTS[op.ep]!.status!.endpointId!, op.retryAfterMs);
      return;
    case "accepted":
      d.accepted(ENDPOINTS[op.ep]!.status!.endpointId!);
      return;
    case "look":
      d.observeEndpoint(ENDPOINTS[op.ep]!);
      return;
    case "release":
      d.release(ENDPOINTS[op.ep]!.status!.endpointId!, `ns/${JOBS[op.job]!.metadata.name}`);
      return;
    case "lead":
      d.lead(JOBS);
      return;
    case "stopLeading":
      d.stopLeading();
      return;
  }
}

describe("Dispatcher.wouldGrant", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.clearAllTimers();
    vi.useRealTimers();
  });

  it("answers what gate() then answers, and changes nothing, after any sequence of events", () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 5, maxLength: 60, size: "max" }),
        fc.boolean(),
        fc.constantFrom(5_000, 30_000),
        (ops, eligible, grantTtlMs) => {
          vi.clearAllTimers();
          const clock = { now: T0 };
          // `reads` gets every read-only question a pass asks; `twin` the same events without them.
          const reads = dispatcher(clock, { eligible, grantTtlMs });
          const twin = dispatcher(clock, { eligible, grantTtlMs });
          reads.d.lead();
          twin.d.lead();
          for (const op of ops) {
            if (op.op === "ask" || op.op === "peek") {
              const before = stateOf(reads.d);
              const woken = reads.woken.length;
              const timers = vi.getTimerCount();
              const read = reads.d.wouldGrant(JOBS[op.job]!, ENDPOINTS[op.ep]!);
              expect(stateOf(reads.d)).toEqual(before);
              expect(reads.woken.length).toBe(woken);
              expect(vi.getTimerCount()).toBe(timers);
              if (op.op === "ask") {
                expect(reads.d.gate(JOBS[op.job]!, ENDPOINTS[op.ep]!)).toEqual(read);
                twin.d.gate(JOBS[op.job]!, ENDPOINTS[op.ep]!);
              }
            } else {
              apply(reads.d, op, clock);
              apply(twin.d, op, clock);
              // A hold's timer that came due fires for both (the clock is shared).
              if (op.op === "advance") vi.advanceTimersByTime(op.ms);
            }
            expect(stateOf(reads.d)).toEqual(stateOf(twin.d));
            expect(reads.woken).toEqual(twin.woken);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("a job asking a full window: the read names its place, and only the take queues it", () => {
    const { d } = dispatcher({ now: T0 }, { eligible: false, grantTtlMs: 30_000 });
    d.lead();
    const ep = ENDPOINTS[5]!; // ep-2, maxInFlight 1
    const ofA = (name: string): MediaJob =>
      makeMediaJob(name)
        .ns("ns")
        .uid(`uid-${name}`)
        .created(new Date(T0).toISOString())
        .spec({ account: "A" })
        .build();
    const [first, second, third] = [ofA("a1"), ofA("a2"), ofA("a3")];
    expect(d.wouldGrant(first!, ep)).toEqual({ granted: true });
    expect(d.view("ep-2")).toMatchObject({ inFlight: 0, waiting: {} });
    expect(d.gate(first!, ep)).toEqual({ granted: true });
    const read = d.wouldGrant(second!, ep);
    expect(read).toMatchObject({ granted: false, reason: "WindowFull" });
    expect(d.view("ep-2").waiting).toEqual({});
    expect(d.gate(second!, ep)).toEqual(read);
    expect(d.view("ep-2").waiting).toEqual({ A: 1 });
    // A third job of A would come after the one of its account that waits: the read says so, and
    // queues nothing.
    expect(d.wouldGrant(third!, ep)).toMatchObject({
      granted: false,
      message: expect.stringMatching(/; 1 older jobs of its account were waiting/),
    });
    expect(d.view("ep-2").waiting).toEqual({ A: 1 });
  });
});
