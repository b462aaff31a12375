// The admission chain's table: which check holds a Pending job, and which wins when several hold
// (cancel, suspension, deadline, binding, subscription, plan, endpoint, in that order).
import { describe, expect, it } from "vitest";
import { makeGpuEndpoint, makeMediaJob } from "../support/builders.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { admit, CHECKS, mayTakeSlot, type AdmissionInput } from "../../src/mediajob/admission-chain.js";
import { isPending, jobPhase } from "../../src/mediajob/job.js";
import type { Plans } from "../../src/mediajob/plans.js";
import { REASONS, WINDOW_REASONS, fixFor, isByDesign } from "../../src/mediajob/reasons.js";
import { providerWaitCause } from "../../src/mediajob/wait-cause.js";

const NOW = Date.parse("2026-01-01T01:00:00.000Z");
const ago = (s: number) => new Date(NOW - s * 1000).toISOString();

function job(spec: Partial<MediaJob["spec"]> = {}, status?: MediaJobStatus): MediaJob {
  return makeMediaJob("clip")
    .ns("ns")
    .uid("uid-1")
    .generation(1)
    .input({ url: "s3://in" })
    .spec(spec)
    .status(status)
    .build();
}

const ready: GpuEndpoint = makeGpuEndpoint("asr").ns("ns").ready("ep-1", ago(60)).build();

const plans: Plans = {
  price_small: { gpuSecondsPerPeriod: 100, maxConcurrentJobs: 1, maxExecutionTimeoutMs: 60_000 },
};

/** A job of acme in a namespace bound to acme, active, on the small plan, its endpoint Ready. */
const input = (
  o: Partial<AdmissionInput> & { spec?: Partial<MediaJob["spec"]>; status?: MediaJobStatus } = {},
) => {
  const { spec, status, ...rest } = o;
  return {
    job: job({ account: "acme", ...spec }, status),
    nowMs: NOW,
    boundAccounts: ["acme"],
    accountRequired: false,
    subscriptionState: "active",
    plans,
    account: { priceIds: ["price_small"], usedSeconds: 0, runningJobs: 0 },
    endpoint: ready,
    ...rest,
  } satisfies AdmissionInput;
};

/** Past its deadline: first submitted 60 s ago with a 10 s deadline. */
const late = {
  spec: { activeDeadlineSeconds: 10 },
  status: { phase: "Pending" as const, startedAt: ago(60) },
};

const held = (i: AdmissionInput) => {
  const a = admit(i);
  return a.admitted ? "admitted" : `${a.hold.check}:${a.hold.reason}`;
};

describe("the admission chain", () => {
  const cases: Array<[string, AdmissionInput, string]> = [
    ["nothing holds it", input(), "admitted"],
    ["cancelled", input({ spec: { cancel: true } }), "cancel:Cancelled"],
    ["suspended", input({ spec: { suspend: true } }), "suspend:Suspended"],
    ["past its deadline", input(late), "deadline:DeadlineExceeded"],
    ["its namespace not bound to its account", input({ boundAccounts: [] }), "binding:AccountNotBound"],
    [
      "no account while one is required",
      input({ spec: { account: undefined }, accountRequired: true, boundAccounts: [] }),
      "binding:AccountNotBound",
    ],
    ["no subscription state known", input({ subscriptionState: undefined }), "subscription:AccountUnknown"],
    ["subscription past due", input({ subscriptionState: "past_due" }), "subscription:AccountNotActive"],
    [
      "no plan for its price",
      input({ account: { priceIds: ["price_other"], usedSeconds: 0, runningJobs: 0 } }),
      "plan:NoPlan",
    ],
    [
      "its plan's seconds used",
      input({ account: { priceIds: ["price_small"], usedSeconds: 100, runningJobs: 0 } }),
      "plan:UsageLimitReached",
    ],
    [
      "its plan's concurrent jobs run",
      input({ account: { priceIds: ["price_small"], usedSeconds: 0, runningJobs: 1 } }),
      "plan:ConcurrencyLimitReached",
    ],
    [
      "a timeout above its plan's",
      input({ spec: { executionTimeoutSeconds: 120 } }),
      "plan:ExecutionTimeoutAbovePlan",
    ],
    ["no endpoint", input({ endpoint: undefined }), "endpoint:EndpointMissing"],
    [
      "its endpoint not Ready",
      input({ endpoint: { ...ready, status: { endpointId: "ep-1", conditions: [] } } as GpuEndpoint }),
      "endpoint:EndpointNotReady",
    ],
    // The order: the earlier check wins when several hold.
    [
      "cancelled and suspended: cancel wins",
      input({ spec: { cancel: true, suspend: true } }),
      "cancel:Cancelled",
    ],
    [
      "suspended past its deadline: the suspension wins",
      input({ ...late, spec: { ...late.spec, suspend: true } }),
      "suspend:Suspended",
    ],
    [
      "past its deadline and unbound: the deadline wins",
      input({ ...late, boundAccounts: [] }),
      "deadline:DeadlineExceeded",
    ],
    [
      "unbound and its subscription unknown: the binding wins",
      input({ boundAccounts: [], subscriptionState: undefined }),
      "binding:AccountNotBound",
    ],
    [
      "inactive and over its plan: the subscription wins",
      input({
        subscriptionState: "canceled",
        account: { priceIds: ["price_small"], usedSeconds: 100, runningJobs: 1 },
      }),
      "subscription:AccountNotActive",
    ],
    [
      "over its plan, no endpoint: the plan wins",
      input({
        endpoint: undefined,
        account: { priceIds: ["price_small"], usedSeconds: 100, runningJobs: 0 },
      }),
      "plan:UsageLimitReached",
    ],
  ];
  it.each(cases)("%s", (_name, i, want) => expect(held(i)).toBe(want));

  it("asks the checks in the documented order", () => {
    expect(CHECKS).toEqual(["cancel", "suspend", "deadline", "binding", "subscription", "plan", "endpoint"]);
  });

  it("admitted: the account billed, the plan's timeout, Admitted and EndpointReady True", () => {
    const a = admit(input({ spec: { account: undefined } }));
    // The namespace's one account is billed when the job names none.
    expect(a).toMatchObject({
      admitted: true,
      account: "acme",
      executionTimeoutMs: 60_000,
      admittedCondition: { status: "True", reason: "AccountActive" },
      readyCondition: { status: "True", reason: "EndpointReady" },
    });
  });

  it("a hold from the binding or the plan carries the condition the pass writes", () => {
    const a = admit(input({ boundAccounts: [] }));
    expect(a.admitted).toBe(false);
    if (!a.admitted)
      expect(a.hold.condition).toMatchObject({
        type: "Admitted",
        status: "False",
        reason: "AccountNotBound",
      });
  });

  it("a slot only for a Pending job nothing holds, not being deleted, its endpoint known", () => {
    expect(mayTakeSlot(input())).toBe(true);
    expect(mayTakeSlot(input({ spec: { cancel: true } }))).toBe(false);
    expect(mayTakeSlot(input(late))).toBe(false);
    expect(mayTakeSlot(input({ status: { phase: "Processing" } }))).toBe(false);
    const deleting = input();
    deleting.job.metadata.deletionTimestamp = ago(1);
    expect(mayTakeSlot(deleting)).toBe(false);
  });

  it("a job with no phase yet is Pending", () => {
    expect(jobPhase(undefined)).toBe("Pending");
    expect(jobPhase({})).toBe("Pending");
    expect(isPending({ phase: "Processing" })).toBe(false);
  });
});

describe("the reason table", () => {
  it("lists every reason the chain, the window and the provider give", () => {
    const chain = cases()
      .map((i) => admit(i))
      .flatMap((a) => (a.admitted ? [] : [a.hold.reason]));
    const window = Object.values(WINDOW_REASONS);
    const provider = [
      { jobsInQueue: 1, workersUnhealthy: 1 },
      { jobsInQueue: 1 },
      { jobsInQueue: 1, workersThrottled: 1 },
      { jobsInQueue: 1, workersInitializing: 1 },
      { jobsInQueue: 1, workersInitializing: 1, workersRunning: 1 },
      { jobsInQueue: 1, workersRunning: 2 },
      { jobsInQueue: 1, workersRunning: 1 },
    ].map((h, i) => providerWaitCause(h, i === 1 ? 0 : 2)!.reason);
    for (const reason of [...chain, ...window, ...provider, "StartDeadlineExceeded", "Expired"])
      expect(REASONS, reason).toHaveProperty([reason]);
  });

  it("fills a fix with the job's names; a reason it does not list falls back to its condition type", () => {
    const j = job({ workload: "tts" });
    expect(fixFor(j, { type: "EndpointReady", reason: "EndpointMissing" })).toContain(
      "workload tts in namespace ns",
    );
    expect(fixFor(j, { type: "EndpointReady", reason: "CrashLooping" })).toMatch(
      /^kubectl describe gpuendpoint/,
    );
    expect(fixFor(j, { type: "Other", reason: "Unlisted" })).toBe("kubectl describe mediajob clip -n ns");
  });

  it("by design: the window's waits, the plan's concurrency and a suspension; not what needs a hand", () => {
    for (const r of ["WindowFull", "Throttled", "LowPriority", "ConcurrencyLimitReached", "Suspended"])
      expect(isByDesign(r), r).toBe(true);
    for (const r of [
      "AccountUnknown",
      "NoCapacity",
      "ScalerUnknown",
      "EndpointMissing",
      "WorkersUnhealthy",
      undefined,
    ])
      expect(isByDesign(r), String(r)).toBe(false);
  });
});

/** One input per reason the chain can give (for the table's coverage). */
function cases(): AdmissionInput[] {
  return [
    input({ spec: { cancel: true } }),
    input({ spec: { suspend: true } }),
    input(late),
    input({ boundAccounts: [] }),
    input({ subscriptionState: undefined }),
    input({ subscriptionState: "past_due" }),
    input({ account: { priceIds: ["x"], usedSeconds: 0, runningJobs: 0 } }),
    input({ account: { priceIds: ["price_small"], usedSeconds: 100, runningJobs: 0 } }),
    input({ account: { priceIds: ["price_small"], usedSeconds: 0, runningJobs: 1 } }),
    input({ spec: { executionTimeoutSeconds: 120 } }),
    input({ endpoint: undefined }),
    input({ endpoint: { ...ready, spec: { workload: "tts" } } as GpuEndpoint, spec: { endpointRef: "asr" } }),
    input({ endpoint: { ...ready, status: { endpointId: "ep-1", conditions: [] } } as GpuEndpoint }),
  ];
}
