// Builds the sidecar from the configuration: Kubernetes client, HTTP server, PaymentEvent GC.
import type { Logger } from "pino";
import { Registry } from "prom-client";
import { requireSidecarVars, type Env } from "../config/env.js";
import { rebuiltOnChange } from "../config/secret-files.js";
import { KubeApi } from "../k8s/api.js";
import { loadClusterConfig } from "../k8s/cluster-config.js";
import { GpuProviderClient } from "../provider/index.js";
import { ProviderMetrics } from "../provider/metrics.js";
import { startPaymentEventGc, whileControllerLeads } from "./gc.js";
import { WebhookMetrics } from "./metrics.js";
import { startWebhookServer, webhookNamespace } from "./server.js";

export interface RunningWebhooks {
  url: string;
  stop(): Promise<void>;
}

export async function runWebhooks(
  env: Env,
  log: Logger,
  opts: { kubeconfig?: string } = {},
): Promise<RunningWebhooks> {
  // Without CALLBACK_SECRET any callback token would be computable (the controller needs the same
  // value); without a signing secret every payment webhook would be refused; without the provider
  // key no GPU callback could be confirmed with the provider's status API (RunPod does not sign
  // callbacks).
  requireSidecarVars(env);
  const api = new KubeApi(await loadClusterConfig({ path: opts.kubeconfig }), {
    timeoutMs: env.KUBE_API_TIMEOUT_SECONDS * 1000,
  });
  const namespace = webhookNamespace(env);
  const registry = new Registry();
  const onCall = new ProviderMetrics(registry).onCall;
  // Rebuilt with the current key after a rotation of its file (secret-files.ts).
  const provider = rebuiltOnChange(
    () => env.GPU_PROVIDER_API_KEY!,
    (apiKey) =>
      new GpuProviderClient({
        apiUrl: env.GPU_PROVIDER_API_URL,
        apiKey,
        // A callback waits on this answer, and RunPod gives up on a slow receiver: short and few.
        timeoutMs: 5_000,
        retryBudgetMs: 8_000,
        logger: log.child({ component: "gpu-provider" }),
        onCall,
      }),
  );
  const server = await startWebhookServer({ api, env, log, registry, namespace, provider });
  const gc = startPaymentEventGc({
    api,
    namespace,
    retentionMs: env.PAYMENT_EVENT_RETENTION_HOURS * 3_600_000,
    log,
    metrics: new WebhookMetrics(registry),
    // One replica collects: the one whose controller (same pod) leads. See gc.ts.
    ...(env.LEADER_ELECTION && {
      shouldRun: whileControllerLeads(
        api,
        { namespace: env.LEADER_ELECTION_NAMESPACE, name: env.LEADER_ELECTION_ID },
        process.env.POD_NAME ?? process.env.HOSTNAME ?? "local",
      ),
    }),
  });
  log.info(
    { url: server.url, namespace, retentionHours: env.PAYMENT_EVENT_RETENTION_HOURS },
    "webhooks sidecar started",
  );
  return {
    url: server.url,
    stop: async () => {
      gc.stop();
      await server.close();
    },
  };
}
