// The provider's ttl and the job's deadline as RunPod means them: policy.ttl is the job's whole
// lifespan at the provider (queue plus run, https://docs.runpod.io/serverless/endpoints/send-requests#execution-policies),
// so it covers the longest run the job may have and the time it may wait; spec.activeDeadlineSeconds
// is the controller's to enforce by its cancel, after which the job's usage is read from the
// provider before the job ends; a status 404 past the ttl is Expired, one before it a lost job.
import { describe, expect, it } from "vitest";
import { makeGpuEndpoint, submittedStatus, trackedJob } from "../support/builders.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { withPhaseConditions } from "../../src/mediajob/conditions.js";
import { DEFAULT_QUEUE_ALLOWANCE_MS, PROVIDER_LIMITS, providerPolicy } from "../../src/mediajob/deadline.js";
import { planJob } from "../../src/mediajob/plan.js";
import { type Facts } from "../../src/mediajob/pass.js";
import { afterStop } from "../../src/mediajob/stop.js";
import { planSubmission } from "../../src/mediajob/write-ahead.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();
const later = (ms: number) => new Date(NOW.getTime() + ms).toISOString();
const S = 1_000;
const H = 3600 * S;
const DAY = 24 * H;
const WEEK = 7 * DAY;

const job = (spec: Partial<MediaJob["spec"]> = {}, status?: MediaJobStatus): MediaJob =>
  trackedJob().spec(spec).status(status).build();
const running = (o: Partial<MediaJobStatus> = {}): MediaJobStatus =>
  submittedStatus(ago(700), {
    submission: { attempt: 1, id: "s-1", startedAt: ago(700), state: "Accepted", expiresAt: later(DAY) },
    ...o,
  });
const facts = (o: Partial<Facts> = {}): Facts => ({
  now: NOW,
  settings: { defaultTimeoutSeconds: 600, tickMs: 30_000 },
  newSubmissionId: "fresh",
  ...o,
});

describe("providerPolicy: the ttl covers the queue and the longest run", () => {
  const fresh = { startedAt: NOW.toISOString() };
  it.each<[string, Parameters<typeof providerPolicy>[0], { executionTimeout?: number; ttl: number }]>([
    [
      "nothing bounds the run: the provider's longest run, capped at its 7 days",
      { spec: {}, status: undefined, nowMs: NOW.getTime() },
      { ttl: WEEK },
    ],
    [
      "the endpoint's own timeout (none sent) plus the queue allowance",
      { spec: {}, status: undefined, nowMs: NOW.getTime(), endpointExecutionTimeoutMs: 600 * S },
      { ttl: 600 * S + DEFAULT_QUEUE_ALLOWANCE_MS },
    ],
    [
      "a job's 3-day execution timeout: ttl 4 days, not the 24 h that killed it at 24 h",
      { spec: {}, status: undefined, nowMs: NOW.getTime(), executionTimeoutMs: 3 * DAY },
      { executionTimeout: 3 * DAY, ttl: 4 * DAY },
    ],
    [
      "a 7-day execution timeout: the ttl stops at the provider's 7 days",
      { spec: {}, status: undefined, nowMs: NOW.getTime(), executionTimeoutMs: WEEK },
      { executionTimeout: WEEK, ttl: WEEK },
    ],
    [
      "a 15 s deadline: executionTimeout 15 s, but a ttl that outlives it (the controller cancels)",
      { spec: { activeDeadlineSeconds: 15 }, status: fresh, nowMs: NOW.getTime() },
      { executionTimeout: 15 * S, ttl: 15 * S + DEFAULT_QUEUE_ALLOWANCE_MS },
    ],
    [
      "a deadline and a shorter plan timeout: the smaller is the run, the ttl covers it",
      {
        spec: { activeDeadlineSeconds: 3600 },
        status: fresh,
        nowMs: NOW.getTime(),
        executionTimeoutMs: 60 * S,
      },
      { executionTimeout: 60 * S, ttl: 60 * S + DEFAULT_QUEUE_ALLOWANCE_MS },
    ],
    [
      "3 s left of the deadline (below executionTimeout's 5 s): none sent, the endpoint's run covered",
      {
        spec: { activeDeadlineSeconds: 63 },
        status: { startedAt: ago(60) },
        nowMs: NOW.getTime(),
        endpointExecutionTimeoutMs: 600 * S,
      },
      { ttl: 600 * S + DEFAULT_QUEUE_ALLOWANCE_MS },
    ],
    [
      "a short queue allowance and a short run: never below the provider's 10 s",
      {
        spec: {},
        status: undefined,
        nowMs: NOW.getTime(),
        executionTimeoutMs: 5 * S,
        queueAllowanceMs: 1 * S,
      },
      { executionTimeout: 5 * S, ttl: PROVIDER_LIMITS.minTtlMs },
    ],
  ])("%s", (_name, input, expected) => {
    expect(providerPolicy(input)).toEqual(expected);
  });

  it("never sends a ttl shorter than the run it allows, whatever the inputs", () => {
    for (const deadline of [undefined, 1, 9, 10, 15, 3600, 7 * 24 * 3600])
      for (const own of [undefined, 5 * S, 10 * 60 * S, 3 * DAY, WEEK])
        for (const endpoint of [undefined, 30 * S, 2 * H, WEEK]) {
          const p = providerPolicy({
            spec: deadline === undefined ? {} : { activeDeadlineSeconds: deadline },
            status: fresh,
            nowMs: NOW.getTime(),
            ...(own !== undefined && { executionTimeoutMs: own }),
            ...(endpoint !== undefined && { endpointExecutionTimeoutMs: endpoint }),
          });
          const run = p.executionTimeout ?? endpoint ?? WEEK;
          expect(p.ttl).toBe(Math.min(WEEK, run + DEFAULT_QUEUE_ALLOWANCE_MS));
          // The run the deadline allows ends before the provider forgets the job (at 7 days, with it).
          if (deadline !== undefined && p.executionTimeout === deadline * S)
            expect(p.ttl).toBeGreaterThanOrEqual(deadline * S);
        }
  });
});

describe("a submission records when the provider forgets the job", () => {
  it("sends the policy and records its expiry (the intent's time plus the ttl) with the intent", () => {
    const endpoint = makeGpuEndpoint("asr")
      .ns("ns")
      .status({ endpointId: "ep-1", executionTimeoutMs: 600 * S })
      .build();
    const plan = planSubmission(
      job({ activeDeadlineSeconds: 15 }),
      { phase: "Pending", jobId: "uid-1" },
      {
        endpointId: "ep-1",
        newSubmissionId: "sub-00000001",
        now: NOW.toISOString(),
        defaultTimeoutSeconds: 600,
        endpointExecutionTimeoutMs: endpoint.status!.executionTimeoutMs!,
      },
    );
    expect(plan.request.policy).toEqual({
      executionTimeout: 15 * S,
      ttl: 15 * S + DEFAULT_QUEUE_ALLOWANCE_MS,
    });
    expect(plan.intent.submission?.expiresAt).toBe(later(15 * S + DEFAULT_QUEUE_ALLOWANCE_MS));
  });

  it("a Pending job on an endpoint that reports its timeout covers that timeout", () => {
    const endpoint = makeGpuEndpoint("asr")
      .ns("ns")
      .ready("ep-1", undefined, { executionTimeoutMs: 2 * DAY })
      .build();
    const plan = planJob(job(), facts({ endpoint }));
    const submit = plan.actions.find((a) => a.type === "submit");
    expect(submit?.type === "submit" && submit.submission.request.policy).toEqual({
      ttl: 2 * DAY + DEFAULT_QUEUE_ALLOWANCE_MS,
    });
  });
});

describe("a status 404: Expired past the ttl, a lost job before it", () => {
  it("before the ttl: the lost-job path (reset to Pending and replayed)", () => {
    const plan = planJob(job({}, running()), facts({ provider: { lost: true } }));
    expect(plan.status).toMatchObject({ phase: "Pending", replay: true, providerLosses: 1 });
    expect(plan.events.map((e) => e[1])).toEqual(["ProviderLostJob"]);
  });

  it("past the ttl: Failed, reason Expired, not replayed though attempts and replays remain", () => {
    const expired = running({
      submission: { attempt: 1, id: "s-1", startedAt: ago(700), state: "Accepted", expiresAt: ago(1) },
    });
    const plan = planJob(job({ maxAttempts: 3 }, expired), facts({ provider: { lost: true } }));
    expect(plan.status.phase).toBe("Failed");
    expect(plan.status.error).toMatch(/^Expired: the provider no longer knows job p-1: its policy.ttl/);
    expect(plan.status.providerLosses).toBeUndefined();
    expect(plan.recovery).toBeUndefined();
    expect(plan.events).toEqual([["Warning", "Expired", plan.status.error]]);
    const shown = withPhaseConditions(plan.status, 1, NOW.toISOString());
    expect(shown.reason).toBe("Expired");
    expect(shown.conditions?.find((c) => c.type === "Succeeded")).toMatchObject({
      status: "False",
      reason: "Expired",
    });
  });

  it("a submission without a recorded expiry (made before it was recorded): a lost job, as before", () => {
    const old = running({ submission: { attempt: 1, id: "s-1", startedAt: ago(700), state: "Accepted" } });
    expect(planJob(job({}, old), facts({ provider: { lost: true } })).status.phase).toBe("Pending");
  });
});

describe("the deadline: the controller's cancel, and the usage read before the job ends", () => {
  const pastDeadline = job({ activeDeadlineSeconds: 15 }, running());

  it("past the deadline, the job is cancelled at the provider (not left to a ttl)", () => {
    const plan = planJob(pastDeadline, facts());
    expect(plan.actions).toEqual([
      { type: "cancel", why: "deadline", endpointId: "ep-1", providerJobId: "p-1" },
    ]);
  });

  it("the cancel and the job's status read: DeadlineExceeded with the attempt's usage", () => {
    const plan = afterStop(
      pastDeadline,
      pastDeadline.status!,
      "deadline",
      { result: { id: "p-1", status: "CANCELLED", executionTime: 14_200, delayTime: 800 }, confirmed: true },
      NOW.toISOString(),
    );
    expect(plan.status.phase).toBe("Failed");
    expect(plan.status.error).toMatch(/^DeadlineExceeded: /);
    expect(plan.status.usage?.attempts).toEqual([
      expect.objectContaining({ providerStatus: "CANCELLED", executionTimeMs: 14_200, delayTimeMs: 800 }),
    ]);
  });

  it("only the cancel's answer (its status unread): followed, then ends with the usage once read", () => {
    const sent = afterStop(
      pastDeadline,
      pastDeadline.status!,
      "deadline",
      { result: { id: "p-1", status: "CANCELLED" } },
      NOW.toISOString(),
      30_000,
    );
    expect(sent.status.phase).toBe("Processing");
    expect(sent.status.conditions?.find((c) => c.type === "Stopping")).toMatchObject({
      status: "True",
      reason: "DeadlineCancelSent",
    });
    const read = planJob(
      job({ activeDeadlineSeconds: 15 }, sent.status),
      facts({ provider: { result: { id: "p-1", status: "CANCELLED", executionTime: 14_200 } } }),
    );
    expect(read.status.phase).toBe("Failed");
    expect(read.status.error).toMatch(/^DeadlineExceeded: /);
    expect(read.status.usage?.attempts).toEqual([expect.objectContaining({ executionTimeMs: 14_200 })]);
  });

  it("a cancel that failed is retried: the job does not end while the provider may run it", () => {
    const plan = afterStop(
      pastDeadline,
      pastDeadline.status!,
      "deadline",
      { error: "503" },
      NOW.toISOString(),
    );
    expect(plan.status.phase).toBe("Processing");
    expect(plan.error).toEqual({
      terminal: false,
      message: expect.stringMatching(/could not cancel job p-1/),
    });
  });
});
