// The metrics' own logic: controller-runtime's work queue metrics, the gauges read from the caches,
// what a job's watch events count, and the provider client's per-attempt observations. Values are
// read back from the Prometheus text, as a scrape would see them.
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { makeGpuEndpoint, makeMediaJob } from "../support/builders.js";
import { ResourceMetrics, failureReason } from "../../src/controller/resource-metrics.js";
import { ReconcileMetrics } from "../../src/runtime/reconcile-metrics.js";
import { WorkQueue } from "../../src/runtime/workqueue.js";
import { WorkQueueMetrics } from "../../src/runtime/workqueue-metrics.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { callApi, observed, type ProviderCall } from "../../src/provider/calls.js";
import { ProviderError } from "../../src/provider/errors.js";
import { ProviderMetrics } from "../../src/provider/metrics.js";

/** The value of one series in Prometheus text format, or undefined when it is not exposed. */
async function value(registry: Registry, series: string): Promise<number | undefined> {
  const text = await registry.metrics();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

function job(name: string, workload: "asr" | "tts" | "render", status: MediaJob["status"]): MediaJob {
  return makeMediaJob(name)
    .ns("ns")
    .created("2026-01-01T00:00:00Z")
    .workload(workload)
    .spec({ timeoutSeconds: 60 })
    .status(status)
    .build();
}

describe("reconcile metrics", () => {
  it("count each outcome under the project's names and controller-runtime's, a terminal error as an error not retried", async () => {
    const registry = new Registry();
    const m = new ReconcileMetrics(registry, "media_orchestrator");
    for (const outcome of ["success", "requeue_after", "error", "terminal_error", "terminal_error"] as const)
      m.observe("mediajob", outcome, 2);
    const v = (series: string) => value(registry, series);
    // The project's names, which its alerts and dashboards read: a terminal error is not an error retried.
    expect(await v('media_orchestrator_reconcile_total{controller="mediajob",outcome="success"}')).toBe(1);
    expect(await v('media_orchestrator_reconcile_total{controller="mediajob",outcome="requeue"}')).toBe(1);
    expect(await v('media_orchestrator_reconcile_total{controller="mediajob",outcome="error"}')).toBe(1);
    expect(
      await v('media_orchestrator_reconcile_total{controller="mediajob",outcome="terminal_error"}'),
    ).toBe(2);
    expect(await v('media_orchestrator_reconcile_duration_seconds_count{controller="mediajob"}')).toBe(5);
    // controller-runtime's: a terminal error is result="error", and counted apart as terminal.
    expect(await v('controller_runtime_reconcile_total{controller="mediajob",result="success"}')).toBe(1);
    expect(await v('controller_runtime_reconcile_total{controller="mediajob",result="requeue_after"}')).toBe(
      1,
    );
    expect(await v('controller_runtime_reconcile_total{controller="mediajob",result="error"}')).toBe(3);
    expect(await v('controller_runtime_reconcile_errors_total{controller="mediajob"}')).toBe(3);
    expect(await v('controller_runtime_terminal_reconcile_errors_total{controller="mediajob"}')).toBe(2);
  });
});

describe("work queue metrics", () => {
  it("counts adds, retries, waits and work under controller-runtime's names, per queue", async () => {
    const registry = new Registry();
    const m = new WorkQueueMetrics(registry);
    const q = new WorkQueue({ metrics: m.sink("mediajob"), baseDelayMs: 1 });
    m.track("mediajob", q);
    q.add("a");
    q.add("a"); // collapsed: one add, as client-go counts it
    q.add("b");
    expect(await value(registry, 'workqueue_adds_total{name="mediajob"}')).toBe(2);
    // Not running yet (a replica that does not lead): no depth is reported.
    expect(await value(registry, 'workqueue_depth{name="mediajob"}')).toBeUndefined();
    let failOnce = true;
    let sawInFlight = false;
    const running = q.run(1, async (key) => {
      if (key === "b") {
        sawInFlight =
          (await value(registry, 'workqueue_longest_running_processor_seconds{name="mediajob"}'))! >= 0;
      }
      if (key === "a" && failOnce) {
        failOnce = false;
        throw new Error("retry me");
      }
    });
    for (
      let i = 0;
      i < 200 && ((await value(registry, 'workqueue_work_duration_seconds_count{name="mediajob"}')) ?? 0) < 3;
      i++
    )
      await new Promise((r) => setTimeout(r, 5));
    q.shutdown();
    await running;
    expect(sawInFlight).toBe(true);
    expect(await value(registry, 'workqueue_retries_total{name="mediajob"}')).toBe(1);
    expect(await value(registry, 'workqueue_adds_total{name="mediajob"}')).toBe(3);
    expect(await value(registry, 'workqueue_queue_duration_seconds_count{name="mediajob"}')).toBe(3);
    expect(await value(registry, 'workqueue_work_duration_seconds_count{name="mediajob"}')).toBe(3);
  });

  it("reports the depth of a running queue, including keys added while they are processed", async () => {
    const registry = new Registry();
    const m = new WorkQueueMetrics(registry);
    const q = new WorkQueue({ metrics: m.sink("gpuendpoint") });
    m.track("gpuendpoint", q);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    q.add("x");
    let started!: () => void;
    const processing = new Promise<void>((r) => (started = r));
    const running = q.run(1, async () => {
      started();
      return gate;
    });
    await processing;
    q.add("x"); // processing: marked to run again
    q.add("y");
    expect(await value(registry, 'workqueue_depth{name="gpuendpoint"}')).toBe(2);
    expect(await value(registry, 'workqueue_unfinished_work_seconds{name="gpuendpoint"}')).toBeGreaterThan(0);
    q.shutdown();
    release();
    await running;
  });
});

describe("resource metrics", () => {
  it("counts jobs by phase and workload, stuck and unconfirmed ones, and endpoints by condition", async () => {
    const registry = new Registry();
    const m = new ResourceMetrics(registry);
    const long = new Date(Date.now() - 3_600_000).toISOString();
    const now = new Date().toISOString();
    const jobs = [
      job("a", "asr", { phase: "Completed" }),
      job("b", "asr", { phase: "Processing", submittedAt: long, providerJobId: "p" }),
      job("c", "tts", {
        phase: "Processing",
        submittedAt: now,
        submission: { attempt: 1, id: "abcdefgh", startedAt: now, state: "Unconfirmed" },
      }),
      job("d", "tts", undefined),
    ];
    const endpoints: GpuEndpoint[] = [
      makeGpuEndpoint("e", "asr")
        .ns("ns")
        .status({
          conditions: [
            { type: "Ready", status: "False", reason: "InvalidApiKey", message: "", lastTransitionTime: now },
            {
              type: "CredentialsValid",
              status: "False",
              reason: "InvalidApiKey",
              message: "",
              lastTransitionTime: now,
            },
          ],
        })
        .build(),
      makeGpuEndpoint("f", "tts").ns("ns").build(),
    ];
    m.readFrom({ jobs: () => jobs, endpoints: () => endpoints, defaultTimeoutSeconds: 600 });
    expect(await value(registry, 'media_orchestrator_mediajobs{phase="Completed",workload="asr"}')).toBe(1);
    expect(await value(registry, 'media_orchestrator_mediajobs{phase="Processing",workload="tts"}')).toBe(1);
    expect(await value(registry, 'media_orchestrator_mediajobs{phase="Pending",workload="tts"}')).toBe(1);
    expect(await value(registry, 'media_orchestrator_mediajobs_stuck{workload="asr"}')).toBe(1);
    expect(await value(registry, 'media_orchestrator_mediajobs_stuck{workload="tts"}')).toBe(0);
    expect(await value(registry, 'media_orchestrator_mediajobs_unconfirmed{workload="tts"}')).toBe(1);
    expect(
      await value(
        registry,
        'media_orchestrator_gpuendpoints{workload="asr",condition="CredentialsValid",status="False",reason="InvalidApiKey"}',
      ),
    ).toBe(1);
    expect(
      await value(
        registry,
        'media_orchestrator_gpuendpoints{workload="tts",condition="Ready",status="Unknown",reason="NotObserved"}',
      ),
    ).toBe(1);
    // Gauges follow the cache: a job gone is no longer counted.
    jobs.length = 0;
    expect(await value(registry, 'media_orchestrator_mediajobs{phase="Completed",workload="asr"}')).toBe(0);
  });

  it("counts what watch events show: submissions, ends, failures by reason, and their latencies", async () => {
    const registry = new Registry();
    const m = new ResourceMetrics(registry);
    const pending = job("a", "render", { phase: "Pending" });
    const processing = job("a", "render", {
      phase: "Processing",
      attempts: 1,
      submittedAt: "2026-01-01T00:00:30Z",
    });
    const failed = job("a", "render", {
      phase: "Failed",
      attempts: 1,
      submittedAt: "2026-01-01T00:00:30Z",
      completedAt: "2026-01-01T00:02:30Z",
      error: "TIMED_OUT: the job timed out at the provider",
    });
    m.observe("update", processing, pending);
    m.observe("update", processing, processing); // no change of phase: nothing
    m.observe("update", failed, processing);
    m.observe("add", failed, undefined); // a relist's add is no transition
    expect(
      await value(
        registry,
        'media_orchestrator_mediajob_creation_to_submission_seconds_sum{workload="render"}',
      ),
    ).toBe(30);
    expect(
      await value(
        registry,
        'media_orchestrator_mediajob_submission_to_terminal_seconds_sum{workload="render",phase="Failed"}',
      ),
    ).toBe(120);
    expect(
      await value(registry, 'media_orchestrator_mediajobs_finished_total{workload="render",phase="Failed"}'),
    ).toBe(1);
    expect(
      await value(
        registry,
        'media_orchestrator_mediajob_failures_total{workload="render",reason="TIMED_OUT"}',
      ),
    ).toBe(1);
  });

  it("names failures from a fixed set, whatever status.error says", () => {
    expect(failureReason("FAILED: boom")).toBe("FAILED");
    expect(failureReason("ProviderLostJob: the provider lost this job 3 times")).toBe("ProviderLostJob");
    expect(failureReason("SubmissionUnconfirmed: 3 submissions")).toBe("SubmissionUnconfirmed");
    expect(failureReason("DeadlineExceeded: the job ran past spec.activeDeadlineSeconds")).toBe(
      "DeadlineExceeded",
    );
    expect(failureReason("Expired: the provider no longer knows job p-1")).toBe("Expired");
    expect(failureReason("job-4711: something")).toBe("Other");
    expect(failureReason(undefined)).toBe("Other");
  });
});

describe("provider call metrics", () => {
  it("reports every attempt with its API, outcome and status, and counts 429s", async () => {
    const calls: ProviderCall[] = [];
    const registry = new Registry();
    const metrics = new ProviderMetrics(registry);
    const onCall = (c: ProviderCall) => {
      calls.push(c);
      metrics.onCall(c);
    };
    await observed(onCall, callApi("submit"), "submit", async () => "ok")(1000);
    await expect(
      observed(onCall, callApi("listEndpoints"), "listEndpoints", async () => {
        throw new ProviderError("RATE_LIMITED", "slow down", { status: 429 });
      })(1000),
    ).rejects.toThrow("slow down");
    expect(calls.map((c) => [c.api, c.op, c.outcome, c.status])).toEqual([
      ["job", "submit", "ok", undefined],
      ["management", "listEndpoints", "RATE_LIMITED", 429],
    ]);
    expect(
      await value(
        registry,
        'media_orchestrator_provider_requests_total{api="management",operation="listEndpoints",outcome="RATE_LIMITED"}',
      ),
    ).toBe(1);
    expect(
      await value(
        registry,
        'media_orchestrator_provider_rate_limited_total{api="management",operation="listEndpoints"}',
      ),
    ).toBe(1);
    expect(
      await value(
        registry,
        'media_orchestrator_provider_request_duration_seconds_count{api="job",operation="submit"}',
      ),
    ).toBe(1);
  });
});
