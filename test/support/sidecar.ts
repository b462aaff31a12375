// The webhooks sidecar under test alone (no controller), over real HTTP against the real control
// plane: a namespace of its own, its env, the provider simulator whose status API confirms GPU
// callbacks, and jobs there whose callbacks a test sends.
import type { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll } from "vitest";
import type { Env } from "../../src/config/env.js";
import { KubeApi } from "../../src/k8s/api.js";
import {
  startWebhookServer,
  type RunningWebhookServer,
  type WebhookServerOptions,
} from "../../src/webhooks/server.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { CallbackJobs, simulatorClient } from "./callbacks.js";
import { createTestNamespace } from "./kube.js";
import { startTestSimulator, testEnv, testLogger } from "./stack.js";

export interface SidecarTestBed {
  ns: string;
  env: Env;
  sim: Simulator;
  jobs: CallbackJobs;
  /** A sidecar on a free port of 127.0.0.1 with the bed's env (`opts` over it), closed after the tests. */
  start(opts?: Partial<WebhookServerOptions>): Promise<RunningWebhookServer>;
}

/**
 * The bed of the enclosing test file: set up before its tests, and the sidecars it started and
 * the simulator stopped after them. The fields are filled in before the tests run, so tests read
 * them (`bed.ns`) as they run, never at load.
 */
export function sidecarTestBed(kc: KubeConfig, name: string): SidecarTestBed {
  const api = new KubeApi(kc);
  const servers: RunningWebhookServer[] = [];
  const bed = {
    start: async (opts: Partial<WebhookServerOptions> = {}) => {
      const s = await startWebhookServer({
        api,
        env: bed.env,
        log: testLogger(),
        namespace: bed.ns,
        host: "127.0.0.1",
        port: 0,
        provider: simulatorClient(bed.sim),
        ...opts,
      });
      servers.push(s);
      return s;
    },
  } as SidecarTestBed;
  beforeAll(async () => {
    bed.ns = await createTestNamespace(kc, name);
    bed.env = testEnv(bed.ns);
    bed.sim = await startTestSimulator();
    bed.jobs = new CallbackJobs({ api, namespace: bed.ns, secret: bed.env.CALLBACK_SECRET!, sim: bed.sim });
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    await bed.sim?.close();
  });
  return bed;
}
