// The GpuEndpoint executor without a control plane: a cache, the real provider view over a
// scripted provider, scripted Kubernetes writes and a scripted dispatcher, each failing on any
// call its case does not list (test/unit/support/mediajob-fakes.ts). The plans themselves are
// gpuendpoint-plan.test.ts; here, that the executor reads what the plan needs, carries out its
// action, keeps the provider view's caches right and writes status once, only when it changed.
import pino from "pino";
import { describe, expect, it } from "vitest";
import { makeGpuEndpoint } from "../support/builders.js";
import type { GpuEndpoint, GpuEndpointSpec } from "../../src/crds/gpuendpoint.js";
import { ProviderView } from "../../src/controller/gpuendpoint/provider-view.js";
import { GpuEndpointReconciler, type GpuEndpointDeps } from "../../src/controller/gpuendpoint/reconciler.js";
import type { LiveEndpoint } from "../../src/gpuendpoint/facts.js";
import { Script, providerError, type Expect } from "./support/mediajob-fakes.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");

const endpoint = (spec: Partial<GpuEndpointSpec> = {}, name = "asr"): GpuEndpoint =>
  makeGpuEndpoint(name, "asr")
    .ns("ns")
    .generation(1)
    .resourceVersion("1")
    .spec({ minWorkers: 0, maxWorkers: 3, idleTimeoutSeconds: 5, ...spec })
    .build();
const live = (o: Partial<LiveEndpoint> = {}): LiveEndpoint => ({
  id: "ep-1",
  name: "media-asr-test",
  workersMin: 0,
  workersMax: 3,
  idleTimeout: 5,
  scalerType: "QUEUE_DELAY",
  scalerValue: 4,
  ...o,
});
const healthy = () => ({
  jobs: { completed: 0, failed: 0, inProgress: 0, inQueue: 0 },
  workers: { idle: 1, running: 0 },
});

const key: Expect = { call: "checkKey", answer: () => ({ accountId: "acct-1" }) };
const lists = (...endpoints: LiveEndpoint[]): Expect => ({ call: "listEndpoints", answer: () => endpoints });
const health: Expect = {
  call: "health",
  check: (id: string) => expect(id).toBe("ep-1"),
  answer: healthy,
};
const cond = (ep: GpuEndpoint, type: string) => {
  const c = ep.status?.conditions?.find((x) => x.type === type);
  return c && `${c.status} ${c.reason}`;
};
/** A status write: the object written is checked, and stored as resourceVersion `rv`. */
const writes = (check: (ep: GpuEndpoint) => void, rv = "2"): Expect => ({
  call: "replaceStatus",
  check: (plural: string, obj: GpuEndpoint) => {
    expect(plural).toBe("gpuendpoints");
    expect(obj.status?.lastSyncedAt).toBe(NOW.toISOString());
    check(obj);
  },
  answer: (_p: string, obj: GpuEndpoint) => ({ ...obj, metadata: { ...obj.metadata, resourceVersion: rv } }),
});

/** What the dispatcher was told and asked, in order (its methods answer at once). */
type Told = Array<[call: string, ...args: unknown[]]>;

function harness(w: {
  endpoints: GpuEndpoint[];
  provider?: Expect[];
  kube?: Expect[];
  /** A dispatcher whose view of the endpoint is this; absent: none. */
  dispatcher?: { window: number; inFlight: number };
  fromEnv?: string;
}) {
  const provider = new Script("provider", w.provider ?? []);
  const kube = new Script("kubernetes", w.kube ?? []);
  const client = {
    checkKey: (...a: unknown[]) => provider.take("checkKey", a),
    listEndpoints: (...a: unknown[]) => provider.take("listEndpoints", a),
    health: (...a: unknown[]) => provider.take("health", a),
    saveEndpoint: (...a: unknown[]) => provider.take("saveEndpoint", a),
    updateEndpointWorkers: (...a: unknown[]) => provider.take("updateEndpointWorkers", a),
  } as unknown as GpuEndpointDeps["provider"] & ConstructorParameters<typeof ProviderView>[0];
  // A tick and a drift check far longer than a case: what the view caches stays cached.
  const view = new ProviderView(client, 60_000, 600_000, () => NOW.getTime());
  const byKey = new Map(w.endpoints.map((e) => [`${e.metadata.namespace}/${e.metadata.name}`, e]));
  const events: string[] = [];
  const told: Told = [];
  const windowView = w.dispatcher;
  const deps: GpuEndpointDeps = {
    api: { replaceStatus: (...a: unknown[]) => kube.take("replaceStatus", a) } as never,
    endpoints: { getByKey: (k: string) => byKey.get(k) } as never,
    provider: client,
    view,
    events: {
      record: async (_t, type, reason) => {
        events.push(`${type} ${reason}`);
      },
    },
    log: pino({ level: "silent" }),
    env: {
      MEDIA_ENV: "test",
      MEDIA_ENDPOINT_PREFIX: "media",
      GPU_PROVIDER_ENDPOINT_ASR: w.fromEnv,
      GPU_PROVIDER_ENDPOINT_TTS: undefined,
      GPU_PROVIDER_ENDPOINT_RENDER: undefined,
    },
    tickMs: 30_000,
    now: () => NOW,
    ...(windowView && {
      dispatcher: {
        observeEndpoint: (...a: unknown[]) => void told.push(["observeEndpoint", ...a]),
        view: (...a: unknown[]) => {
          told.push(["view", ...a]);
          return { ...windowView, waiting: {} };
        },
      } as never,
    }),
  };
  const reconciler = new GpuEndpointReconciler(deps);
  return {
    reconciler,
    view,
    events,
    told,
    done: () => {
      provider.done();
      kube.done();
    },
  };
}

describe("GpuEndpoint reconciler, without a control plane", () => {
  it("a new endpoint: the key, the listing, its health, one status write, its Events", async () => {
    let written: GpuEndpoint | undefined;
    const h = harness({
      endpoints: [endpoint()],
      provider: [key, lists(live()), health],
      kube: [
        writes((ep) => {
          written = ep;
          expect(cond(ep, "Ready")).toBe("True Ready");
          expect(cond(ep, "WorkersHealthy")).toBe("True Healthy");
          expect(ep.status).toMatchObject({ endpointId: "ep-1", resolvedBy: "name", observedGeneration: 1 });
        }),
      ],
    });
    expect(await h.reconciler.reconcile("ns/asr")).toBeUndefined();
    h.done();
    expect(h.events).toEqual([
      "Normal ScaleToZeroAllowed",
      "Normal EndpointFound",
      "Normal ScalerKnown",
      "Normal Healthy",
      "Normal Ready",
    ]);

    // At rest (the object as written, seen again): the same reads, no write, no Event.
    const again = harness({
      endpoints: [{ ...written!, metadata: { ...written!.metadata, resourceVersion: "2" } }],
      provider: [key, lists(live()), health],
    });
    expect(await again.reconciler.reconcile("ns/asr")).toBeUndefined();
    again.done();
    expect(again.events).toEqual([]);
  });

  it("the cache still shows the object it wrote over: looked at again shortly, nothing read", async () => {
    const h = harness({
      endpoints: [endpoint()],
      provider: [key, lists(live()), health],
      kube: [writes(() => undefined)],
    });
    await h.reconciler.reconcile("ns/asr");
    expect(await h.reconciler.reconcile("ns/asr")).toEqual({ requeueAfterMs: 100 });
    h.done();
  });

  it("an object no longer in the cache: nothing happens", async () => {
    const h = harness({ endpoints: [] });
    expect(await h.reconciler.reconcile("ns/asr")).toBeUndefined();
    h.done();
  });

  it("a key check that failed with no provider answer is Unknown, not a valid key", async () => {
    const h = harness({
      endpoints: [endpoint()],
      provider: [{ call: "checkKey", answer: () => Promise.reject(new Error("socket hang up")) }],
      kube: [
        writes((ep) => {
          expect(cond(ep, "CredentialsValid")).toBe("Unknown ProviderUnavailable");
          expect(cond(ep, "Ready")).toBe("False ProviderUnavailable");
          expect(ep.status?.conditions?.find((c) => c.type === "Ready")?.message).toBe(
            "could not check the GPU API key: socket hang up",
          );
        }),
      ],
    });
    await h.reconciler.reconcile("ns/asr");
    h.done();
  });

  it("a listing refused for the key's sake: the key is checked again at the next look", async () => {
    const h = harness({
      endpoints: [endpoint()],
      provider: [
        key,
        { call: "listEndpoints", answer: () => Promise.reject(providerError("INVALID_API_KEY")) },
        { call: "checkKey", answer: () => Promise.reject(providerError("INVALID_API_KEY")) },
      ],
      kube: [writes((ep) => expect(cond(ep, "CredentialsValid")).toBe("False InvalidApiKey"))],
    });
    await h.reconciler.reconcile("ns/asr");
    await expect(h.view.checkKey()).rejects.toThrow(/INVALID_API_KEY/);
    h.done();
  });

  it("drift: the update at the provider, its answer kept in the view's listing, told by an Event", async () => {
    const h = harness({
      endpoints: [endpoint()],
      provider: [
        key,
        lists(live({ workersMax: 0 })),
        health,
        {
          call: "updateEndpointWorkers",
          check: (id: string, change: object) => {
            expect(id).toBe("ep-1");
            expect(change).toEqual({ workersMin: 0, workersMax: 3, idleTimeout: 5 });
          },
          answer: () => live(),
        },
      ],
      kube: [
        writes((ep) => {
          expect(cond(ep, "WorkersInSync")).toBe("True InSync");
          expect(ep.status?.workersMax).toBe(3);
        }),
      ],
    });
    expect(await h.reconciler.reconcile("ns/asr")).toBeUndefined();
    expect(h.events).toContain("Normal WorkersSynced");
    // The next look reads the settings just saved, not the drifted ones, and asks no one.
    expect((await h.view.listEndpoints())[0]?.workersMax).toBe(3);
    h.done();
  });

  it("an update that failed: not Ready, retried within the tick", async () => {
    const h = harness({
      endpoints: [endpoint()],
      provider: [
        key,
        lists(live({ workersMax: 0 })),
        health,
        {
          call: "updateEndpointWorkers",
          answer: () => Promise.reject(providerError("PROVIDER_UNAVAILABLE")),
        },
      ],
      kube: [writes((ep) => expect(cond(ep, "Ready")).toBe("False WorkersNotInSync"))],
    });
    expect(await h.reconciler.reconcile("ns/asr")).toEqual({ requeueAfterMs: 5_000 });
    h.done();
  });

  it("spec.create: a fresh listing, then the creation; the next listing asks the provider again", async () => {
    const h = harness({
      endpoints: [endpoint({ create: { templateId: "tpl", gpuTypeIds: ["A40"] } })],
      provider: [
        key,
        lists(),
        lists(),
        {
          call: "saveEndpoint",
          check: (req: Record<string, unknown>) => {
            expect(req).toEqual({
              name: "media-asr-test",
              templateId: "tpl",
              gpuIds: "A40",
              workersMin: 0,
              workersMax: 3,
              idleTimeout: 5,
            });
          },
          answer: () => live({ id: "ep-new" }),
        },
        lists(live({ id: "ep-new" })),
      ],
      kube: [
        writes((ep) => {
          expect(ep.status).toMatchObject({ endpointId: "ep-new", resolvedBy: "created" });
          expect(cond(ep, "Ready")).toBe("True Ready");
        }),
      ],
    });
    await h.reconciler.reconcile("ns/asr");
    expect(h.events).toContain("Normal EndpointCreated");
    await h.view.listEndpoints();
    h.done();
  });

  it("spec.create, and the fresh listing has one of that name: adopted, nothing created", async () => {
    const h = harness({
      endpoints: [endpoint({ create: { templateId: "tpl", gpuTypeIds: ["A40"] } })],
      provider: [key, lists(), lists(live({ id: "ep-other" }))],
      kube: [writes((ep) => expect(ep.status).toMatchObject({ endpointId: "ep-other", resolvedBy: "name" }))],
    });
    await h.reconciler.reconcile("ns/asr");
    expect(h.events).not.toContain("Normal EndpointCreated");
    h.done();
  });

  it("a health check answered 404: Ready, and the next look lists the endpoints again", async () => {
    const h = harness({
      endpoints: [endpoint({ endpointId: "ep-1" })],
      provider: [
        key,
        lists(live()),
        {
          call: "health",
          answer: () => Promise.reject(Object.assign(providerError("ENDPOINT_NOT_FOUND"), { status: 404 })),
        },
        lists(),
      ],
      kube: [
        writes((ep) => {
          expect(cond(ep, "WorkersHealthy")).toBe("Unknown HealthUnavailable");
          expect(cond(ep, "Ready")).toBe("True Ready");
        }),
      ],
    });
    await h.reconciler.reconcile("ns/asr");
    await h.view.listEndpoints();
    h.done();
  });

  it("Ready: the dispatcher is told the capacity seen, and its window goes into the status", async () => {
    const h = harness({
      endpoints: [endpoint()],
      provider: [key, lists(live()), health],
      dispatcher: { window: 4, inFlight: 1 },
      kube: [writes((ep) => expect(ep.status).toMatchObject({ window: 4, inFlight: 1 }))],
    });
    await h.reconciler.reconcile("ns/asr");
    h.done();
    expect(h.told.map(([call]) => call)).toEqual(["observeEndpoint", "view"]);
    const [, told, scaler] = h.told[0]! as [string, GpuEndpoint, object];
    expect(told.status).toMatchObject({ endpointId: "ep-1", workersMax: 3, health: { workersIdle: 1 } });
    expect(scaler).toEqual({ scalerType: "QUEUE_DELAY", scalerValue: 4 });
    expect(h.told[1]).toEqual(["view", "ep-1"]);
  });

  it("not Ready: the dispatcher is told nothing", async () => {
    const h = harness({
      endpoints: [endpoint()],
      provider: [
        key,
        lists(live()),
        { call: "health", answer: () => Promise.reject(providerError("INVALID_API_KEY")) },
      ],
      dispatcher: { window: 4, inFlight: 1 },
      kube: [writes((ep) => expect(cond(ep, "Ready")).toBe("False InvalidApiKey"))],
    });
    await h.reconciler.reconcile("ns/asr");
    h.done();
    expect(h.told).toEqual([]);
  });

  it("not found by GPU_PROVIDER_ENDPOINT_<WORKLOAD>: no health read, the resolution's reason", async () => {
    const h = harness({
      endpoints: [endpoint()],
      fromEnv: "gone",
      provider: [key, lists(live())],
      kube: [writes((ep) => expect(cond(ep, "Ready")).toBe("False ENDPOINT_NOT_FOUND"))],
    });
    await h.reconciler.reconcile("ns/asr");
    h.done();
  });
});
