// Builds the controller from the configuration: provider client, manager, health server.
import type { Logger } from "pino";
import { managementUrl, requireStrongCallbackSecrets, requireVars, type Env } from "../config/env.js";
import { rebuiltOnChange } from "../config/secret-files.js";
import { KubeApi } from "../k8s/api.js";
import { loadClusterConfig } from "../k8s/cluster-config.js";
import { GpuProviderClient } from "../provider/index.js";
import { startControllerHealthServer } from "../runtime/health.js";
import { Manager } from "./manager.js";
import { ControllerMetrics } from "./metrics.js";

export interface RunningController {
  manager: Manager;
  healthUrl: string;
  stop(): Promise<void>;
}

export async function runController(
  env: Env,
  log: Logger,
  opts: { kubeconfig?: string; onLeadershipLost?: () => void } = {},
): Promise<RunningController> {
  requireVars(env, ["GPU_PROVIDER_API_KEY", "CALLBACK_BASE_URL", "CALLBACK_SECRET"], "controller");
  requireStrongCallbackSecrets(env, "controller");
  const api = new KubeApi(await loadClusterConfig({ path: opts.kubeconfig }), {
    timeoutMs: env.KUBE_API_TIMEOUT_SECONDS * 1000,
  });
  const metrics = new ControllerMetrics();
  // Rebuilt with the current key after a rotation of its file (secret-files.ts). Its routing to
  // self-hosted endpoints reads the manager's cache, once the manager exists.
  const late: { manager?: Manager } = {};
  const provider = rebuiltOnChange(
    () => env.GPU_PROVIDER_API_KEY!,
    (apiKey) =>
      new GpuProviderClient({
        apiUrl: env.GPU_PROVIDER_API_URL,
        managementUrl: managementUrl(env),
        managementApi: env.GPU_PROVIDER_MANAGEMENT_API,
        apiKey,
        // Self-hosted endpoints (GpuEndpoint spec.baseUrl), read from the manager's cache.
        endpointBaseUrl: (id) => late.manager?.endpointBaseUrl(id),
        logger: log.child({ component: "gpu-provider" }),
        onCall: metrics.provider.onCall,
      }),
  );
  const manager: Manager = new Manager({
    api,
    provider,
    env,
    log,
    metrics,
    onLeadershipLost: opts.onLeadershipLost,
    leaseDurationMs: env.LEADER_ELECTION_LEASE_DURATION_SECONDS * 1000,
    renewDeadlineMs: env.LEADER_ELECTION_RENEW_DEADLINE_SECONDS * 1000,
    retryPeriodMs: env.LEADER_ELECTION_RETRY_PERIOD_SECONDS * 1000,
  });
  late.manager = manager;
  const health = await startControllerHealthServer(manager, env.WEBHOOKS_HOST, env.CONTROLLER_METRICS_PORT);
  await manager.start();
  log.info(
    { health: health.url, namespace: env.WATCH_NAMESPACE ?? "(all)", leaderElection: env.LEADER_ELECTION },
    "controller started",
  );
  return {
    manager,
    healthUrl: health.url,
    stop: async () => {
      await manager.stop();
      await new Promise<void>((r) => health.server.close(() => r()));
    },
  };
}
