// The GpuEndpoint pass as a table: (facts) -> (conditions, action, Events, what the view asks
// again, requeue), one row per row of the runbook's "Diagnose failing jobs" table and per way an
// endpoint is found. Pure: no fakes needed; gpuendpoint-reconciler.test.ts checks that the
// executor gathers these facts and carries the plans out.
import { describe, expect, it } from "vitest";
import { makeGpuEndpoint } from "../support/builders.js";
import type { GpuEndpoint, GpuEndpointSpec, GpuEndpointStatus } from "../../src/crds/gpuendpoint.js";
import type { EndpointFacts, HealthReport, LiveEndpoint } from "../../src/gpuendpoint/facts.js";
import { causeAndFix, findingOf } from "../../src/gpuendpoint/findings.js";
import { FIXES } from "../../src/gpuendpoint/fixes.js";
import {
  afterAction,
  planEndpoint,
  type ActionOutcome,
  type EndpointPlan,
} from "../../src/gpuendpoint/plan.js";
import { providerWaitCause } from "../../src/mediajob/wait-cause.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");

const endpoint = (spec: Partial<GpuEndpointSpec> = {}, status?: GpuEndpointStatus): GpuEndpoint =>
  makeGpuEndpoint("asr")
    .ns("ns")
    .generation(1)
    .resourceVersion("1")
    .spec({ minWorkers: 0, maxWorkers: 3, idleTimeoutSeconds: 5, ...spec })
    .status(status)
    .build();
const live = (o: Partial<LiveEndpoint> = {}): LiveEndpoint => ({
  id: "ep-1",
  name: "media-asr-test",
  workersMin: 0,
  workersMax: 3,
  idleTimeout: 5,
  scalerType: "QUEUE_DELAY",
  scalerValue: 4,
  executionTimeoutMs: 600_000,
  ...o,
});
const report = (
  jobs: Partial<HealthReport["jobs"]> = {},
  workers: Partial<HealthReport["workers"]> = {},
): HealthReport => ({
  jobs: { completed: 0, failed: 0, inProgress: 0, inQueue: 0, ...jobs },
  workers: { idle: 1, running: 0, ...workers },
});
const facts = (o: Partial<EndpointFacts> = {}): EndpointFacts => ({
  endpoint: endpoint(),
  now: NOW,
  mediaEnv: "test",
  naming: { conventionalName: "media-asr-test" },
  tickMs: 30_000,
  key: { valid: true, accountId: "acct-1" },
  listing: { endpoints: [live()] },
  health: { report: report() },
  ...o,
});
const refused = { failed: { refused: "INVALID_API_KEY" as const, message: "provider says 401" } };
const unavailable = { failed: { message: "connect ECONNREFUSED" } };

interface Expected {
  /** "Status Reason" of each condition type listed. */
  conditions: Record<string, string>;
  /** Condition types the pass does not set. */
  absent?: string[];
  /** A condition's message, matched. */
  message?: [type: string, match: RegExp];
  action?: string;
  events?: string[];
  refresh?: string[];
  requeue?: number;
  status?: Partial<GpuEndpointStatus>;
  /** The dispatcher is told the endpoint's capacity (Ready). */
  observe?: boolean;
}

function check(plan: EndpointPlan, e: Expected): void {
  const conds = plan.status.conditions ?? [];
  for (const [type, want] of Object.entries(e.conditions)) {
    const c = conds.find((x) => x.type === type);
    expect(c && `${c.status} ${c.reason}`, type).toBe(want);
  }
  for (const type of e.absent ?? [])
    expect(
      conds.find((x) => x.type === type),
      type,
    ).toBeUndefined();
  if (e.message) expect(conds.find((x) => x.type === e.message![0])?.message).toMatch(e.message[1]);
  expect(plan.action?.type).toBe(e.action);
  if (e.events) expect(plan.events.map(([t, r]) => `${t} ${r}`)).toEqual(e.events);
  expect(plan.refresh).toEqual(e.refresh ?? []);
  expect(plan.requeueAfterMs).toBe(e.requeue);
  if (e.status) expect(plan.status).toMatchObject(e.status);
  expect(plan.observe !== undefined).toBe(e.observe ?? false);
  // Conditions are those of this generation; the generation is observed once the pass is done.
  if (!plan.action) expect(plan.status.observedGeneration).toBe(1);
}

/** A status from an earlier pass that found the endpoint Ready and healthy. */
const readyBefore = (): GpuEndpointStatus => planEndpoint(facts()).status;

describe("planEndpoint", () => {
  const table: Array<{ name: string; facts: EndpointFacts } & Expected> = [
    {
      name: "key invalid: CredentialsValid False, Ready False with the rotation fix; nothing else is asked",
      facts: facts({ key: refused, listing: undefined, health: undefined }),
      conditions: { CredentialsValid: "False InvalidApiKey", Ready: "False InvalidApiKey" },
      absent: ["EndpointFound", "WorkersInSync", "WorkersHealthy"],
      message: ["Ready", /^the GPU provider rejects the API key\. Fix: rotate the key/],
      events: ["Normal ScaleToZeroAllowed", "Warning InvalidApiKey", "Warning InvalidApiKey"],
    },
    {
      name: "account problem: the provider's words and the account fix",
      facts: facts({
        key: { failed: { refused: "ACCOUNT_PROBLEM", message: "balance too low" } },
        listing: undefined,
        health: undefined,
      }),
      conditions: { CredentialsValid: "False AccountProblem", Ready: "False AccountProblem" },
      message: [
        "CredentialsValid",
        /problem \(billing, quota or suspension\): balance too low\. Fix: resolve it in the provider's account settings$/,
      ],
    },
    {
      name: "provider unavailable for the key check: Unknown, Ready False, no fix",
      facts: facts({ key: unavailable, listing: undefined, health: undefined }),
      conditions: { CredentialsValid: "Unknown ProviderUnavailable", Ready: "False ProviderUnavailable" },
      message: ["Ready", /^could not check the GPU API key: connect ECONNREFUSED$/],
    },
    {
      name: "provider unavailable for the listing: the key valid, EndpointFound Unknown",
      facts: facts({ listing: unavailable, health: undefined }),
      conditions: {
        CredentialsValid: "True KeyValid",
        EndpointFound: "Unknown ProviderUnavailable",
        Ready: "False ProviderUnavailable",
      },
      message: ["EndpointFound", /^could not list the provider's endpoints: connect ECONNREFUSED$/],
    },
    {
      name: "the listing refused for the key's sake: the key is checked again at the next look",
      facts: facts({ listing: refused, health: undefined }),
      conditions: { CredentialsValid: "False InvalidApiKey", Ready: "False InvalidApiKey" },
      refresh: ["key"],
    },
    {
      name: "not found by spec.endpointId: ENDPOINT_NOT_FOUND, and the resolution is forgotten",
      facts: facts({
        endpoint: endpoint({ endpointId: "gone" }, { endpointId: "gone", resolvedBy: "spec" }),
        health: undefined,
      }),
      conditions: { EndpointFound: "False ENDPOINT_NOT_FOUND", Ready: "False ENDPOINT_NOT_FOUND" },
      message: [
        "Ready",
        /^endpoint id gone \(from spec\.endpointId\) does not match a live endpoint\. Fix: re-deploy the endpoint, then update the id/,
      ],
      events: ["Normal ScaleToZeroAllowed", "Warning ENDPOINT_NOT_FOUND", "Warning ENDPOINT_NOT_FOUND"],
    },
    {
      name: "not found by GPU_PROVIDER_ENDPOINT_<WORKLOAD>",
      facts: facts({ naming: { fromEnv: "gone", conventionalName: "media-asr-test" }, health: undefined }),
      conditions: { EndpointFound: "False ENDPOINT_NOT_FOUND" },
      message: ["EndpointFound", /^endpoint id gone \(from GPU_PROVIDER_ENDPOINT_ASR\) does not match/],
    },
    {
      name: "not found by the conventional name, and no spec.create",
      facts: facts({ listing: { endpoints: [live({ name: "other" })] }, health: undefined }),
      conditions: { EndpointFound: "False ENDPOINT_NOT_FOUND" },
      message: [
        "EndpointFound",
        /^no endpoint id is set \(spec\.endpointId, GPU_PROVIDER_ENDPOINT_ASR\) and no provider endpoint is named media-asr-test\. Fix: .*, or set spec\.create$/,
      ],
    },
    {
      name: "found by spec.endpointId",
      facts: facts({ endpoint: endpoint({ endpointId: "ep-1" }) }),
      conditions: { EndpointFound: "True EndpointFound", Ready: "True Ready" },
      status: { endpointId: "ep-1", resolvedBy: "spec" },
      observe: true,
    },
    {
      name: "found by GPU_PROVIDER_ENDPOINT_<WORKLOAD>",
      facts: facts({ naming: { fromEnv: "ep-1", conventionalName: "media-asr-test" } }),
      conditions: { Ready: "True Ready" },
      status: { endpointId: "ep-1", resolvedBy: "environment", endpointName: "media-asr-test" },
      observe: true,
    },
    {
      name: "found by its name: Ready, with its settings, autoscaler and health recorded",
      facts: facts(),
      conditions: {
        WarmWorkers: "True ScaleToZeroAllowed",
        CredentialsValid: "True KeyValid",
        EndpointFound: "True EndpointFound",
        WorkersInSync: "True InSync",
        ScalerKnown: "True ScalerKnown",
        WorkersHealthy: "True Healthy",
        Ready: "True Ready",
      },
      events: [
        "Normal ScaleToZeroAllowed",
        "Normal EndpointFound",
        "Normal ScalerKnown",
        "Normal Healthy",
        "Normal Ready",
      ],
      status: {
        resolvedBy: "name",
        workersMin: 0,
        workersMax: 3,
        idleTimeoutSeconds: 5,
        scalerType: "QUEUE_DELAY",
        scalerValue: 4,
        executionTimeoutMs: 600_000,
        health: { jobsInQueue: 0, workersIdle: 1 },
      },
      observe: true,
    },
    {
      name: "an endpoint it created stays resolved by creation while it is the same one",
      facts: facts({
        endpoint: endpoint({}, { endpointId: "ep-1", resolvedBy: "created" }),
      }),
      conditions: { Ready: "True Ready" },
      status: { resolvedBy: "created" },
      observe: true,
    },
    {
      name: "none found and spec.create: the creation, with the spec's workers from the start",
      facts: facts({
        endpoint: endpoint({ create: { templateId: "tpl", gpuTypeIds: ["A40", "L4"] } }),
        listing: { endpoints: [] },
        health: undefined,
      }),
      conditions: { CredentialsValid: "True KeyValid" },
      absent: ["EndpointFound", "Ready"],
      action: "create",
    },
    {
      name: "drift at the provider: the update that restores it",
      facts: facts({ listing: { endpoints: [live({ workersMax: 0 })] } }),
      conditions: { EndpointFound: "True EndpointFound" },
      absent: ["WorkersInSync", "Ready"],
      action: "updateWorkers",
    },
    {
      name: "scaler unknown, no spec.maxInFlight: jobs wait, and the fix says so",
      facts: facts({ listing: { endpoints: [live({ scalerType: undefined, scalerValue: undefined })] } }),
      conditions: { ScalerKnown: "False ScalerUnknown", Ready: "True Ready" },
      message: ["ScalerKnown", /Queued, ScalerUnknown\) until it is known\. Fix: set the endpoint's scaler/],
      status: { workersMax: 3 },
      observe: true,
    },
    {
      name: "scaler unknown with spec.maxInFlight: it sizes the window meanwhile, nothing to fix",
      facts: facts({
        endpoint: endpoint({ maxInFlight: 8 }),
        listing: { endpoints: [live({ scalerType: "SOMETHING", scalerValue: 0 })] },
      }),
      conditions: { ScalerKnown: "False ScalerUnknown", Ready: "True Ready" },
      message: ["ScalerKnown", /spec\.maxInFlight \(8\) sizes the window meanwhile$/],
      observe: true,
    },
    {
      name: "unhealthy workers: told, and the endpoint stays Ready (its queue still takes jobs)",
      facts: facts({ health: { report: report({ inQueue: 3 }, { idle: 0, unhealthy: 2 }) } }),
      conditions: { WorkersHealthy: "False UnhealthyWorkers", Ready: "True Ready" },
      message: ["WorkersHealthy", /^2 worker\(s\) unhealthy .*Check the worker logs/],
      observe: true,
    },
    {
      name: "jobs queued and no worker allowed",
      facts: facts({
        endpoint: endpoint({ maxWorkers: 0 }),
        listing: { endpoints: [live({ workersMax: 0 })] },
        health: { report: report({ inQueue: 2 }, { idle: 0 }) },
      }),
      conditions: { WorkersHealthy: "False NoWorkersAllowed" },
      message: ["WorkersHealthy", /^2 job\(s\) queued but maxWorkers is 0\. Fix: raise spec\.maxWorkers$/],
      observe: true,
    },
    {
      name: "throttled workers and jobs queued",
      facts: facts({ health: { report: report({ inQueue: 3 }, { idle: 0, throttled: 2 }) } }),
      conditions: { WorkersHealthy: "False ThrottledWorkers" },
      message: ["WorkersHealthy", /Fix: allow more GPU types$/],
      observe: true,
    },
    {
      name: "a queue that does not drain since the last check",
      facts: facts({
        endpoint: endpoint({}, { health: { jobsInQueue: 2 } }),
        health: { report: report({ inQueue: 3 }, { idle: 0 }) },
      }),
      conditions: { WorkersHealthy: "False QueueNotDraining" },
      message: ["WorkersHealthy", /cannot be known here/],
      observe: true,
    },
    {
      name: "a health check refused for the key's sake: the key's problem, checked again at once",
      facts: facts({ health: refused }),
      conditions: {
        EndpointFound: "True EndpointFound",
        CredentialsValid: "False InvalidApiKey",
        Ready: "False InvalidApiKey",
      },
      refresh: ["key"],
      status: { endpointId: "ep-1" },
    },
    {
      name: "a health check answered 404: health unknown, Ready, and the next look lists again",
      facts: facts({ health: { failed: { notFound: true, message: "not found" } } }),
      conditions: { WorkersHealthy: "Unknown HealthUnavailable", Ready: "True Ready" },
      refresh: ["endpoints"],
      observe: true,
    },
    {
      name: "warm workers in production: scaling to zero is a warning with the fix",
      facts: facts({ mediaEnv: "prod" }),
      conditions: { WarmWorkers: "False ScalesToZero", Ready: "True Ready" },
      message: ["WarmWorkers", /cold-start latency\. Fix: set spec\.minWorkers to 1/],
      observe: true,
    },
    {
      name: "warm workers in production: a warm worker is fine",
      facts: facts({
        mediaEnv: "prod",
        endpoint: endpoint({ minWorkers: 1 }),
        listing: { endpoints: [live({ workersMin: 1 })] },
      }),
      conditions: { WarmWorkers: "True WarmWorkers", Ready: "True Ready" },
      observe: true,
    },
  ];
  it.each(table)("$name", ({ facts: f, name: _n, ...expected }) => check(planEndpoint(f), expected));

  it("the creation asks for the spec's workers and GPU types", () => {
    const plan = planEndpoint(
      facts({
        endpoint: endpoint({
          minWorkers: 1,
          create: { templateId: "tpl", gpuTypeIds: ["A40", "L4"], gpuCount: 2 },
        }),
        listing: { endpoints: [] },
      }),
    );
    expect(plan.action).toEqual({
      type: "create",
      creation: {
        name: "media-asr-test",
        templateId: "tpl",
        gpuIds: "A40,L4",
        workersMin: 1,
        workersMax: 3,
        idleTimeout: 5,
        gpuCount: 2,
      },
    });
  });

  it("the update sets every worker setting the spec wants and names what drifted", () => {
    const plan = planEndpoint(facts({ listing: { endpoints: [live({ workersMax: 0, idleTimeout: 9 })] } }));
    expect(plan.action).toEqual({
      type: "updateWorkers",
      endpointId: "ep-1",
      change: { workersMin: 0, workersMax: 3, idleTimeout: 5 },
      drift: [
        { setting: "workersMax", was: 0, want: 3 },
        { setting: "idleTimeout", was: 9, want: 5 },
      ],
    });
  });

  it("at rest: the same facts plan the same status, with no Event (nothing to write)", () => {
    const before = readyBefore();
    const again = planEndpoint(facts({ endpoint: endpoint({}, before) }));
    expect(again.status).toEqual(before);
    expect(again.events).toEqual([]);
  });

  it("a condition keeps its lastTransitionTime while its status holds", () => {
    const before = readyBefore();
    const later = planEndpoint(
      facts({
        now: new Date(NOW.getTime() + 60_000),
        endpoint: endpoint({}, before),
        health: { report: report({ inQueue: 1 }) },
      }),
    );
    const ready = (s: GpuEndpointStatus) => s.conditions?.find((c) => c.type === "Ready");
    expect(ready(later.status)?.lastTransitionTime).toBe(NOW.toISOString());
    expect(later.status.conditions?.find((c) => c.type === "WorkersHealthy")?.message).toBe(
      "1 worker(s) up, 1 job(s) queued",
    );
  });
});

describe("afterAction", () => {
  const creating = facts({
    endpoint: endpoint({ create: { templateId: "tpl", gpuTypeIds: ["A40"] } }),
    listing: { endpoints: [] },
    health: undefined,
  });
  const drifted = facts({ listing: { endpoints: [live({ workersMax: 0 })] } });
  const table: Array<{ name: string; facts: EndpointFacts; outcome: ActionOutcome } & Expected> = [
    {
      name: "created: told, resolved by creation, Ready; its health is read at the next look",
      facts: creating,
      outcome: { endpoint: live({ id: "ep-new" }) },
      conditions: { EndpointFound: "True EndpointFound", WorkersInSync: "True InSync", Ready: "True Ready" },
      absent: ["WorkersHealthy"],
      events: [
        "Normal ScaleToZeroAllowed",
        "Normal EndpointCreated",
        "Normal EndpointFound",
        "Normal ScalerKnown",
        "Normal Ready",
      ],
      status: { endpointId: "ep-new", resolvedBy: "created", endpointName: "media-asr-test" },
      observe: true,
    },
    {
      name: "one of that name existed by then: adopted by its name, nothing created",
      facts: creating,
      outcome: { endpoint: live({ id: "ep-other" }), existed: true },
      conditions: { Ready: "True Ready" },
      events: ["Normal ScaleToZeroAllowed", "Normal EndpointFound", "Normal ScalerKnown", "Normal Ready"],
      status: { endpointId: "ep-other", resolvedBy: "name" },
      observe: true,
    },
    {
      name: "created, but not with the spec's workers: their update follows in the same pass",
      facts: creating,
      outcome: { endpoint: live({ id: "ep-new", idleTimeout: 60 }) },
      conditions: { EndpointFound: "True EndpointFound" },
      absent: ["Ready"],
      action: "updateWorkers",
    },
    {
      name: "the creation failed: the endpoint is still not found, the provider unavailable",
      facts: creating,
      outcome: unavailable,
      conditions: { EndpointFound: "Unknown ProviderUnavailable", Ready: "False ProviderUnavailable" },
    },
    {
      name: "the creation refused for the key's sake",
      facts: creating,
      outcome: refused,
      conditions: { CredentialsValid: "False InvalidApiKey", Ready: "False InvalidApiKey" },
      refresh: ["key"],
    },
    {
      name: "drift restored: told what changed, in sync, Ready",
      facts: drifted,
      outcome: { endpoint: live() },
      conditions: { WorkersInSync: "True InSync", WorkersHealthy: "True Healthy", Ready: "True Ready" },
      events: [
        "Normal ScaleToZeroAllowed",
        "Normal EndpointFound",
        "Normal WorkersSynced",
        "Normal ScalerKnown",
        "Normal Healthy",
        "Normal Ready",
      ],
      status: { workersMax: 3 },
      observe: true,
    },
    {
      name: "the update failed: not in sync, not Ready, tried again within the tick",
      facts: drifted,
      outcome: unavailable,
      conditions: { WorkersInSync: "False UpdateFailed", Ready: "False WorkersNotInSync" },
      absent: ["WorkersHealthy", "ScalerKnown"],
      message: ["Ready", /^could not update the workers at the provider: connect ECONNREFUSED$/],
      requeue: 5_000,
    },
  ];
  it.each(table)("$name", ({ facts: f, outcome, name: _n, ...expected }) =>
    check(afterAction(f, planEndpoint(f), outcome), expected),
  );

  it("drift restored: the Event says each setting before and after", () => {
    const plan = afterAction(drifted, planEndpoint(drifted), { endpoint: live() });
    expect(plan.events).toContainEqual(["Normal", "WorkersSynced", "set at the provider: workersMax 0 -> 3"]);
  });

  it("a failed update is retried sooner only within a shorter tick", () => {
    const f = { ...drifted, tickMs: 2_000 };
    expect(afterAction(f, planEndpoint(f), unavailable).requeueAfterMs).toBe(2_000);
  });
});

describe("fixes, by reason", () => {
  it("a condition's fix is its reason's, and its cause the rest of its message", () => {
    const plan = planEndpoint(
      facts({ key: refused, mediaEnv: "prod", listing: undefined, health: undefined }),
    );
    for (const c of plan.status.conditions ?? []) {
      const f = findingOf(c);
      expect(f.fix).toBe(c.status === "True" ? undefined : FIXES[c.reason]);
      expect(f.cause).not.toContain("Fix:");
    }
  });

  it("a message its reason's fix does not end (the fix did not apply) is all cause", () => {
    expect(causeAndFix("ScalerUnknown", "spec.maxInFlight (8) sizes the window meanwhile")).toEqual({
      cause: "spec.maxInFlight (8) sizes the window meanwhile",
    });
  });

  it("every wait cause of a provider queue that names a fix has it in the table", () => {
    const h = (o: object) => ({ jobsInQueue: 2, workersIdle: 0, workersRunning: 0, ...o });
    const causes = [
      providerWaitCause(h({ workersUnhealthy: 1 }), 3),
      providerWaitCause(h({}), 0),
      providerWaitCause(h({ workersThrottled: 1 }), 3),
      providerWaitCause(h({ workersRunning: 3 }), 3),
    ];
    for (const cause of causes) {
      const { cause: text, fix } = causeAndFix(cause!.reason, cause!.message);
      expect(fix, cause!.reason).toBe(FIXES[cause!.reason]);
      expect(`${text}. Fix: ${fix}`).toBe(cause!.message);
    }
  });
});
