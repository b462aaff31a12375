// The metrics the chart's dashboard and alerts use exist: the controller and the sidecar run as
// their processes do (runController, runWebhooks) against the real control plane and the simulator,
// the demo's scenario and a few failures go through them, then both /metrics are scraped. Every
// metric and label the dashboard and the PrometheusRule name must be among those exposed, and no
// exposed label may carry a job's name or id.
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runController, type RunningController } from "../../src/controller/run.js";
import { KubeApi } from "../../src/k8s/api.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { runWebhooks, type RunningWebhooks } from "../../src/webhooks/run.js";
import { applyManifests } from "../../scripts/devstack-lib.js";
import { PIPELINE, runDemoScenario } from "../../scripts/demo-scenario.js";
import { seedSampleMedia } from "../../scripts/sample-media.js";
import { openStore } from "../../src/storage/index.js";
import { startS3Server, type S3Server } from "../support/s3server.js";
import { storeEnv } from "../support/s3store.js";
import { REPO_ROOT } from "../support/controlplane.js";
import { CHART_DIR, helmTemplate, valuesFile } from "../support/helm.js";
import { createTestNamespace, eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import {
  mediaJob,
  startTestSimulator,
  testEnv,
  testLogger,
  waitForPhase,
  waitForReady,
} from "../support/stack.js";
import { exposition, promqlReferences, type Exposed } from "../support/promql.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";
let sim: Simulator;
let sidecar: RunningWebhooks;
let controller: RunningController;
let exposed: Exposed;
let s3: S3Server;
const BUCKET = "media-metrics";

/** Labels Prometheus gives every scraped series (the ServiceMonitor's target labels). */
const TARGET_LABELS = new Set(["namespace", "service", "pod", "endpoint", "job", "instance", "container"]);

async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  return res.text();
}

const simulator = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${sim.url}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  expect(res.ok).toBe(true);
};

beforeAll(async () => {
  ns = await createTestNamespace(kc, "metrics");
  // The demo's pipeline moves its media through the object store, as in dev-up.
  s3 = await startS3Server();
  const storage = storeEnv(s3, BUCKET);
  const store = (await openStore(storage))!;
  await store.client.createBucket();
  await seedSampleMedia(store.client, ns);
  store.client.close();
  sim = await startTestSimulator({
    endpoints: ["asr", "tts", "render"].map((w) => ({
      name: `media-${w}-dev`,
      workload: w as "asr",
      workersMax: 3,
    })),
  });
  const base = testEnv(ns, {
    GPU_PROVIDER_API_URL: sim.url,
    MEDIA_ENV: "dev",
    WEBHOOKS_HOST: "127.0.0.1",
    WEBHOOKS_PORT: "0",
    CONTROLLER_METRICS_PORT: "0",
    LEADER_ELECTION: "true",
    // The cost loop every second, with a price: its recovery ratio per account is exposed.
    COST_RECONCILE_INTERVAL_SECONDS: "1",
    COST_PRICE_PER_SECOND_MICROS: "200",
    ...Object.fromEntries(Object.entries(storage).filter(([, v]) => v !== undefined)),
  });
  const kubeconfig = testKubeconfigPath();
  sidecar = await runWebhooks(base, testLogger(), { kubeconfig });
  sim.setPaymentWebhook({
    url: `${sidecar.url}/webhooks/payment_provider`,
    secret: base.PAYMENT_PROVIDER_WEBHOOK_SECRET!,
  });
  controller = await runController({ ...base, CALLBACK_BASE_URL: sidecar.url }, testLogger(), {
    kubeconfig,
  });
  await applyManifests(api, ns, join(REPO_ROOT, "config/samples/gpuendpoints.yaml"));
  for (const w of ["asr", "tts", "render"]) await waitForReady(api, ns, w);

  // The demo: a pipeline, a payment event and its replay, a lost callback recovered.
  const summary = await runDemoScenario({
    api,
    namespace: ns,
    simulatorUrl: sim.url,
    bucket: BUCKET,
    timeoutMs: 90_000,
  });
  expect(summary.steps.map((s) => s.phase)).toEqual(PIPELINE.map(() => "Completed"));

  // A job the provider fails.
  await simulator("PUT", "/_sim/faults", { failJob: 1 });
  await api.create("mediajobs", ns, mediaJob("fails", { workload: "asr", input: {} }) as never);
  await waitForPhase(api, ns, "fails", "Failed");
  // A next pipeline step whose name is taken: the reconcile fails and is retried with backoff.
  await simulator("PUT", "/_sim/faults", {});
  await api.create("mediajobs", ns, mediaJob("taken-1-tts", { workload: "tts", input: {} }) as never);
  await api.create(
    "mediajobs",
    ns,
    mediaJob("taken", { workload: "asr", input: {}, then: [{ workload: "tts" }] }) as never,
  );
  // The provider's rate limit: 429s while the controller polls the endpoints.
  await simulator("PUT", "/_sim/faults", { rateLimit: { requestsPerSecond: 0.5 } });
  // Forged traffic: a callback without a token, a payment event with a wrong signature.
  const forged = await fetch(`${sidecar.url}/reports/gpu_provider`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ id: "x", status: "COMPLETED" }),
  });
  expect(forged.status).toBe(401);
  const body = JSON.stringify({ id: "evt_forged", type: "customer.subscription.created", created: 1 });
  const t = Math.floor(Date.now() / 1000);
  const wrong = createHmac("sha256", "not-the-secret").update(`${t}.${body}`).digest("hex");
  const refused = await fetch(`${sidecar.url}/webhooks/payment_provider`, {
    method: "POST",
    headers: { "content-type": "application/json", "stripe-signature": `t=${t},v1=${wrong}` },
    body,
  });
  expect(refused.status).toBe(400);

  let last = "";
  await eventually(
    async () => {
      last = await scrape(controller.healthUrl);
      return (
        last.includes("media_orchestrator_provider_rate_limited_total{") &&
        last.includes("media_orchestrator_cost_recovery_ratio{") &&
        /workqueue_retries_total\{name="mediajob"\} [1-9]/.test(last)
      );
    },
    {
      timeoutMs: 60_000,
      message: () =>
        `no 429 or no retry yet:\n${last
          .split("\n")
          .filter((l) => /rate_limited|retries|provider_requests/.test(l))
          .join("\n")}`,
    },
  );
  await simulator("PUT", "/_sim/faults", {});
  exposed = exposition(await scrape(controller.healthUrl), await scrape(sidecar.url));
}, 240_000);

afterAll(async () => {
  await controller?.stop();
  await s3?.stop();
  await sidecar?.stop();
  await sim?.close();
});

function check(source: string, expr: string, extraLabels: string[] = []): string[] {
  const problems: string[] = [];
  const refs = promqlReferences(expr);
  const known = (metric: string) => metric === "up" || exposed.names.has(metric);
  const labelsOf = (metric: string) => exposed.labels.get(metric) ?? new Set<string>();
  for (const m of refs.metrics) if (!known(m)) problems.push(`${source}: metric ${m} is not exposed`);
  for (const [m, labels] of refs.matchers) {
    for (const l of labels)
      if (!TARGET_LABELS.has(l) && !labelsOf(m).has(l) && known(m))
        problems.push(`${source}: ${m} has no label ${l}`);
  }
  for (const l of [...refs.grouping, ...extraLabels]) {
    if (TARGET_LABELS.has(l)) continue;
    if (![...refs.metrics].some((m) => labelsOf(m).has(l)))
      problems.push(`${source}: no metric of the expression has the label ${l}`);
  }
  return problems;
}

describe("the metrics the dashboard and the alerts use", () => {
  it("are exposed, with the labels they are queried by", () => {
    const dashboard = JSON.parse(readFileSync(join(CHART_DIR, "files/grafana-dashboard.json"), "utf8")) as {
      panels: Array<{ title: string; targets?: Array<{ expr: string; legendFormat?: string }> }>;
    };
    const problems: string[] = [];
    let exprs = 0;
    for (const panel of dashboard.panels) {
      for (const t of panel.targets ?? []) {
        exprs++;
        const legend = [...(t.legendFormat ?? "").matchAll(/\{\{\s*(\w+)\s*\}\}/g)].map((m) => m[1]!);
        problems.push(...check(`dashboard "${panel.title}"`, t.expr, legend));
      }
    }
    const rule = helmTemplate("mo", ns, [
      "-f",
      valuesFile("values-dev.yaml"),
      "--set",
      "prometheusRule.enabled=true",
      "--set",
      "prometheusRule.skipCapabilityCheck=true",
      "--set",
      "prometheusRule.runbookBaseUrl=https://git.example.com/media-orchestrator/blob/main/docs/observability.md",
    ]).find((o) => o.kind === "PrometheusRule")!;
    const rules = (
      rule.spec as {
        groups: Array<{
          rules: Array<{ alert: string; expr: string; annotations?: Record<string, string> }>;
        }>;
      }
    ).groups.flatMap((g) => g.rules);
    for (const r of rules) {
      exprs++;
      const used = [
        ...Object.values(r.annotations ?? {})
          .join(" ")
          .matchAll(/\$labels\.(\w+)/g),
      ].map((m) => m[1]!);
      problems.push(...check(`alert ${r.alert}`, r.expr, used));
    }
    expect(exprs).toBeGreaterThan(30);
    expect(problems).toEqual([]);
  });

  it("carry no label whose values grow with the number of jobs", () => {
    const jobNames = [...PIPELINE, "fails", "taken", "taken-1-tts"];
    const offending = exposed.samples.filter((s) =>
      Object.values(s.labels).some(
        (v) => jobNames.some((n) => v.includes(n)) || /[0-9a-f]{8}-[0-9a-f]{4}-/.test(v),
      ),
    );
    expect(offending.map((s) => s.line)).toEqual([]);
    // The label names a job could hide in are not used at all.
    const forbidden = ["name_of_job", "job_id", "jobId", "id", "uid", "mediajob", "key"];
    for (const [metric, labels] of exposed.labels)
      for (const l of forbidden) expect(labels.has(l), `${metric} has the label ${l}`).toBe(false);
  });

  it("include the recoveries, failures, latencies, provider calls and queue metrics of the run", () => {
    for (const name of [
      "media_orchestrator_recoveries_total",
      "media_orchestrator_mediajob_failures_total",
      "media_orchestrator_mediajob_creation_to_submission_seconds_bucket",
      "media_orchestrator_mediajob_submission_to_terminal_seconds_bucket",
      "media_orchestrator_provider_requests_total",
      "media_orchestrator_provider_rate_limited_total",
      "media_orchestrator_webhooks_payment_events_total",
      "workqueue_depth",
      "workqueue_adds_total",
      "workqueue_retries_total",
      "media_orchestrator_leader_changes_total",
    ])
      expect(
        exposed.samples.some((s) => s.name === name),
        name,
      ).toBe(true);
    const sample = (name: string, labels: Record<string, string>) =>
      exposed.samples.find(
        (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
      );
    // Both APIs of the provider are counted: the job API and the management API (REST v2 here).
    expect(
      sample("media_orchestrator_provider_requests_total", {
        api: "job",
        operation: "submit",
        outcome: "ok",
      }),
    ).toBeDefined();
    expect(
      sample("media_orchestrator_provider_requests_total", { api: "management", outcome: "ok" }),
    ).toBeDefined();
    expect(
      sample("media_orchestrator_recoveries_total", { kind: "missed_callback" })?.value,
    ).toBeGreaterThanOrEqual(1);
    expect(
      sample("media_orchestrator_mediajob_failures_total", { workload: "asr", reason: "FAILED" })?.value,
    ).toBe(1);
    expect(
      sample("media_orchestrator_webhooks_payment_events_total", {
        type: "customer.subscription.created",
        outcome: "Processed",
      })?.value,
    ).toBeGreaterThanOrEqual(1);
    expect(
      sample("media_orchestrator_mediajobs", { phase: "Completed", workload: "render" })?.value,
    ).toBeGreaterThanOrEqual(1);
  });
});
