// A leader whose connection to the apiserver stalls while the GPU provider is still reachable must
// stop submitting before its lease could be taken: renews have a deadline shorter than the lease,
// a watchdog steps down on time whatever the stalled request does, and the fence is checked
// immediately before every submission. The new leader then finishes the work, each job once.
import { KubeConfig } from "@kubernetes/client-node";
import { createServer, connect, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Manager } from "../../src/controller/manager.js";
import { KubeApi } from "../../src/k8s/api.js";
import { GpuProviderClient, type SubmitRequest } from "../../src/provider/index.js";
import type { Simulator } from "../../tools/simulator/server.js";
import type { RunningWebhookServer } from "../../src/webhooks/server.js";
import { createTestNamespace, eventually, testKubeConfig } from "../support/kube.js";
import {
  gpuEndpoint,
  mediaJob,
  startManager,
  startTestSidecar,
  startTestSimulator,
  testEnv,
  waitForPhase,
  waitForReady,
} from "../support/stack.js";

const LEASE = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 300 };

/** A TCP proxy to the apiserver that can stall: bytes stop flowing both ways, nothing is closed. */
class StallingProxy {
  private stalled = false;
  private readonly sockets = new Set<Socket>();
  readonly server: Server;

  constructor(target: URL) {
    this.server = createServer((client) => {
      const upstream = connect(Number(target.port), target.hostname);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on("error", () => undefined);
        s.on("close", () => this.sockets.delete(s));
      }
      client.pipe(upstream);
      upstream.pipe(client);
      if (this.stalled) this.stall();
    });
  }

  listen(): Promise<number> {
    return new Promise((r) =>
      this.server.listen(0, "127.0.0.1", () => r((this.server.address() as { port: number }).port)),
    );
  }

  stall(): void {
    this.stalled = true;
    for (const s of this.sockets) s.pause();
  }

  close(): void {
    for (const s of this.sockets) s.destroy();
    this.server.close();
  }
}

/** Records when this replica's submissions left for the provider. */
class RecordingClient extends GpuProviderClient {
  readonly sentAt: number[] = [];
  override submit(endpointId: string, req: SubmitRequest, opts?: { signal?: AbortSignal }) {
    this.sentAt.push(Date.now());
    return super.submit(endpointId, req, opts);
  }
}

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let sim: Simulator;
let sidecar: RunningWebhookServer;
let proxy: StallingProxy;
let a: Manager;
let b: Manager;
let aProvider: RecordingClient;

beforeAll(async () => {
  ns = await createTestNamespace(kc, "fenced");
  sim = await startTestSimulator({ executionMs: 30_000 });
  const env = testEnv(ns, {
    GPU_PROVIDER_API_URL: sim.url,
    LEADER_ELECTION: "true",
    // Submissions the stalled leader began and could not record wait this long for their callback.
    CALLBACK_CONFIRMATION_SECONDS: "3",
    // An intent the deposed leader wrote and never sent looks like a lost answer to the new leader;
    // this test is about the fence, so such jobs are sent again past their deadline (at least once)
    // rather than failed as the default policy does (test/controller/unconfirmed.test.ts).
    UNCONFIRMED_SUBMISSION_POLICY: "resubmit",
    WEBHOOKS_HOST: "127.0.0.1",
    WEBHOOKS_PORT: "0",
  });
  sidecar = await startTestSidecar(api, env, ns, sim);
  proxy = new StallingProxy(new URL(kc.getCurrentCluster()!.server));
  const port = await proxy.listen();
  const stallable = new KubeConfig();
  stallable.loadFromString(kc.exportConfig());
  const cluster = stallable.getCurrentCluster()!;
  stallable.clusters = stallable.clusters.map((c) =>
    c.name === cluster.name ? { ...c, server: `https://127.0.0.1:${port}` } : c,
  );
  aProvider = new RecordingClient({ apiUrl: sim.url, apiKey: env.GPU_PROVIDER_API_KEY!, timeoutMs: 5_000 });
  const withCallbacks = { ...env, CALLBACK_BASE_URL: sidecar.url };
  a = startManager(stallable, sim, withCallbacks, { identity: "replica-a", provider: aProvider, ...LEASE });
  await a.start();
  await eventually(() => a.isLeader);
  b = startManager(kc, sim, withCallbacks, { identity: "replica-b", ...LEASE });
  await b.start();
  for (const w of ["asr", "tts", "render"]) {
    await api.create("gpuendpoints", ns, gpuEndpoint(w, { workload: w }) as never);
    await waitForReady(api, ns, w);
  }
});

afterAll(async () => {
  proxy?.close();
  await Promise.all([a?.stop().catch(() => undefined), b?.stop()]);
  await sidecar?.close();
  await sim?.close();
});

describe("a leader cut off from the apiserver", () => {
  it("makes no submission after its lease could have been taken; the new leader runs each job once", async () => {
    const names = Array.from({ length: 12 }, (_, i) => `fenced-${i}`);
    // The provider rate-limits, so the leader's submissions queue up and retry (429 is retried:
    // the provider refused them): some are still waiting when the stall begins.
    sim.setFaults({ rateLimit: { requestsPerSecond: 2 } });
    await Promise.all(
      names
        .slice(0, 6)
        .map((n) =>
          api.create("mediajobs", ns, mediaJob(n, { workload: "asr", id: n, timeoutSeconds: 1 }) as never),
        ),
    );
    await eventually(() => aProvider.sentAt.length > 0);
    const stalledAt = Date.now();
    proxy.stall();
    for (const n of names.slice(6))
      await api.create("mediajobs", ns, mediaJob(n, { workload: "tts", id: n, timeoutSeconds: 1 }) as never);

    await eventually(() => !a.isLeader && b.isLeader, { timeoutMs: 15_000 });
    sim.setFaults({});
    for (const n of names) sim.releaseJob(n);
    for (const n of names) await waitForPhase(api, ns, n, "Completed", 60_000);

    // The stalled replica could not have been replaced before stalledAt + leaseDuration.
    const late = aProvider.sentAt.filter((t) => t >= stalledAt + LEASE.leaseDurationMs);
    expect(late).toEqual([]);
    for (const n of names) expect(sim.executions(n), n).toBe(1);
  }, 120_000);
});
