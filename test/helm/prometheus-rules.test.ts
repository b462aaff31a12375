// The chart's PrometheusRule, checked with Prometheus's own promtool: `promtool check rules` on the
// rendered rules, and `promtool test rules` with a case per alert where it fires and one where it
// stays quiet (and, for an alert on a scrape target's health, one where the target is absent).
// Every alert carries a description naming a `kubectl media` command and a runbook_url at its own
// heading of docs/observability.md.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { REPO_ROOT } from "../support/controlplane.js";
import { helmBinary, helmTemplate, valuesFile } from "../support/helm.js";
import { promtool, promtoolBinary } from "../support/promtool.js";

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleSpec {
  groups: Array<{ name: string; rules: Rule[] }>;
}

const NS = "media";
const RUNBOOKS = "https://git.example.com/platform/media-orchestrator/blob/main/docs/observability.md";

/** GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as dashes. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");

/** One promtool test group: series in, the alerts expected at one time (none: it stays quiet). */
interface Case {
  alert: string;
  fires: boolean;
  series: Array<[string, string]>;
  at: string;
  /** Labels of the alert beyond the rule's own (those of the series it keeps). */
  labels?: Record<string, string>;
}

function cases(sel: string): Case[] {
  const s = (metric: string, labels = "") => `${metric}{${sel}${labels ? `, ${labels}` : ""}}`;
  return [
    {
      alert: "MediaOrchestratorNoLeader",
      fires: true,
      at: "10m",
      series: [[s("media_orchestrator_leader", 'pod="a"'), "0x15"]],
    },
    {
      alert: "MediaOrchestratorNoLeader",
      fires: true,
      at: "10m",
      // absent(): no controller is scraped at all; the alert keeps the selector's labels.
      series: [[s("up", 'pod="a"'), "1x15"]],
      labels: { namespace: NS },
    },
    {
      alert: "MediaOrchestratorNoLeader",
      fires: false,
      at: "10m",
      series: [
        [s("media_orchestrator_leader", 'pod="a"'), "1x15"],
        [s("media_orchestrator_leader", 'pod="b"'), "0x15"],
      ],
    },
    {
      alert: "MediaOrchestratorReconcileErrors",
      fires: true,
      at: "30m",
      series: [
        [s("media_orchestrator_reconcile_total", 'controller="mediajob", outcome="error"'), "0+12x40"],
      ],
    },
    {
      alert: "MediaOrchestratorReconcileErrors",
      fires: false,
      at: "30m",
      series: [
        [s("media_orchestrator_reconcile_total", 'controller="mediajob", outcome="error"'), "0+1x40"],
        [s("media_orchestrator_reconcile_total", 'controller="mediajob", outcome="success"'), "0+100x40"],
      ],
    },
    {
      alert: "MediaOrchestratorWebhooksDown",
      fires: true,
      at: "10m",
      series: [[s("up", 'endpoint="webhooks", pod="a"'), "0x15"]],
      labels: { namespace: NS, endpoint: "webhooks", pod: "a" },
    },
    {
      alert: "MediaOrchestratorWebhooksDown",
      fires: true,
      at: "10m",
      // absent(): no webhooks target is scraped at all (every pod gone), only the controller's.
      series: [[s("up", 'endpoint="metrics", pod="a"'), "1x15"]],
      labels: { namespace: NS, endpoint: "webhooks" },
    },
    {
      alert: "MediaOrchestratorWebhooksDown",
      fires: false,
      at: "10m",
      series: [
        [s("up", 'endpoint="webhooks", pod="a"'), "1x15"],
        [s("up", 'endpoint="metrics", pod="a"'), "0x15"],
      ],
    },
    {
      alert: "MediaOrchestratorJobsStuck",
      fires: true,
      at: "20m",
      series: [
        [s("media_orchestrator_mediajobs_stuck", 'workload="asr", pod="a"'), "2x30"],
        [s("media_orchestrator_mediajobs_stuck", 'workload="tts", pod="a"'), "0x30"],
      ],
      labels: { workload: "asr" },
    },
    {
      alert: "MediaOrchestratorJobsStuck",
      fires: false,
      at: "20m",
      series: [[s("media_orchestrator_mediajobs_stuck", 'workload="asr", pod="a"'), "0x10 1x5 0x15"]],
    },
    {
      alert: "MediaOrchestratorJobRunningAfterCancel",
      fires: true,
      at: "10m",
      series: [
        [s("media_orchestrator_mediajobs_running_after_cancel", 'workload="render", pod="a"'), "1x15"],
        [s("media_orchestrator_mediajobs_running_after_cancel", 'workload="asr", pod="a"'), "0x15"],
      ],
      labels: { workload: "render" },
    },
    {
      alert: "MediaOrchestratorJobRunningAfterCancel",
      fires: false,
      at: "10m",
      // Ended at the provider within the alert's 5 minutes.
      series: [
        [s("media_orchestrator_mediajobs_running_after_cancel", 'workload="render", pod="a"'), "0x4 1x3 0x8"],
      ],
    },
    {
      alert: "MediaOrchestratorSubmissionsFailing",
      fires: true,
      at: "30m",
      series: [
        [s("media_orchestrator_submissions_total", 'outcome="accepted"'), "0+10x40"],
        [s("media_orchestrator_submissions_total", 'outcome="refused"'), "0+10x40"],
      ],
    },
    {
      alert: "MediaOrchestratorSubmissionsFailing",
      fires: false,
      at: "30m",
      series: [
        [s("media_orchestrator_submissions_total", 'outcome="accepted"'), "0+10x40"],
        [s("media_orchestrator_submissions_total", 'outcome="refused"'), "0+1x40"],
        [s("media_orchestrator_submissions_total", 'outcome="fenced"'), "0+50x40"],
      ],
    },
    {
      alert: "MediaOrchestratorProviderKeyInvalid",
      fires: true,
      at: "10m",
      series: [
        [
          s(
            "media_orchestrator_gpuendpoints",
            'workload="asr", condition="CredentialsValid", status="False", reason="InvalidApiKey", pod="a"',
          ),
          "1x15",
        ],
      ],
      labels: { reason: "InvalidApiKey" },
    },
    {
      alert: "MediaOrchestratorProviderKeyInvalid",
      fires: false,
      at: "10m",
      series: [
        [
          s(
            "media_orchestrator_gpuendpoints",
            'workload="asr", condition="CredentialsValid", status="True", reason="KeyValid", pod="a"',
          ),
          "1x15",
        ],
      ],
    },
    {
      alert: "MediaOrchestratorEndpointNotReady",
      fires: true,
      at: "20m",
      series: [
        [
          s(
            "media_orchestrator_gpuendpoints",
            'workload="tts", condition="Ready", status="False", reason="ENDPOINT_NOT_FOUND", pod="a"',
          ),
          "1x30",
        ],
      ],
      labels: { workload: "tts", reason: "ENDPOINT_NOT_FOUND" },
    },
    {
      alert: "MediaOrchestratorEndpointNotReady",
      fires: false,
      at: "20m",
      series: [
        [
          s(
            "media_orchestrator_gpuendpoints",
            'workload="tts", condition="Ready", status="True", reason="Ready", pod="a"',
          ),
          "1x30",
        ],
        [
          s(
            "media_orchestrator_gpuendpoints",
            'workload="tts", condition="Ready", status="False", reason="ENDPOINT_NOT_FOUND", pod="a"',
          ),
          "0x30",
        ],
      ],
    },
    {
      alert: "MediaOrchestratorWorkQueueGrowing",
      fires: true,
      at: "50m",
      series: [[s("workqueue_depth", 'name="mediajob", pod="a"'), "0+2x60"]],
      labels: { name: "mediajob" },
    },
    {
      alert: "MediaOrchestratorWorkQueueGrowing",
      fires: false,
      at: "50m",
      series: [[s("workqueue_depth", 'name="mediajob", pod="a"'), "50x60"]],
    },
    {
      alert: "MediaOrchestratorWorkQueueGrowing",
      fires: false,
      at: "50m",
      series: [[s("workqueue_depth", 'name="mediajob", pod="a"'), "0+0.1x60"]],
    },
    {
      alert: "MediaOrchestratorCallbackAdoptionHeld",
      fires: true,
      at: "20m",
      series: [
        [
          s("media_orchestrator_webhooks_callback_adoptions_total", 'outcome="adopted", pod="a"'),
          "0x10 1x30",
        ],
      ],
    },
    {
      alert: "MediaOrchestratorCallbackAdoptionHeld",
      fires: false,
      at: "20m",
      // A forged callback refused because another job holds the provider id: nothing waits.
      series: [
        [
          s(
            "media_orchestrator_webhooks_callback_adoptions_total",
            'outcome="refused_recorded_elsewhere", pod="a"',
          ),
          "0x10 1x30",
        ],
      ],
    },
    {
      alert: "MediaOrchestratorCallbacksUnauthorized",
      fires: true,
      at: "30m",
      series: [
        [
          s(
            "media_orchestrator_webhooks_requests_total",
            'route="/reports/gpu_provider", code="401", outcome="unauthorized", pod="a"',
          ),
          "0+30x40",
        ],
      ],
    },
    {
      alert: "MediaOrchestratorCallbacksUnauthorized",
      fires: false,
      at: "30m",
      // Late callbacks of an earlier attempt are refused as superseded: normal, not an attack.
      series: [
        [
          s(
            "media_orchestrator_webhooks_requests_total",
            'route="/reports/gpu_provider", code="401", outcome="superseded", pod="a"',
          ),
          "0+30x40",
        ],
      ],
    },
    {
      alert: "MediaOrchestratorPaymentSignatureFailures",
      fires: true,
      at: "30m",
      series: [
        [s("media_orchestrator_webhooks_signature_failures_total", 'reason="mismatch", pod="a"'), "0+6x40"],
      ],
    },
    {
      alert: "MediaOrchestratorPaymentSignatureFailures",
      fires: false,
      at: "30m",
      series: [
        [s("media_orchestrator_webhooks_signature_failures_total", 'reason="mismatch", pod="a"'), "0x40"],
      ],
    },
    {
      alert: "MediaOrchestratorUsageBacklogOld",
      fires: true,
      at: "30m",
      // The leader's gauge grows a minute a minute from 55 minutes; a follower's stays 0.
      series: [
        [s("media_orchestrator_usage_unreported_oldest_seconds", 'pod="a"'), "3300+60x40"],
        [s("media_orchestrator_usage_unreported_oldest_seconds", 'pod="b"'), "0x40"],
      ],
    },
    {
      alert: "MediaOrchestratorUsageBacklogOld",
      fires: false,
      at: "30m",
      // A backlog that drains within the hour (a short outage) stays quiet.
      series: [[s("media_orchestrator_usage_unreported_oldest_seconds", 'pod="a"'), "600+60x20 0x20"]],
    },
    {
      alert: "MediaOrchestratorUsageAccountMissing",
      fires: true,
      at: "30m",
      series: [
        [s("media_orchestrator_usage_account_missing", 'pod="a"'), "0x5 3x35"],
        [s("media_orchestrator_usage_account_missing", 'pod="b"'), "0x40"],
      ],
    },
    {
      alert: "MediaOrchestratorUsageAccountMissing",
      fires: false,
      at: "30m",
      // An account recreated within minutes (its jobs counted then) stays quiet.
      series: [[s("media_orchestrator_usage_account_missing", 'pod="a"'), "0x5 3x5 0x30"]],
    },
    {
      alert: "MediaOrchestratorMeterEventsRefused",
      fires: true,
      at: "20m",
      series: [
        [
          s(
            "media_orchestrator_webhooks_payment_events_total",
            'type="v1.billing.meter.error_report_triggered", outcome="Processed", pod="a"',
          ),
          "0x10 1x30",
        ],
      ],
    },
    {
      alert: "MediaOrchestratorMeterEventsRefused",
      fires: false,
      at: "20m",
      // Subscription events alone: nothing refused.
      series: [
        [
          s(
            "media_orchestrator_webhooks_payment_events_total",
            'type="customer.subscription.updated", outcome="Processed", pod="a"',
          ),
          "0x10 1x30",
        ],
      ],
    },
    {
      alert: "MediaOrchestratorMeterMisconfigured",
      fires: true,
      at: "20m",
      // The gauge is every replica's (each checks): one alert per event name, not per pod.
      series: [
        [s("media_orchestrator_usage_meter_misconfigured", 'event_name="gpu_seconds", pod="a"'), "0x5 1x30"],
        [s("media_orchestrator_usage_meter_misconfigured", 'event_name="gpu_seconds", pod="b"'), "0x5 1x30"],
        [s("media_orchestrator_usage_meter_misconfigured", 'event_name="render_seconds", pod="a"'), "0x40"],
      ],
      labels: { event_name: "gpu_seconds" },
    },
    {
      alert: "MediaOrchestratorMeterMisconfigured",
      fires: false,
      at: "20m",
      // Fixed within minutes (a meter replaced): quiet.
      series: [
        [
          s("media_orchestrator_usage_meter_misconfigured", 'event_name="gpu_seconds", pod="a"'),
          "0x5 1x3 0x30",
        ],
      ],
    },
    {
      alert: "MediaOrchestratorCostRecoveryLow",
      fires: true,
      at: "90m",
      // One account charged half its provider cost for over an hour; another well above.
      series: [
        [s("media_orchestrator_cost_recovery_ratio", 'account="cus_sparse", pod="a"'), "0.5x100"],
        [s("media_orchestrator_cost_recovery_ratio", 'account="cus_busy", pod="a"'), "3x100"],
      ],
      labels: { account: "cus_sparse" },
    },
    {
      alert: "MediaOrchestratorCostRecoveryLow",
      fires: false,
      at: "90m",
      // Under the floor for half an hour only.
      series: [[s("media_orchestrator_cost_recovery_ratio", 'account="cus_sparse", pod="a"'), "2x60 0.5x30"]],
    },
  ];
}

/** Alertmanager-style expansion of the annotations, for the {{ $labels.x }} the rules use. */
function expand(text: string, labels: Record<string, string>): string {
  return text.replace(/\{\{\s*\$labels\.(\w+)\s*\}\}/g, (_m, k: string) => labels[k] ?? "");
}

describe("the chart's PrometheusRule, with promtool", () => {
  let dir: string;
  let spec: RuleSpec;
  let rules: Rule[];
  let sel: string;

  beforeAll(() => {
    helmBinary();
    promtoolBinary();
    const objs = helmTemplate("mo", NS, [
      "-f",
      valuesFile("values-dev.yaml"),
      "--set",
      "prometheusRule.enabled=true",
      "--set",
      "prometheusRule.skipCapabilityCheck=true",
      "--set",
      `prometheusRule.runbookBaseUrl=${RUNBOOKS}`,
    ]);
    const rule = objs.find((o) => o.kind === "PrometheusRule");
    if (!rule) throw new Error("no PrometheusRule rendered");
    spec = rule.spec as RuleSpec;
    rules = spec.groups.flatMap((g) => g.rules);
    sel = `namespace="${NS}", service="${rule.metadata.name}"`;
    dir = mkdtempSync(join(tmpdir(), "mo-rules-"));
    writeFileSync(join(dir, "rules.yaml"), stringify(spec));
  }, 900_000);

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("passes promtool check rules", () => {
    const res = promtool(["check", "rules", "rules.yaml"], dir);
    expect(res.stderr + res.stdout).toContain("SUCCESS");
    expect(res.status).toBe(0);
  });

  it("gives every alert a severity, a description naming a kubectl media command, and a runbook_url of its own", () => {
    const alerts = rules.filter((r) => r.alert);
    expect(alerts.length).toBeGreaterThanOrEqual(10);
    const headings = new Set(
      [...readFileSync(join(REPO_ROOT, "docs/observability.md"), "utf8").matchAll(/^#{1,6} (.+)$/gm)].map(
        (m) => anchor(m[1]!),
      ),
    );
    const urls = new Set<string>();
    for (const r of alerts) {
      expect(r.labels?.severity, r.alert).toMatch(/^(warning|critical)$/);
      expect(r.annotations?.summary, r.alert).toBeTruthy();
      expect(r.annotations?.description, r.alert).toMatch(/'kubectl media [a-z-]+/);
      // The conventional annotation names (kube-prometheus's, Alertmanager templates' and
      // Grafana's), not free text under a name nothing reads.
      expect(Object.keys(r.annotations ?? {}).sort(), r.alert).toEqual([
        "description",
        "runbook_url",
        "summary",
      ]);
      const url = r.annotations!.runbook_url!;
      expect(url.startsWith(`${RUNBOOKS}#`), r.alert).toBe(true);
      const [, fragment] = url.split("#");
      expect(headings.has(fragment!), `${r.alert}: docs/observability.md has a heading #${fragment}`).toBe(
        true,
      );
      urls.add(url);
    }
    expect(urls.size).toBe(alerts.length); // one page section per alert
  });

  it("every alert on a scrape target's health also fires when the target is absent", () => {
    // The alerts whose subject is a target being up: their expression must cover absence.
    for (const name of ["MediaOrchestratorNoLeader", "MediaOrchestratorWebhooksDown"]) {
      const rule = rules.find((r) => r.alert === name)!;
      expect(rule.expr, name).toMatch(/absent(_over_time)?\(/);
    }
    for (const r of rules.filter((x) => x.alert && /\bup\{/.test(x.expr)))
      expect(r.expr, r.alert).toMatch(/absent(_over_time)?\(/);
    // promtool proves each fires on absence (the cases with no series of the target, below).
    const absentCases = cases(sel).filter(
      (c) =>
        c.fires && c.labels?.namespace === NS && !c.series.some(([series]) => series.includes("webhooks")),
    );
    expect(absentCases.map((c) => c.alert).sort()).toEqual([
      "MediaOrchestratorNoLeader",
      "MediaOrchestratorWebhooksDown",
    ]);
  });

  it("passes promtool test rules: each alert fires when it should and stays quiet when not", () => {
    const all = cases(sel);
    const byName = new Map(rules.filter((r) => r.alert).map((r) => [r.alert!, r]));
    for (const name of byName.keys()) {
      expect(
        all.some((c) => c.alert === name && c.fires),
        `${name} has a case where it fires`,
      ).toBe(true);
      expect(
        all.some((c) => c.alert === name && !c.fires),
        `${name} has a case where it stays quiet`,
      ).toBe(true);
    }
    const tests = all.map((c) => {
      const rule = byName.get(c.alert);
      if (!rule) throw new Error(`no alert ${c.alert} in the rules`);
      const labels = { ...rule.labels, ...c.labels };
      const annotations = Object.fromEntries(
        Object.entries(rule.annotations ?? {}).map(([k, v]) => [k, expand(v, { ...labels, service: "" })]),
      );
      const service = /service="([^"]+)"/.exec(sel)![1]!;
      if (c.labels?.namespace) labels.service = service;
      return {
        interval: "1m",
        input_series: c.series.map(([series, values]) => ({ series, values })),
        alert_rule_test: [
          {
            eval_time: c.at,
            alertname: c.alert,
            exp_alerts: c.fires ? [{ exp_labels: labels, exp_annotations: annotations }] : [],
          },
        ],
      };
    });
    writeFileSync(join(dir, "tests.yaml"), stringify({ rule_files: ["rules.yaml"], tests }));
    const res = promtool(["test", "rules", "tests.yaml"], dir);
    expect(res.stdout + res.stderr).toContain("SUCCESS");
    expect(res.status).toBe(0);
  });
});
