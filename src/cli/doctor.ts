// doctor: the runbook's "Diagnose failing jobs" and "Replay a payment webhook" checks, in order,
// each finding printed with the runbook's fix. Uses the GpuEndpoint domain's own diagnosis
// (src/gpuendpoint), so doctor and the GpuEndpoint conditions say the same thing about the same
// facts; a fix is the one its reason has (src/gpuendpoint/fixes.ts), never read out of a message.
// One piece: the checks run in the runbook's order and add to one list of findings.
import { providerWaitCause } from "../mediajob/wait-cause.js";
import { randomBytes } from "node:crypto";
import { dump, send } from "../http/client.js";
import { GROUP, VERSION } from "../crds/common.js";
import type { GpuEndpoint, GpuEndpointSpec } from "../crds/gpuendpoint.js";
import type { MediaJob } from "../crds/mediajob.js";
import { endpointFromEnv } from "../config/env.js";
import { getCondition } from "../crds/conditions.js";
import { paymentEventName } from "../crds/paymentevent.js";
import { healthFinding, toHealth, warmWorkersFinding } from "../gpuendpoint/diagnosis.js";
import { causeAndFix, findingOf } from "../gpuendpoint/findings.js";
import { FIX_ENDPOINT } from "../gpuendpoint/fixes.js";
import { describeError } from "../k8s/errors.js";
import type { GpuProviderClient, ProviderEndpoint } from "../provider/index.js";
import { signStripePayload } from "../webhooks/signature.js";
import { checkKey } from "./check-key.js";
import type { CliConfig, CliContext } from "./context.js";
import { EXIT_OK, EXIT_PROBLEM, providerProblem } from "./errors.js";
import { findStuck } from "./jobs.js";
import { waitingFindings } from "./waiting.js";
import { FIX_WEBHOOK_SECRET } from "./redeliver.js";

export type Result = "ok" | "warn" | "fail" | "skip";

export interface Finding {
  section: "Diagnose failing jobs" | "Replay a payment webhook" | "Stuck jobs" | "Waiting jobs";
  check: string;
  target?: string;
  result: Result;
  message: string;
  fix?: string;
}

const FIX_SIDECAR =
  "check the webhooks sidecar's logs and its deployment status (kubectl get deploy,pods; kubectl logs), and that --webhooks-url / WEBHOOKS_URL points at it";

interface Target {
  label: string;
  workload: "asr" | "tts" | "render";
  id?: string;
  endpoint?: GpuEndpoint;
  envVar?: string;
}

type Add = (f: Omit<Finding, "section">) => void;

export async function diagnose(ctx: CliContext): Promise<Finding[]> {
  const findings: Finding[] = [];
  const config = await ctx.config();
  const { env } = config;
  let section: Finding["section"] = "Diagnose failing jobs";
  const add: Add = (f) => findings.push({ section, ...f });

  // 1. The key (all jobs fail immediately, no cold start).
  const key = await checkKey(ctx);
  add({
    check: "GPU API key",
    result: key.result === "valid" ? "ok" : "fail",
    message: key.message,
    ...(key.fix ? { fix: key.fix } : {}),
  });
  const gpu = key.result === "valid" ? await ctx.gpu() : undefined;

  // Kubernetes: the GpuEndpoints and MediaJobs in scope (doctor goes on without them).
  let endpoints: GpuEndpoint[] = [];
  let jobs: MediaJob[] | undefined;
  try {
    const { api } = await ctx.kube();
    const ns = await ctx.listNamespace();
    endpoints = (await api.list<GpuEndpoint>("gpuendpoints", ns)).items;
    jobs = (await api.list<MediaJob>("mediajobs", ns)).items;
  } catch (err) {
    add({
      check: "Kubernetes",
      result: "fail",
      message: `cannot read GpuEndpoints and MediaJobs: ${err instanceof Error ? err.message : describeError(err)}`,
      fix: "check --kubeconfig/--context and that you may list gpuendpoints and mediajobs in the namespace",
    });
  }

  // 2. Endpoint ids live (ENDPOINT_NOT_FOUND).
  let live: ProviderEndpoint[] | undefined;
  if (gpu) {
    try {
      live = await gpu.listEndpoints();
    } catch (err) {
      add({
        check: "endpoint ids",
        result: "fail",
        message: `could not list the provider's endpoints: ${providerProblem(err)}`,
      });
    }
  }
  const targets = endpointTargets(config, endpoints);
  if (targets.length === 0 && jobs !== undefined) {
    add({
      check: "endpoint ids",
      result: "warn",
      message: "no GpuEndpoint in scope and no GPU_PROVIDER_ENDPOINT_{ASR,TTS,RENDER} set: nothing to check",
      fix: "apply the GpuEndpoint manifests, or pass -n NAMESPACE / -A",
    });
  }
  const liveTargets: Array<{ t: Target; p: ProviderEndpoint }> = [];
  for (const t of targets) {
    if (!t.id) {
      const found = getCondition(t.endpoint?.status?.conditions, "EndpointFound");
      add({
        check: "endpoint id",
        target: t.label,
        result: "fail",
        message: `no provider endpoint resolved${found?.message ? `: ${found.message}` : ""}`,
        fix: FIX_ENDPOINT,
      });
      continue;
    }
    if (!live) {
      add({
        check: "endpoint id",
        target: t.label,
        result: "skip",
        message: `${t.id}: needs a working GPU API key`,
      });
      continue;
    }
    const p = live.find((e) => e.id === t.id);
    if (!p) {
      add({
        check: "endpoint id",
        target: t.label,
        result: "fail",
        message: `ENDPOINT_NOT_FOUND: ${t.id} matches no live endpoint of this account`,
        fix: t.envVar
          ? `re-deploy the endpoint, then update ${t.envVar} in the orchestrator's environment`
          : FIX_ENDPOINT,
      });
      continue;
    }
    add({ check: "endpoint id", target: t.label, result: "ok", message: `${t.id} is live (${p.name})` });
    liveTargets.push({ t, p });
  }

  // 3. Worker health (containers restarting: unhealthy workers), 4. cold starts (min workers).
  for (const { t, p } of liveTargets) add(await workerHealth(gpu!, t, p));
  for (const { t, p } of liveTargets) {
    const f = warmWorkersFinding(env.MEDIA_ENV, specOf(t, p, { minWorkers: p.workersMin }));
    add({
      check: "cold start",
      target: t.label,
      result: f.status === "True" ? "ok" : "warn",
      message: `min workers ${p.workersMin}, max ${p.workersMax} at the provider: ${f.cause}`,
      ...(f.fix ? { fix: f.fix } : {}),
    });
  }

  // 5. Why jobs wait in the provider's queue (cold start, no capacity, crash-looping workers), from
  // the health the controller last recorded.
  for (const { t, p } of liveTargets) {
    const health = t.endpoint?.status?.health;
    if (!health) continue;
    const wait = providerWaitCause(health, p.workersMax);
    const { cause, fix } = wait ? causeAndFix(wait.reason, wait.message) : { cause: "", fix: undefined };
    add(
      wait
        ? {
            check: "provider queue",
            target: t.label,
            result: "warn",
            message: `${wait.reason}: ${cause}`,
            ...(fix ? { fix } : {}),
          }
        : {
            check: "provider queue",
            target: t.label,
            result: "ok",
            message: "no job waits in the provider's queue",
          },
    );
  }

  // Replay a payment webhook: the secret, the sidecar's health, a test event signed with the secret.
  section = "Replay a payment webhook";
  await webhookChecks(config, ctx.inv.requestTimeoutMs, add, (id) => removeTestEvent(ctx, id));

  section = "Stuck jobs";
  if (jobs) {
    const stuck = findStuck(jobs, Date.now(), { defaultTimeoutSeconds: env.JOB_TIMEOUT_SECONDS });
    add(
      stuck.length === 0
        ? { check: "stuck jobs", result: "ok", message: "no MediaJob is Processing past its timeout" }
        : {
            check: "stuck jobs",
            result: "warn",
            message: `${stuck.length} MediaJob(s) Processing past their timeout: ${stuck
              .slice(0, 5)
              .map((s) => `${s.job.metadata.namespace}/${s.job.metadata.name}`)
              .join(", ")}${stuck.length > 5 ? ", ..." : ""}`,
            fix: "kubectl media recover --dry-run, then kubectl media recover",
          },
    );
    section = "Waiting jobs";
    for (const f of waitingFindings(jobs)) add(f);
  }
  return findings;
}

/**
 * The signature check's test event is recorded by the sidecar as a PaymentEvent (kept for
 * PAYMENT_EVENT_RETENTION_HOURS): doctor deletes that record, so a check leaves nothing behind.
 * It lives in the sidecar's namespace, which doctor may not know: the namespace in scope is tried
 * first, then a cluster-wide lookup by name. Returns what became of it, for the check's message.
 */
async function removeTestEvent(ctx: CliContext, eventId: string): Promise<string> {
  const name = paymentEventName(eventId);
  const left = (why: string) =>
    `its record PaymentEvent ${name} is left (${why}): kubectl delete paymentevent ${name} -n <the sidecar's namespace>`;
  try {
    const { api } = await ctx.kube();
    const here = await ctx.namespace();
    if (await api.delete("paymentevents", here, name)) return `its record (PaymentEvent ${name}) was removed`;
    const found = await api.rawJson<{ items: Array<{ metadata: { namespace?: string } }> }>(
      "GET",
      `/apis/${GROUP}/${VERSION}/paymentevents?fieldSelector=${encodeURIComponent(`metadata.name=${name}`)}`,
    );
    for (const item of found.items) await api.delete("paymentevents", item.metadata.namespace!, name);
    return found.items.length
      ? `its record (PaymentEvent ${name}) was removed`
      : "the sidecar kept no record of it";
  } catch (err) {
    return left(describeError(err));
  }
}

function endpointTargets(config: CliConfig, endpoints: GpuEndpoint[]): Target[] {
  const targets: Target[] = [];
  for (const workload of ["asr", "tts", "render"] as const) {
    const id = endpointFromEnv(config.env, workload);
    const envVar = `GPU_PROVIDER_ENDPOINT_${workload.toUpperCase()}`;
    if (id) targets.push({ label: `${envVar}`, workload, id, envVar });
  }
  for (const ep of [...endpoints].sort((a, b) =>
    `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`),
  )) {
    targets.push({
      label: `gpuendpoint ${ep.metadata.namespace}/${ep.metadata.name}`,
      workload: ep.spec.workload,
      id: ep.status?.endpointId ?? ep.spec.endpointId,
      endpoint: ep,
    });
  }
  return targets;
}

function specOf(t: Target, p: ProviderEndpoint, override: Partial<GpuEndpointSpec> = {}): GpuEndpointSpec {
  const base: GpuEndpointSpec = t.endpoint?.spec ?? {
    workload: t.workload,
    minWorkers: p.workersMin,
    maxWorkers: p.workersMax,
    idleTimeoutSeconds: Math.max(1, Math.round(p.idleTimeout)),
  };
  return { ...base, ...override };
}

async function workerHealth(
  gpu: GpuProviderClient,
  t: Target,
  p: ProviderEndpoint,
): Promise<Omit<Finding, "section">> {
  const base = { check: "worker health", target: t.label };
  let report;
  try {
    report = await gpu.health(p.id);
  } catch (err) {
    return {
      ...base,
      result: "fail",
      message: `could not read the endpoint's health: ${providerProblem(err)}`,
    };
  }
  const now = healthFinding(toHealth(report), undefined, specOf(t, p));
  // The controller's condition also knows the previous check (a queue that does not drain).
  const seen = getCondition(t.endpoint?.status?.conditions, "WorkersHealthy");
  const f = now.status !== "True" ? now : seen?.status === "False" ? findingOf(seen) : now;
  return {
    ...base,
    result: f.status === "True" ? "ok" : "fail",
    message: f.cause,
    ...(f.fix ? { fix: f.fix } : {}),
  };
}

async function webhookChecks(
  config: CliConfig,
  timeoutMs: number,
  add: Add,
  removeTestEvent: (eventId: string) => Promise<string>,
): Promise<void> {
  const secrets = config.webhookSecrets;
  add(
    secrets.length === 0
      ? {
          check: "webhook secret",
          result: "fail",
          message:
            "PAYMENT_PROVIDER_WEBHOOK_SECRET is not set: every payment webhook fails its signature check",
          fix: "export it or pass --secret <namespace>/<name>; the value is the signing secret of the webhook endpoint in the payment provider's dashboard",
        }
      : {
          check: "webhook secret",
          result: "ok",
          message: `set (${secrets.length} secret${secrets.length > 1 ? "s, rotation" : ""}; from the ${config.sources.PAYMENT_PROVIDER_WEBHOOK_SECRET})`,
        },
  );
  add(
    config.env.PAYMENT_PROVIDER_API_KEY
      ? {
          check: "payment API key",
          result: "ok",
          message: `set (from the ${config.sources.PAYMENT_PROVIDER_API_KEY})`,
        }
      : {
          check: "payment API key",
          result: "warn",
          message: "PAYMENT_PROVIDER_API_KEY is not set: 'kubectl media redeliver' cannot work",
          fix: "export it or pass --secret <namespace>/<name>",
        },
  );
  const base = config.webhooksUrl;
  if (!base) {
    add({
      check: "webhooks sidecar",
      result: "skip",
      message: "no sidecar URL: its health and the webhook secret were not tested",
      fix: "pass --webhooks-url URL or set WEBHOOKS_URL (for a cluster: kubectl port-forward to the sidecar's service, then http://127.0.0.1:PORT)",
    });
    return;
  }
  let healthy = true;
  for (const path of ["/healthz", "/readyz"]) {
    const res = await call(`${base}${path}`, "GET", timeoutMs);
    const ok = res.status !== undefined && res.status >= 200 && res.status < 300;
    healthy &&= ok;
    add({
      check: "webhooks sidecar",
      target: path,
      result: ok ? "ok" : "fail",
      message: ok
        ? `${base}${path} answered ${res.status}`
        : `${base}${path} ${res.status !== undefined ? `answered ${res.status}` : `is unreachable: ${res.error}`}`,
      ...(ok ? {} : { fix: FIX_SIDECAR }),
    });
  }
  if (!healthy || secrets.length === 0) {
    add({
      check: "webhook signature",
      result: "skip",
      message: "needs a healthy sidecar and a configured secret",
    });
    return;
  }
  for (const [i, secret] of secrets.entries()) {
    const target = secrets.length > 1 ? `secret ${i + 1} of ${secrets.length}` : undefined;
    const id = `evt_doctor_${randomBytes(12).toString("hex")}`;
    const created = Math.floor(Date.now() / 1000);
    const body = JSON.stringify({
      id,
      object: "event",
      type: "media_orchestrator.doctor",
      created,
      livemode: false,
      data: { object: { object: "ping", note: "test event sent by kubectl media doctor" } },
    });
    const res = await call(`${base}/webhooks/payment_provider`, "POST", timeoutMs, body, {
      "content-type": "application/json",
      "stripe-signature": signStripePayload(body, secret, created),
    });
    const s = res.status;
    const accepted = s !== undefined && s >= 200 && s < 300;
    const cleanup = accepted ? `; ${await removeTestEvent(id)}` : "";
    add({
      check: "webhook signature",
      ...(target ? { target } : {}),
      ...(accepted
        ? {
            result: "ok" as const,
            message: `the sidecar accepted a test event signed with the secret (${id}: ${s})${cleanup}`,
          }
        : s === 400
          ? {
              result: "fail" as const,
              message:
                "the sidecar rejected a test event signed with this secret (400): it is configured with a different secret (or this machine's clock is off by more than the tolerance)",
              fix: FIX_WEBHOOK_SECRET,
            }
          : {
              result: "fail" as const,
              message: `the test event ${s !== undefined ? `was answered ${s}` : `failed: ${res.error}`}`,
              fix: FIX_SIDECAR,
            }),
    });
  }
}

async function call(
  url: string,
  method: "GET" | "POST",
  timeoutMs: number,
  body?: string,
  headers?: Record<string, string>,
): Promise<{ status?: number; error?: string }> {
  try {
    const res = await send(url, {
      method,
      ...(headers ? { headers } : {}),
      ...(body !== undefined ? { body } : {}),
      signal: AbortSignal.timeout(Math.min(timeoutMs, 10_000)),
    });
    await dump(res.body);
    return { status: res.statusCode };
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    return { error: typeof code === "string" ? code : err instanceof Error ? err.message : String(err) };
  }
}

const MARK: Record<Result, string> = { ok: "[ok]  ", warn: "[WARN]", fail: "[FAIL]", skip: "[skip]" };

export async function run(ctx: CliContext): Promise<number> {
  const findings = await diagnose(ctx);
  const failed = findings.filter((f) => f.result === "fail").length;
  if (ctx.out.machine) {
    ctx.out.data({ ok: failed === 0, findings });
    return failed ? EXIT_PROBLEM : EXIT_OK;
  }
  let section = "";
  for (const f of findings) {
    if (f.section !== section) {
      if (section) ctx.out.line();
      section = f.section;
      ctx.out.line(section);
    }
    ctx.out.line(`  ${MARK[f.result]} ${f.check}${f.target ? ` (${f.target})` : ""}: ${f.message}`);
    if (f.fix && f.result !== "ok") ctx.out.line(`         Fix: ${f.fix}`);
  }
  const n = (r: Result) => findings.filter((f) => f.result === r).length;
  ctx.out.line();
  ctx.out.line(
    `${findings.length} checks: ${n("ok")} ok, ${n("warn")} warnings, ${failed} failed, ${n("skip")} skipped.`,
  );
  return failed ? EXIT_PROBLEM : EXIT_OK;
}
