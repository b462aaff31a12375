// The in-flight window's gate and the dispatcher's bookkeeping, without a cluster: which waiting
// jobs get the slots of an endpoint as they free (fair share between accounts, priority, age),
// what a 429 does, what a new leader starts from, and what the plan writes for a queued job.
import { describe, expect, it, vi } from "vitest";
import { makeGpuEndpoint, makeMediaJob } from "../support/builders.js";
import type { GpuEndpoint, GpuEndpointStatus } from "../../src/crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { Dispatcher } from "../../src/controller/dispatch/dispatcher.js";
import { planJob } from "../../src/mediajob/plan.js";
import { type Facts } from "../../src/mediajob/pass.js";
import { SUBMISSION_IDENTITY_KEY } from "../../src/mediajob/submission-identity.js";

const T0 = Date.parse("2026-01-01T00:00:00.000Z");

const endpoint = (
  spec: Partial<GpuEndpoint["spec"]> = {},
  workersMax = 2,
  scaler: { scalerType?: string; scalerValue?: number } = { scalerType: "QUEUE_DELAY", scalerValue: 4 },
): GpuEndpoint =>
  makeGpuEndpoint("asr")
    .ns("ns")
    .spec({ minWorkers: 0, maxWorkers: workersMax, idleTimeoutSeconds: 5, ...spec })
    .ready("ep-1", "", {
      workersMax,
      ...(scaler as Partial<GpuEndpointStatus>),
      health: { jobsInQueue: 0, jobsInProgress: 0 },
    })
    .build();

let seq = 0;
const job = (name: string, spec: Partial<MediaJob["spec"]> = {}, status?: MediaJobStatus): MediaJob =>
  makeMediaJob(name)
    .ns("ns")
    .uid(`uid-${name}`)
    .generation(1)
    .created(new Date(T0 + seq++ * 1000).toISOString())
    .spec(spec)
    .status(status)
    .build();
const processing = (j: MediaJob): MediaJob => ({
  ...j,
  status: { phase: "Processing", endpointId: "ep-1", attempts: 1 },
});
const completed = (j: MediaJob): MediaJob => ({ ...j, status: { phase: "Completed", endpointId: "ep-1" } });

/**
 * A leading dispatcher on a clock of its own (`advance` moves it), and the keys it woke. `lead`:
 * the waiting jobs a new leader takes from the cache.
 */
function dispatcher(
  o: { weights?: Map<string, number>; eligible?: (j: MediaJob) => GpuEndpoint; lead?: MediaJob[] } = {},
) {
  const woken: string[] = [];
  let now = T0;
  const d = new Dispatcher({
    wake: (k) => woken.push(k),
    jobSeconds: 30,
    tickSeconds: 2,
    now: () => now,
    ...(o.weights && { weights: o.weights }),
    ...(o.eligible && { eligible: o.eligible }),
  });
  d.lead(o.lead);
  return { d, woken, advance: (ms: number) => (now += ms) };
}

/** The job was granted and submitted: the cache shows it Processing. */
function submit(d: Dispatcher, j: MediaJob): void {
  d.observe("update", processing(j));
}

describe("the in-flight window", () => {
  it("grants as many slots as spec.maxInFlight, then queues with WindowFull", () => {
    const { d } = dispatcher();
    const ep = endpoint({ maxInFlight: 2 });
    const jobs = ["a1", "a2", "a3"].map((n) => job(n, { account: "A" }));
    expect(d.gate(jobs[0]!, ep)).toEqual({ granted: true });
    expect(d.gate(jobs[1]!, ep)).toEqual({ granted: true });
    const third = d.gate(jobs[2]!, ep);
    expect(third).toMatchObject({ granted: false, reason: "WindowFull" });
    // Asking again is idempotent: a granted job keeps its grant until its submission shows.
    expect(d.gate(jobs[0]!, ep)).toEqual({ granted: true });
    expect(d.view("ep-1")).toMatchObject({ window: 2, waiting: { A: 1 } });
  });

  it("follows the provider's capacity without maxInFlight: workersMax plus a tick's headroom", () => {
    const { d } = dispatcher();
    const ep = endpoint({}, 4);
    const granted = Array.from({ length: 8 }, (_, i) => d.gate(job(`c${i}`), ep)).filter((s) => s.granted);
    // QUEUE_DELAY: 4 workers + max(1, ceil(4 × 2 / 30)) = 5.
    expect(granted).toHaveLength(5);
  });

  it("workersMax 0: nothing goes to the provider, the job waits with NoCapacity", () => {
    const { d } = dispatcher();
    expect(d.gate(job("z"), endpoint({}, 0))).toMatchObject({ granted: false, reason: "NoCapacity" });
  });

  it("a finished job frees its slot for the next waiting job, which is woken", () => {
    const { d, woken } = dispatcher();
    const ep = endpoint({ maxInFlight: 1 });
    const [first, second] = [job("f1"), job("f2")];
    expect(d.gate(first!, ep).granted).toBe(true);
    submit(d, first!);
    expect(d.gate(second!, ep).granted).toBe(false);
    d.observe("update", completed(first!));
    expect(woken).toEqual(["ns/f2"]);
    expect(d.gate(second!, ep).granted).toBe(true);
  });

  it("a slot not used (the job did not submit) goes back", () => {
    const { d, woken } = dispatcher();
    const ep = endpoint({ maxInFlight: 1 });
    expect(d.gate(job("r1"), ep).granted).toBe(true);
    expect(d.gate(job("r2"), ep).granted).toBe(false);
    d.release("ep-1", "ns/r1");
    expect(woken).toEqual(["ns/r2"]);
  });

  it("a 429 halves the window and holds every job until Retry-After", () => {
    const { d, advance } = dispatcher();
    const ep = endpoint({ maxInFlight: 4 });
    const jobs = Array.from({ length: 6 }, (_, i) => job(`t${i}`));
    for (const j of jobs.slice(0, 4)) expect(d.gate(j, ep).granted).toBe(true);
    for (const j of jobs.slice(0, 3)) submit(d, j);
    d.release("ep-1", "ns/t3"); // its /run was answered 429
    d.throttled("ep-1", 5_000);
    expect(d.gate(jobs[3]!, ep)).toMatchObject({ granted: false, reason: "Throttled" });
    advance(5_001);
    // Window now 2, with 3 in flight: still no slot until two finish.
    expect(d.view("ep-1").window).toBe(2);
    expect(d.gate(jobs[3]!, ep)).toMatchObject({ granted: false, reason: "WindowFull" });
    d.observe("update", completed(jobs[0]!));
    d.observe("update", completed(jobs[1]!));
    expect(d.gate(jobs[3]!, ep).granted).toBe(true);
    // Accepted submissions grow it back.
    for (let i = 0; i < 10; i++) d.accepted("ep-1");
    expect(d.view("ep-1").window).toBe(4);
  });
});

describe("fair share between accounts", () => {
  it("a burst of account A does not hold back account B's later job", () => {
    const { d, woken } = dispatcher();
    const ep = endpoint({ maxInFlight: 2 });
    const burst = Array.from({ length: 50 }, (_, i) => job(`a${i}`, { account: "A" }));
    for (const j of burst) d.gate(j, ep);
    for (const j of burst.slice(0, 2)) submit(d, j);
    const b = job("b1", { account: "B" });
    expect(d.gate(b, ep)).toMatchObject({ granted: false });
    d.observe("update", completed(burst[0]!));
    expect(woken).toEqual(["ns/b1"]);
  });

  it("weights share the slots 2:1 while both accounts have work", () => {
    const { d, woken } = dispatcher({ weights: new Map([["C", 2]]) });
    const ep = endpoint({ maxInFlight: 1 });
    const first = job("x0", { account: "A" });
    d.gate(first, ep);
    submit(d, first);
    for (let i = 0; i < 30; i++) d.gate(job(`a${i}`, { account: "A" }), ep);
    for (let i = 0; i < 30; i++) d.gate(job(`c${i}`, { account: "C" }), ep);
    let running = first;
    for (let i = 0; i < 30; i++) {
      d.observe("update", completed(running));
      const next = woken.at(-1)!;
      running = job(next.slice(3));
      running.metadata.name = next.slice(3);
      submit(d, running);
    }
    const c = woken.filter((k) => k.startsWith("ns/c")).length;
    const a = woken.filter((k) => k.startsWith("ns/a")).length;
    expect(c / a).toBeGreaterThanOrEqual(1.8);
    expect(c / a).toBeLessThanOrEqual(2.2);
  });

  it("within an account: high priority first, then the oldest", () => {
    const { d, woken } = dispatcher();
    const ep = endpoint({ maxInFlight: 1 });
    const first = job("p0", { account: "A" });
    d.gate(first, ep);
    submit(d, first);
    d.gate(job("old", { account: "A" }), ep);
    d.gate(job("low", { account: "A", priority: "low" }), ep);
    d.gate(job("urgent", { account: "A", priority: "high" }), ep);
    d.observe("update", completed(first));
    expect(woken).toEqual(["ns/urgent"]);
  });
});

describe("a new leader", () => {
  it("starts from the jobs in flight in the cache, not from an empty window", () => {
    const { d } = dispatcher();
    const ep = endpoint({ maxInFlight: 2 });
    // Seen by the informer before this replica leads.
    d.stopLeading();
    d.observe("add", processing(job("in1", { account: "A" })));
    d.observe("add", processing(job("in2", { account: "A" })));
    d.lead();
    expect(d.gate(job("new", { account: "B" }), ep)).toMatchObject({ granted: false, reason: "WindowFull" });
    expect(d.view("ep-1")).toMatchObject({ inFlight: 2 });
  });

  it("forgets the previous term's grants: a granted job asks again", () => {
    const { d } = dispatcher();
    const ep = endpoint({ maxInFlight: 1 });
    expect(d.gate(job("g1"), ep).granted).toBe(true);
    d.stopLeading();
    d.lead();
    expect(d.gate(job("g2"), ep).granted).toBe(true);
  });
});

describe("the plan of a queued job", () => {
  const ready = endpoint();
  const facts = (o: Partial<Facts>): Facts => ({
    now: new Date(T0 + 60_000),
    settings: { defaultTimeoutSeconds: 600, tickMs: 30_000 },
    newSubmissionId: "fresh-submission",
    endpoint: ready,
    ...o,
  });
  const full = {
    granted: false as const,
    reason: "WindowFull" as const,
    message: "the window is full (2 of 2)",
  };

  it("waits Pending with Queued=True and its reason in the REASON column", () => {
    const plan = planJob(job("q"), facts({ slot: full }));
    expect(plan.actions.map((a) => a.type)).toEqual([]);
    expect(plan.status).toMatchObject({ phase: "Pending", reason: "WindowFull" });
    expect(plan.status.conditions?.find((c) => c.type === "Queued")).toMatchObject({ status: "True" });
  });

  it("writes Queued once: a later pass with a new message changes nothing", () => {
    const first = planJob(job("q"), facts({ slot: full })).status;
    const again = planJob(
      job("q", {}, first),
      facts({ now: new Date(T0 + 90_000), slot: { ...full, message: "the window is full (1 of 2)" } }),
    ).status;
    expect(again).toEqual(first);
  });

  it("granted: Queued=False rides along the submission's intent, with the identity in the input", () => {
    const queued = planJob(job("q"), facts({ slot: full })).status;
    const plan = planJob(
      job("q", { priority: "low", input: { a: 1 } }, queued),
      facts({ slot: { granted: true } }),
    );
    const submit = plan.actions.find((a) => a.type === "submit");
    expect(submit?.type).toBe("submit");
    if (submit?.type !== "submit") return;
    expect(submit.submission.intent.conditions?.find((c) => c.type === "Queued")).toMatchObject({
      status: "False",
      reason: "Dispatched",
    });
    expect(submit.submission.request.policy.lowPriority).toBe(true);
    expect(submit.submission.request.input).toEqual({
      a: 1,
      [SUBMISSION_IDENTITY_KEY]: {
        jobUid: "uid-q",
        jobId: "uid-q",
        attempt: 1,
        submissionId: "fresh-submission",
        dedupKey: "uid-q/1",
      },
    });
  });
});

describe("other clients' jobs at the endpoint", () => {
  const withHealth = (inQueue: number, inProgress: number): GpuEndpoint => {
    const ep = endpoint({}, 4);
    ep.status!.health = { jobsInQueue: inQueue, jobsInProgress: inProgress };
    return ep;
  };

  it("come off the ceiling", () => {
    const { d } = dispatcher();
    // 4 workers: ceiling 5; 3 jobs at the provider that are not ours.
    d.observeEndpoint(withHealth(1, 2));
    expect(d.view("ep-1").window).toBe(2);
  });

  it("are not confused with our own jobs that finished after the report was read", () => {
    const { d } = dispatcher();
    const ours = Array.from({ length: 5 }, (_, i) => job(`o${i}`));
    for (const j of ours) d.observe("update", processing(j));
    // The report counted our 5; they finish before the next look, which reuses the report.
    d.observeEndpoint(withHealth(1, 4));
    for (const j of ours) d.observe("update", completed(j));
    d.observeEndpoint(withHealth(1, 4));
    expect(d.view("ep-1").window).toBe(5);
  });
});

describe("a window that follows what scales the endpoint", () => {
  it("no window before the scaler is known: the jobs wait (ScalerUnknown), then go once it is read", () => {
    const { d, woken } = dispatcher();
    const unknown = endpoint({}, 4, {});
    const jobs = Array.from({ length: 3 }, (_, i) => job(`s${i}`));
    for (const j of jobs)
      expect(d.gate(j, unknown)).toMatchObject({
        granted: false,
        reason: "ScalerUnknown",
        message: expect.stringContaining("autoscaler of endpoint ep-1 is not known"),
      });
    expect(d.view("ep-1").window).toBe(0);
    // The endpoint's reconcile reads it from the provider: the waiting jobs go, woken.
    d.observeEndpoint(unknown, { scalerType: "QUEUE_DELAY", scalerValue: 4 });
    expect(woken).toEqual(jobs.map((j) => `ns/${j.metadata.name}`));
  });

  it("a scaler this controller does not know is not taken for another: the jobs wait", () => {
    const { d } = dispatcher();
    const ep = endpoint({}, 4, { scalerType: "GPU_UTILIZATION", scalerValue: 70 });
    expect(d.gate(job("u1"), ep)).toMatchObject({ granted: false, reason: "ScalerUnknown" });
    // spec.maxInFlight needs no scaler.
    expect(d.gate(job("u2"), endpoint({ maxInFlight: 2 }, 4, {}))).toEqual({ granted: true });
  });

  it("a leader that starts with a backlog sizes a REQUEST_COUNT endpoint by its scaler, before any look", () => {
    const ep = endpoint({}, 30, { scalerType: "REQUEST_COUNT", scalerValue: 4 });
    const backlog = Array.from({ length: 400 }, (_, i) => job(`b${i}`));
    const { woken } = dispatcher({ eligible: () => ep, lead: backlog });
    // 30 workers × 4 requests per worker, not QUEUE_DELAY's 30 + headroom.
    expect(woken).toHaveLength(120);
  });

  it("workersMax raised from 3 to 30 mid-burst: the window is the new ceiling at the next look", () => {
    const small = endpoint({}, 3);
    const { d, woken } = dispatcher({ eligible: () => small });
    const burst = Array.from({ length: 100 }, (_, i) => job(`w${i}`));
    for (const j of burst) d.observe("add", j);
    // 3 workers + 1 headroom.
    expect(woken).toHaveLength(4);
    for (const k of woken) d.observe("update", processing(burst.find((j) => `ns/${j.metadata.name}` === k)!));
    for (let i = 0; i < 4; i++) d.accepted("ep-1");
    const big = endpoint({}, 30);
    d.observeEndpoint(big);
    // 30 workers + max(1, ceil(30 × max(2 s tick, 4 s threshold) / 30)) = 34 at once, not one
    // more per window of acceptances.
    expect(d.view("ep-1").window).toBe(34);
    expect(woken).toHaveLength(34);
  });

  it("after a 429 the window stays halved for the backoff period, then follows the ceiling again", () => {
    const { d, advance } = dispatcher();
    const ep = endpoint({}, 10);
    d.observeEndpoint(ep);
    expect(d.view("ep-1").window).toBe(12);
    d.throttled("ep-1", 1_000);
    advance(1_001);
    expect(d.view("ep-1").window).toBe(6);
    advance(30_000);
    expect(d.view("ep-1").window).toBe(12);
  });

  it("sizes its headroom from the provider's executionTime of the jobs seen, not from submitted to finished (which counts their wait in the queue)", () => {
    const { d } = dispatcher();
    const ep = endpoint({}, 10);
    d.observeEndpoint(ep);
    const j = job("short");
    expect(d.gate(j, ep).granted).toBe(true);
    submit(d, j);
    // It waited 10 s in the provider's queue (a cold start) and ran 2 s.
    d.observe("update", {
      ...j,
      status: {
        phase: "Completed",
        endpointId: "ep-1",
        attempts: 1,
        submittedAt: new Date(T0).toISOString(),
        completedAt: new Date(T0 + 12_000).toISOString(),
        submission: {
          attempt: 1,
          id: "intent-short",
          startedAt: new Date(T0).toISOString(),
          state: "Accepted",
        },
        usage: {
          workload: "asr",
          attempts: [
            {
              attempt: 1,
              providerJobId: "p-short",
              providerStatus: "COMPLETED",
              executionTimeMs: 2_000,
              delayTimeMs: 10_000,
              endedAt: new Date(T0 + 12_000).toISOString(),
            },
          ],
        },
      },
    } as MediaJob);
    // 10 workers + ceil(10 × 4 s threshold / 2 s): the jobs at the head of the provider's queue
    // wait past the threshold while workers are short (12 s would give 10 + ceil(40 / 12) = 14).
    expect(d.view("ep-1").window).toBe(30);
    // Once /health shows workersMax workers up, no more need the scaler: a tick's completions.
    const up = endpoint({}, 10);
    up.status!.health = { jobsInQueue: 0, jobsInProgress: 0, workersIdle: 1, workersRunning: 9 };
    d.observeEndpoint(up);
    expect(d.view("ep-1").window).toBe(20);
  });
});

describe("low-priority jobs never hold back normal work", () => {
  const withWorkers = (idle: number, running: number, workersMax = 30): GpuEndpoint => {
    const ep = endpoint({}, workersMax);
    ep.status!.health = { ...ep.status!.health, workersIdle: idle, workersRunning: running };
    return ep;
  };

  it("100 low jobs then 10 normal on an endpoint scaled to zero: the normal ones go, the low ones wait", () => {
    const ep = withWorkers(0, 0);
    const { d, woken } = dispatcher({ eligible: () => ep });
    const lows = Array.from({ length: 100 }, (_, i) => job(`low${i}`, { account: "A", priority: "low" }));
    const normals = Array.from({ length: 10 }, (_, i) => job(`n${i}`, { account: "B" }));
    for (const j of lows) d.observe("add", j);
    // None sent: at the provider they would neither run nor make it scale.
    expect(woken).toEqual([]);
    expect(d.gate(lows[0]!, ep)).toMatchObject({
      granted: false,
      reason: "LowPriority",
      message: expect.stringContaining("does not make endpoint ep-1 scale up"),
    });
    for (const j of normals) d.observe("add", j);
    expect(woken).toEqual(normals.map((j) => `ns/${j.metadata.name}`));
  });

  it("a normal job of the same account goes before its older low jobs, and of another account too", () => {
    const ep = withWorkers(1, 0, 1);
    const { d, woken } = dispatcher({ eligible: () => ep });
    d.observe("add", job("a-low", { account: "A", priority: "low" }));
    // The idle worker takes the low job while nothing else waits.
    expect(woken).toEqual(["ns/a-low"]);
    d.observe("update", processing(job("a-low", { account: "A", priority: "low" })));
    // The worker is taken: a later low job waits, a normal one of either account gets the window.
    const later = job("a-low-2", { account: "A", priority: "low" });
    d.observe("add", later);
    d.observe("add", job("b-normal", { account: "B" }));
    expect(woken).toEqual(["ns/a-low", "ns/b-normal"]);
    expect(d.gate(later, ep)).toMatchObject({ granted: false });
  });

  it("low jobs take the workers that are up and free, and go on as they free: they still finish", () => {
    const none = withWorkers(0, 0, 4);
    const { d, woken } = dispatcher({ eligible: () => none });
    const lows = Array.from({ length: 6 }, (_, i) => job(`l${i}`, { priority: "low" }));
    for (const j of lows) d.observe("add", j);
    expect(woken).toEqual([]);
    // Two workers come up (normal work elsewhere, or workersMin): two low jobs go.
    d.observeEndpoint(withWorkers(2, 0, 4));
    expect(woken).toEqual(["ns/l0", "ns/l1"]);
    submit(d, lows[0]!);
    submit(d, lows[1]!);
    // One finishes: the next takes its worker.
    d.observe("update", completed(lows[0]!));
    expect(woken).toEqual(["ns/l0", "ns/l1", "ns/l2"]);
  });
});

describe("jobs seen in the cache", () => {
  it("wait from their creation event, not from their first pass: fair share does not follow the work queue's order", () => {
    const ep = endpoint({ maxInFlight: 1 });
    const { d, woken } = dispatcher({ eligible: () => ep });
    const running = job("run", { account: "A" });
    d.observe("add", processing(running));
    // A's burst and then B's job are created; no pass has run for any of them yet.
    for (let i = 0; i < 20; i++) d.observe("add", job(`a${i}`, { account: "A" }));
    d.observe("add", job("b", { account: "B" }));
    d.observe("update", completed(running));
    expect(woken).toEqual(["ns/b"]);
  });

  it("a new leader takes the waiting jobs from the cache, oldest first within an account", () => {
    const ep = endpoint({ maxInFlight: 1 });
    const older = job("older", { account: "A" });
    const newer = job("newer", { account: "A" });
    const { woken } = dispatcher({ eligible: () => ep, lead: [newer, older] });
    expect(woken).toEqual(["ns/older"]);
  });
});

describe("the provider's /run rate limit", () => {
  it("grants at most 900 submissions per endpoint in 10 s, whatever the window", () => {
    const { d, advance } = dispatcher();
    const ep = endpoint({ maxInFlight: 5000 });
    const granted = Array.from({ length: 1000 }, (_, i) => d.gate(job(`r${i}`), ep)).filter((s) => s.granted);
    expect(granted).toHaveLength(900);
    advance(10_000);
    expect(d.gate(job("later"), ep).granted).toBe(true);
  });
});

describe("a hold across a leader change", () => {
  it("a new term's 429 hold still ends in a pump (the previous term's timer does not block it)", async () => {
    vi.useFakeTimers();
    try {
      const ep = endpoint({ maxInFlight: 2 });
      const { d, woken, advance } = dispatcher();
      d.throttled("ep-1", 1_000);
      d.gate(job("h1"), ep); // held: a timer for the end of the hold
      d.stopLeading();
      d.lead();
      d.throttled("ep-1", 1_000);
      d.gate(job("h2"), ep);
      advance(1_001);
      await vi.advanceTimersByTimeAsync(1_001);
      expect(woken).toContain("ns/h2");
    } finally {
      vi.useRealTimers();
    }
  });
});
