// A controller killed (SIGKILL) after the provider accepted a job but before it recorded the
// answer, at a provider that ignores client ids (RunPod): the submission intent written before
// /run keeps the restarted controller from submitting again, the job's callback is adopted by the
// sidecar, and the provider runs the job exactly once.
import { spawn, type ChildProcess } from "node:child_process";
import { createServer, request, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { freePort } from "../../scripts/devstack-lib.js";
import { REPO_ROOT } from "../support/controlplane.js";
import { createTestNamespace, eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import type { RunningWebhookServer } from "../../src/webhooks/server.js";
import {
  gpuEndpoint,
  mediaJob,
  startTestSidecar,
  startTestSimulator,
  testEnv,
  waitForPhase,
  waitForReady,
} from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let sim: Simulator;
let proxy: Server;
let proxyUrl = "";
let runsForwarded = 0;
let sidecar: RunningWebhookServer;
const CALLBACK_SECRET = "crash-test-callback-secret-of-32-bytes";
const children: ChildProcess[] = [];

/** Forwards everything to the simulator, but swallows the answer to /run: the submit never returns. */
function startBlackholeProxy(target: string): Promise<Server> {
  const server = createServer((req, res) => {
    const swallow = req.method === "POST" && /\/run$/.test(req.url ?? "");
    const upstream = request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (up) => {
      if (swallow) {
        runsForwarded++;
        up.resume(); // accepted at the provider; the controller never hears of it
        return;
      }
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    req.pipe(upstream);
  });
  return new Promise((r) => server.listen(0, "127.0.0.1", () => r(server)));
}

async function startController(apiUrl: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "controller"], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "ignore", "pipe"],
    env: {
      ...process.env,
      KUBECONFIG: testKubeconfigPath(),
      GPU_PROVIDER_API_URL: apiUrl,
      GPU_PROVIDER_API_KEY: "sim-key",
      MEDIA_ENV: "test",
      CALLBACK_BASE_URL: sidecar.url,
      CALLBACK_SECRET: CALLBACK_SECRET,
      WATCH_NAMESPACE: ns,
      LEADER_ELECTION: "false",
      RESYNC_INTERVAL_SECONDS: "1",
      CONTROLLER_METRICS_PORT: String(await freePort()),
      WEBHOOKS_HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
    },
  });
  children.push(child);
  return child;
}

beforeAll(async () => {
  ns = await createTestNamespace(kc, "crash");
  sim = await startTestSimulator();
  proxy = await startBlackholeProxy(sim.url);
  proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
  const env = testEnv(ns, {
    GPU_PROVIDER_API_URL: sim.url,
    CALLBACK_SECRET,
    WEBHOOKS_HOST: "127.0.0.1",
    WEBHOOKS_PORT: "0",
  });
  sidecar = await startTestSidecar(api, env, ns, sim);
  await api.create("gpuendpoints", ns, gpuEndpoint("asr", { workload: "asr" }) as never);
});

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  proxy?.closeAllConnections();
  proxy?.close();
  await sidecar?.close();
  await sim?.close();
});

describe("a crash between submit and status write", () => {
  it("does not execute the job twice", async () => {
    const first = await startController(proxyUrl);
    await waitForReady(api, ns, "asr", 30_000);
    await api.create(
      "mediajobs",
      ns,
      mediaJob("crash", { workload: "asr", id: "crash-1", timeoutSeconds: 1 }) as never,
    );
    await eventually(() => runsForwarded === 1 && sim.getJob("crash-1") !== undefined, { timeoutMs: 20_000 });
    first.kill("SIGKILL");
    await new Promise((r) => first.once("exit", r));
    // The provider has the job; Kubernetes has the intent written before /run (and, if the job's
    // callback was quicker than this read, the sidecar has already adopted it).
    const meanwhile = await api.get<MediaJob>("mediajobs", ns, "crash");
    expect(["Processing", "Completed"]).toContain(meanwhile?.status?.phase);
    expect(meanwhile?.status?.attempts).toBe(1);
    expect(meanwhile?.status?.submission).toMatchObject({ attempt: 1 });

    await startController(sim.url);
    const job = await waitForPhase(api, ns, "crash", "Completed", 30_000);
    expect(sim.executions("crash-1")).toBe(1);
    expect(job.status?.attempts).toBe(1);
    expect(job.status?.unconfirmedResubmissions ?? 0).toBe(0);
    // Adopted from the callback: the provider's own id, and the provider's output.
    const atProvider = sim.getJob("crash-1")!;
    expect(job.status?.providerJobId).toBe(atProvider.id);
    expect(job.status?.output).toEqual(atProvider.output);
  });
});
