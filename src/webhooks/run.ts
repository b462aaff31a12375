// Builds the sidecar from the configuration: Kubernetes client, HTTP server, PaymentEvent GC.
import type { Logger } from "pino";
import { Registry } from "prom-client";
import { requireVars, type Env } from "../config/env.js";
import { KubeApi } from "../k8s/api.js";
import { loadKubeConfig } from "../k8s/config.js";
import { startPaymentEventGc } from "./gc.js";
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
  // Without it any callback token would be computable; the controller needs the same value.
  requireVars(env, ["CALLBACK_SECRET"], "webhooks sidecar");
  const api = new KubeApi(loadKubeConfig({ path: opts.kubeconfig }), {
    timeoutMs: env.KUBE_API_TIMEOUT_SECONDS * 1000,
  });
  const namespace = webhookNamespace(env);
  const registry = new Registry();
  const server = await startWebhookServer({ api, env, log, registry, namespace });
  const gc = startPaymentEventGc({
    api,
    namespace,
    retentionMs: env.PAYMENT_EVENT_RETENTION_HOURS * 3_600_000,
    log,
    metrics: new WebhookMetrics(registry),
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
