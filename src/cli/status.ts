// status <mediajob>: the job as Kubernetes sees it, beside the provider's actual status, and a
// verdict: do they agree, and if not, what to run.
import { outputCheckDue } from "../mediajob/media.js";
import type { MediaJob, MediaJobStatus } from "../crds/mediajob.js";
import { pastProviderTtl } from "../mediajob/deadline.js";
import { isTerminal } from "../mediajob/job.js";
import { processingSinceMs } from "../mediajob/recovery.js";
import { recordedWaitCause } from "../mediajob/wait-cause.js";
import { getCondition } from "../crds/conditions.js";
import type { CliContext } from "./context.js";
import { humanDuration } from "./duration.js";
import { EXIT_OK, EXIT_PROBLEM } from "./errors.js";
import {
  askProvider,
  findStuck,
  getJob,
  providerErrorHint,
  providerJobId,
  providerState,
  type ProviderView,
} from "./jobs.js";
import { formatFields } from "./output.js";
import { waitOf, waitsByDesign } from "./waiting.js";
import { isByDesign } from "../mediajob/reasons.js";
import { listBindings } from "./bind.js";
import { jobAccount } from "../mediajob/tenancy.js";
import { jobPhase } from "../mediajob/job.js";

export interface Verdict {
  /** True when an operator should act (or the comparison could not be made). */
  attention: boolean;
  summary: string;
  next?: string;
}

/** The runbook's reading of (Kubernetes phase, provider status). */
export function verdict(
  job: MediaJob,
  view: ProviderView | undefined,
  cmd: (verb: string) => string,
): Verdict {
  const phase = jobPhase(job.status);
  // A job that waits is not at the provider at all: the conditions say why, whatever it answers.
  const wait = waitOf(job);
  if (wait) {
    const { type, status, reason, message } = wait.condition;
    // A wait by design (suspended by its owner, queued for a slot) is not a problem: doctor counts
    // it ok, and status exits 0 for it.
    const byDesign = waitsByDesign(wait);
    return {
      attention: !byDesign,
      summary:
        `Pending, and it waits: ${type}=${status} (${reason}): ${message}. The controller does not submit it until that changes` +
        (byDesign ? "; nothing to fix" : ""),
      next: wait.fix,
    };
  }
  if (!view) {
    return {
      attention: true,
      summary: "the provider was not asked: no GPU provider API key is configured",
      next: "export GPU_PROVIDER_API_KEY (or pass --secret <namespace>/<name>) and run status again",
    };
  }
  if (view.state === "error") {
    return {
      attention: true,
      summary: `could not read the job's status at the provider: ${view.message}`,
      next: providerErrorHint(view),
    };
  }
  if (isTerminal(phase)) {
    return { attention: false, summary: `the job is ${phase}; nothing to do` };
  }
  if (phase === "Pending") {
    return {
      attention: false,
      summary: "Pending: nothing holds it back; the controller submits it on its next pass",
    };
  }
  // Processing, COMPLETED at the provider: the controller checks the declared outputs first.
  if (outputCheckDue(job.status))
    return {
      attention: false,
      summary:
        "the provider completed the job; the controller is checking its declared outputs in the object store " +
        "(OutputsVerified=Unknown) before it is Completed",
      next: `kubectl describe mediajob ${job.metadata.name}: an OutputCheckFailed Warning says when the store cannot be read`,
    };
  // Processing.
  switch (view.state) {
    case "not-submitted":
      return {
        attention: true,
        summary: "Processing, but no endpoint id is recorded: the provider cannot be asked",
        next: `${cmd("reset")} to resubmit it`,
      };
    case "not-found":
      // Past its policy.ttl the provider forgets a job by design: the controller ends it Expired.
      if (pastProviderTtl(job.status, Date.now()))
        return {
          attention: true,
          summary: `Processing, but the provider no longer knows the job: its policy.ttl (queue plus run) ran out at ${job.status?.submission?.expiresAt}; the controller ends it Failed (Expired) at its next look. It may have run`,
          next: "create the job again to run it (with a longer spec.executionTimeoutSeconds if its run needs one)",
        };
      return {
        attention: true,
        summary: "Processing, but the provider does not know the job (lost, expired or never received)",
        next: `${cmd("reset")} to replay it`,
      };
    case "found": {
      const s = view.job.status;
      // Queued there for a cause the controller named on the job (provider-wait.ts): that cause,
      // a problem to fix when the workers cannot run it, a wait for capacity otherwise.
      const cause = recordedWaitCause(getCondition(job.status?.conditions, "Queued"));
      if (s === "IN_QUEUE" && cause) {
        return {
          // Waits that last until someone acts need attention; the others pass as workers start.
          attention: !isByDesign(cause.reason),
          summary: `the job waits in the provider's queue (${cause.reason}): ${cause.message}`,
        };
      }
      if (s === "IN_QUEUE" || s === "IN_PROGRESS") {
        return { attention: false, summary: `the provider is still working on it (${s}); wait` };
      }
      if (s === "COMPLETED") {
        return {
          attention: true,
          summary:
            "the provider completed the job but Kubernetes still shows Processing: the callback was missed",
          next: `${cmd("complete")} to take the provider's output (or ${cmd("reset")} to run it again)`,
        };
      }
      return {
        attention: true,
        summary: `the provider reports ${s} but Kubernetes still shows Processing: the callback was missed`,
        next: `'kubectl media recover' applies the result once the job is past its timeout; ${cmd("reset")} runs it again now`,
      };
    }
  }
}

export async function run(ctx: CliContext): Promise<number> {
  const name = ctx.inv.args[0];
  if (name === undefined) return bindings(ctx);
  const { api } = await ctx.kube();
  const namespace = await ctx.namespace();
  const job = await getJob(api, namespace, name);
  const { env } = await ctx.config();
  const view = env.GPU_PROVIDER_API_KEY ? await askProvider(await ctx.gpu(), job) : undefined;
  const nsFlag = `-n ${namespace}`;
  const v = verdict(job, view, (verb) => `'kubectl media ${verb} ${name} ${nsFlag}'`);

  const status = job.status ?? {};
  const now = Date.now();
  const since = processingSinceMs(job.status);
  const timeoutSeconds = job.spec.timeoutSeconds ?? env.JOB_TIMEOUT_SECONDS;
  const processingForMs = status.phase === "Processing" && since !== undefined ? now - since : undefined;
  const stuck = findStuck([job], now, { defaultTimeoutSeconds: env.JOB_TIMEOUT_SECONDS }).length > 0;

  if (ctx.out.machine) {
    ctx.out.data({
      mediaJob: {
        namespace,
        name,
        workload: job.spec.workload,
        phase: status.phase ?? null,
        jobId: status.jobId ?? null,
        account: jobAccount(job) ?? null,
        providerJobId: status.providerJobId ?? null,
        endpointId: status.endpointId ?? null,
        attempts: status.attempts ?? 0,
        failures: status.failures ?? 0,
        replay: status.replay ?? false,
        submittedAt: status.submittedAt ?? null,
        updatedAt: status.updatedAt ?? null,
        completedAt: status.completedAt ?? null,
        error: status.error ?? null,
        nextJob: status.nextJob ?? null,
        timeoutSeconds,
        processingForSeconds: processingForMs === undefined ? null : Math.floor(processingForMs / 1000),
        stuck,
        conditions: status.conditions ?? [],
      },
      provider: providerData(view),
      verdict: v,
    });
    return v.attention ? EXIT_PROBLEM : EXIT_OK;
  }

  const ago = (iso?: string) => (iso ? `${iso} (${humanDuration(now - Date.parse(iso))} ago)` : "-");
  let phaseText = status.phase ?? "(none yet)";
  if (processingForMs !== undefined) {
    phaseText += ` for ${humanDuration(processingForMs)} (timeout ${humanDuration(timeoutSeconds * 1000)}${stuck ? ": STUCK" : ""})`;
  }
  ctx.out.line(`MediaJob ${namespace}/${name} (${job.spec.workload})`);
  ctx.out.line("Kubernetes:");
  ctx.out.line(
    formatFields(
      [
        ["Phase", phaseText],
        ["Job ID", status.jobId ?? "-"],
        ["Account", jobAccount(job) ?? "-"],
        ["Provider job", status.providerJobId ?? "-"],
        ["Endpoint", status.endpointId ?? "-"],
        ["Attempts", String(status.attempts ?? 0) + (status.failures ? ` (${status.failures} failed)` : "")],
        ["Replay", String(status.replay ?? false)],
        ["Submitted", ago(status.submittedAt)],
        ["Updated", ago(status.updatedAt)],
        ...(status.completedAt ? [["Completed", ago(status.completedAt)] as [string, string]] : []),
        ...(status.error ? [["Error", status.error] as [string, string]] : []),
        ...(status.nextJob ? [["Next job", status.nextJob] as [string, string]] : []),
        ...(status.usage?.attempts.length
          ? [["Attempt times", attemptTimes(status).join("; ")] as [string, string]]
          : []),
        [
          "Conditions",
          (status.conditions ?? []).map((c) => `${c.type}=${c.status} (${c.reason})`).join(", ") || "-",
        ],
      ],
      "  ",
    ),
  );
  ctx.out.line("Provider:");
  ctx.out.line(formatFields(providerFields(job, view), "  "));
  ctx.out.line(`Verdict: ${v.summary}`);
  if (v.next) ctx.out.line(`Next:    ${v.next}`);
  return v.attention ? EXIT_PROBLEM : EXIT_OK;
}

/**
 * Each ended attempt's time at the provider as recorded in status.usage: its wait in the queue
 * (delayTime, the cold start included) apart from its run (executionTime).
 */
export function attemptTimes(status: MediaJobStatus): string[] {
  const s = (ms: number | undefined) => (ms === undefined ? "?" : `${(ms / 1000).toFixed(1)} s`);
  return (status.usage?.attempts ?? []).map(
    (a) =>
      `#${a.attempt} ${a.providerStatus}: queue and cold start ${s(a.delayTimeMs)}, run ${s(a.executionTimeMs)}`,
  );
}

function providerData(view: ProviderView | undefined): Record<string, unknown> {
  if (!view) return { status: "NOT_ASKED" };
  const base = {
    status: providerState(view),
    ...("id" in view ? { id: view.id, endpointId: view.endpointId } : {}),
  };
  switch (view.state) {
    case "found":
      return {
        ...base,
        delayTimeMs: view.job.delayTime ?? null,
        executionTimeMs: view.job.executionTime ?? null,
        error: view.job.error ?? null,
        output: view.job.output ?? null,
      };
    case "error":
      return { ...base, code: view.code, message: view.message };
    default:
      return { ...base, message: view.message };
  }
}

function providerFields(job: MediaJob, view: ProviderView | undefined): Array<[string, string]> {
  if (!view) return [["Status", "not asked (no GPU_PROVIDER_API_KEY)"]];
  const asked: Array<[string, string]> =
    view.state === "not-submitted"
      ? []
      : [["Asked for", `job ${providerJobId(job)} on endpoint ${job.status?.endpointId}`]];
  switch (view.state) {
    case "found": {
      const j = view.job;
      const out: Array<[string, string]> = [...asked, ["Status", j.status]];
      if (j.delayTime !== undefined) out.push(["Delay", `${j.delayTime} ms`]);
      if (j.executionTime !== undefined) out.push(["Execution", `${j.executionTime} ms`]);
      if (j.output !== undefined) out.push(["Output", summarize(j.output)]);
      if (j.error !== undefined && j.error !== null && j.error !== "")
        out.push([
          "Error",
          typeof j.error === "string" ? j.error.slice(0, 300) : JSON.stringify(j.error).slice(0, 300),
        ]);
      return out;
    }
    case "not-found":
      return [...asked, ["Status", `NOT_FOUND: ${view.message}`]];
    case "not-submitted":
      return [["Status", `not asked: ${view.message}`]];
    case "error":
      return [...asked, ["Status", `ERROR (${view.code}): ${view.message}`]];
  }
}

/** The output's shape in one line: its keys, not its content. */
function summarize(output: unknown): string {
  if (output && typeof output === "object" && !Array.isArray(output)) {
    const keys = Object.keys(output);
    return keys.length ? `{${keys.join(", ")}}` : "{}";
  }
  return JSON.stringify(output)?.slice(0, 80) ?? String(output);
}

/** Without a job: the accounts each namespace is bound to (all, or the one given with -n). */
async function bindings(ctx: CliContext): Promise<number> {
  const { api } = await ctx.kube();
  const rows = await listBindings(api, ctx.inv.namespace);
  if (ctx.out.machine) {
    ctx.out.data({ bindings: rows });
    return EXIT_OK;
  }
  if (!rows.length) {
    ctx.out.note(
      "No namespace is bound to an account: bind one with 'kubectl media bind NAMESPACE ACCOUNT'.",
    );
    return EXIT_OK;
  }
  ctx.out.table(
    ["NAMESPACE", "ACCOUNTS"],
    rows.map((b) => [b.namespace, b.accounts.join(",") || "(none)"]),
  );
  return EXIT_OK;
}
