// A controller under test: the provider simulator over real HTTP, the real control plane, and a
// Manager watching one namespace (so test files never see each other's objects).
import { randomBytes } from "node:crypto";
import type { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { afterAll, beforeAll } from "vitest";
import { parseEnv, type Env } from "../../src/config/env.js";
import type { BillingAccountStatus, Workload } from "../../src/crds/index.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { Manager } from "../../src/controller/manager.js";
import { KubeApi } from "../../src/k8s/api.js";
import { GpuProviderClient } from "../../src/provider/index.js";
import { startSimulator, type Simulator, type SimulatorOptions } from "../../tools/simulator/server.js";
import { startWebhookServer, type RunningWebhookServer } from "../../src/webhooks/server.js";
import { activeAccount } from "./accounts.js";
import { makeGpuEndpoint, makeMediaJob } from "./builders.js";
import { createTestNamespace, eventually } from "./kube.js";

export const TEST_ENV = "test";
export const PREFIX = "media";
export const SIM_KEY = "sim-key";

export function testEnv(namespace: string, overrides: Record<string, string> = {}): Env {
  return parseEnv({
    GPU_PROVIDER_API_KEY: SIM_KEY,
    GPU_PROVIDER_API_URL: "http://127.0.0.1:1",
    MEDIA_ENV: TEST_ENV,
    MEDIA_ENDPOINT_PREFIX: PREFIX,
    CALLBACK_BASE_URL: "http://127.0.0.1:9",
    CALLBACK_SECRET: `callback-secret-${randomBytes(8).toString("hex")}`,
    PAYMENT_PROVIDER_WEBHOOK_SECRET: `whsec_${randomBytes(12).toString("hex")}`,
    RESYNC_INTERVAL_SECONDS: "1",
    JOB_TIMEOUT_SECONDS: "600",
    WATCH_NAMESPACE: namespace,
    LEADER_ELECTION: "false",
    LEADER_ELECTION_NAMESPACE: namespace,
    MAX_CONCURRENT_RECONCILES: "4",
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    ...overrides,
  });
}

export const testLogger = () => pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });

/** A simulator with the three conventional endpoints, fast. */
export function startTestSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  return startSimulator({
    timeScale: 0.01,
    coldStartMs: 500,
    executionMs: 1000,
    callbackRetryDelayMs: 500,
    endpoints: ["asr", "tts", "render"].map((w) => ({
      name: `${PREFIX}-${w}-${TEST_ENV}`,
      workload: w as "asr",
      workersMax: 3,
    })),
    logger: testLogger(),
    ...opts,
  });
}

export function startManager(
  kc: KubeConfig,
  sim: Simulator,
  env: Env,
  extra: Partial<ConstructorParameters<typeof Manager>[0]> = {},
): Manager {
  const api = new KubeApi(kc);
  const late: { manager?: Manager } = {};
  const provider = new GpuProviderClient({
    apiUrl: sim.url,
    apiKey: env.GPU_PROVIDER_API_KEY!,
    timeoutMs: 5_000,
    retryBudgetMs: 5_000,
    // Self-hosted endpoints (GpuEndpoint spec.baseUrl), as src/controller/run.ts routes them.
    endpointBaseUrl: (id) => late.manager?.endpointBaseUrl(id),
  });
  late.manager = new Manager({ api, provider, env, log: testLogger(), ...extra });
  return late.manager;
}

type Spec = Record<string, unknown> & { workload: string };

/** The provider id of the simulator's endpoint with this name. */
export function simEndpointId(sim: Simulator, name: string): string | undefined {
  return (sim.listEndpoints() as Array<{ id?: string; name?: string }>).find((e) => e.name === name)?.id;
}

/** A GpuEndpoint to create, its spec as given (makeGpuEndpoint for more). */
export const gpuEndpoint = (name: string, spec: Spec): GpuEndpoint =>
  makeGpuEndpoint(name, spec.workload as Workload)
    .spec(spec as Partial<GpuEndpoint["spec"]>)
    .build();

/** A MediaJob to create, its spec as given (makeMediaJob for more). */
export const mediaJob = (name: string, spec: Spec): MediaJob =>
  makeMediaJob(name)
    .spec(spec as Partial<MediaJob["spec"]>)
    .build();

export async function waitForPhase(
  api: KubeApi,
  ns: string,
  name: string,
  phase: string,
  timeoutMs = 20_000,
): Promise<MediaJob> {
  let last: MediaJob | undefined;
  return eventually(
    async () => {
      last = await api.get<MediaJob>("mediajobs", ns, name);
      return last?.status?.phase === phase ? last : undefined;
    },
    {
      timeoutMs,
      message: () => `MediaJob ${ns}/${name} to reach ${phase} (last: ${JSON.stringify(last?.status)})`,
    },
  );
}

/**
 * Completed, and the controller's record of the submission has landed too: a callback can complete
 * a job a moment before the controller writes when, where and as which attempt it was submitted.
 */
export async function waitForCompletedAndRecorded(
  api: KubeApi,
  ns: string,
  name: string,
  timeoutMs = 20_000,
): Promise<MediaJob> {
  await waitForPhase(api, ns, name, "Completed", timeoutMs);
  return eventually(
    async () => {
      const j = await api.get<MediaJob>("mediajobs", ns, name);
      return j?.status?.submittedAt ? j : undefined;
    },
    { timeoutMs, message: `MediaJob ${ns}/${name} to record its submission` },
  );
}

export async function waitForReady(
  api: KubeApi,
  ns: string,
  name: string,
  timeoutMs = 20_000,
): Promise<GpuEndpoint> {
  return eventually(
    async () => {
      const ep = await api.get<GpuEndpoint>("gpuendpoints", ns, name);
      return ep?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ? ep : undefined;
    },
    { timeoutMs, message: `GpuEndpoint ${ns}/${name} to be Ready` },
  );
}

export function condition(
  obj: { status?: { conditions?: Array<{ type: string }> } } | undefined,
  type: string,
) {
  return obj?.status?.conditions?.find((c) => c.type === type) as
    { type: string; status: string; reason: string; message: string } | undefined;
}

/**
 * The webhooks sidecar as it runs in the pod: its GPU callbacks are confirmed with the provider's
 * status API, here the simulator's.
 */
export function startTestSidecar(
  api: KubeApi,
  env: Env,
  namespace: string,
  sim: Simulator,
): Promise<RunningWebhookServer> {
  return startWebhookServer({
    api,
    env,
    log: testLogger(),
    namespace,
    provider: new GpuProviderClient({
      apiUrl: sim.url,
      apiKey: env.GPU_PROVIDER_API_KEY ?? SIM_KEY,
      timeoutMs: 5_000,
      retryBudgetMs: 5_000,
      retryBaseDelayMs: 20,
    }),
  });
}

export interface ControllerStackOptions {
  /** The test namespace's prefix. */
  name: string;
  /** Settings over testEnv's (GPU_PROVIDER_API_URL is the simulator's). */
  env?: Record<string, string>;
  sim?: SimulatorOptions;
  /** A simulator shared with other stacks (one provider account, several installs or tenants): not closed by stop(). */
  simulator?: Simulator;
  /** Also run the webhooks sidecar, and send the provider's callbacks to it. */
  sidecar?: boolean;
  /**
   * A GpuEndpoint per workload, or per spec (a window, workers, idempotentWorkers), named after
   * its workload and waited for until Ready.
   */
  endpoints?: Array<string | Spec>;
  /** What the Manager gets besides the defaults (a counting provider, a flaky API), from the env. */
  manager?: (env: Env, sim: Simulator) => Partial<ConstructorParameters<typeof Manager>[0]>;
  /**
   * Customers whose BillingAccount is active (with `status` over that, such as a plan's priceIds)
   * and bound to the namespace (activeAccount), once the endpoints are Ready: the accounts the
   * file's jobs name, as an operator sets up a tenant before its jobs come.
   */
  accounts?: Array<string | { customer: string; status: Partial<BillingAccountStatus> }>;
}

/** The simulator's GPU-seconds meter that the metering tests report to. */
export const GPU_SECONDS_METER = { id: "mtr_gpu", event_name: "gpu_seconds", display_name: "GPU seconds" };

/**
 * A stack whose controller meters usage to the simulator's payment API (GPU_SECONDS_METER), its
 * reporter looking every second, with the sidecar receiving callbacks and one asr endpoint.
 * `more`: settings and simulator options over those (merged), and the accounts to set up.
 */
export function meteredStackOptions(
  name: string,
  more: Pick<ControllerStackOptions, "env" | "sim" | "accounts"> = {},
): ControllerStackOptions {
  return {
    name,
    sidecar: true,
    endpoints: ["asr"],
    sim: { meters: [GPU_SECONDS_METER], ...more.sim },
    env: { PAYMENT_PROVIDER_API_KEY: "sim-payment-key", USAGE_REPORT_INTERVAL_SECONDS: "1", ...more.env },
    manager: (env, sim) => ({ env: { ...env, PAYMENT_PROVIDER_API_URL: sim.url } }),
    ...(more.accounts && { accounts: more.accounts }),
  };
}

export interface ControllerStack {
  ns: string;
  sim: Simulator;
  env: Env;
  manager: Manager;
  sidecar?: RunningWebhookServer;
  stop(): Promise<void>;
}

/**
 * The controller under test, whole: a namespace of its own, the simulator, the Manager (and the
 * sidecar when asked), the GpuEndpoints its jobs need, Ready, and the accounts they name, active
 * and bound. `stop()` ends them in order.
 */
export async function startControllerStack(
  kc: KubeConfig,
  opts: ControllerStackOptions,
): Promise<ControllerStack> {
  const api = new KubeApi(kc);
  const ns = await createTestNamespace(kc, opts.name);
  const sim = opts.simulator ?? (await startTestSimulator(opts.sim));
  let env = testEnv(ns, {
    GPU_PROVIDER_API_URL: sim.url,
    ...(opts.sidecar && { WEBHOOKS_HOST: "127.0.0.1", WEBHOOKS_PORT: "0" }),
    ...opts.env,
  });
  const sidecar = opts.sidecar ? await startTestSidecar(api, env, ns, sim) : undefined;
  if (sidecar) env = { ...env, CALLBACK_BASE_URL: sidecar.url };
  const manager = startManager(kc, sim, env, opts.manager?.(env, sim));
  await manager.start();
  for (const e of opts.endpoints ?? []) {
    const spec = typeof e === "string" ? { workload: e } : e;
    await api.create("gpuendpoints", ns, gpuEndpoint(spec.workload, spec) as never);
    await waitForReady(api, ns, spec.workload);
  }
  for (const a of opts.accounts ?? [])
    if (typeof a === "string") await activeAccount(api, ns, a);
    else await activeAccount(api, ns, a.customer, a.status);
  return {
    ns,
    sim,
    env,
    manager,
    ...(sidecar && { sidecar }),
    stop: async () => {
      await manager.stop();
      await sidecar?.close();
      if (!opts.simulator) await sim.close();
    },
  };
}

/**
 * The controller stack of the enclosing test file (or describe block): started before its tests,
 * stopped after them. The fields are filled in when the stack has started, so tests read them
 * (`stack.ns`) as they run, never at load.
 */
export function controllerStackForTests(kc: KubeConfig, opts: ControllerStackOptions): ControllerStack {
  const stack = {} as ControllerStack;
  beforeAll(async () => {
    Object.assign(stack, await startControllerStack(kc, opts));
  });
  afterAll(() => stack.stop?.());
  return stack;
}
