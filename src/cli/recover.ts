// recover: the runbook's "Recover a missed GPU callback" over every stuck job. For each, ask the
// provider, then: COMPLETED -> complete from its output; FAILED/TIMED_OUT/CANCELLED -> record that
// result as the callback would have; unknown to the provider (or never submitted) -> reset to
// Pending with replay; still queued or running -> leave it alone.
import { applyProviderResult } from "../mediajob/provider-result.js";
import type { MediaJob } from "../crds/mediajob.js";
import type { KubeApi } from "../k8s/api.js";
import type { CliContext } from "./context.js";
import { humanDuration } from "./duration.js";
import { CliError, EXIT_OK, EXIT_PROBLEM } from "./errors.js";
import {
  applyResult,
  askProvider,
  recordEvent,
  resetJob,
  providerState,
  type ProviderView,
  type StuckJob,
  type WriteOutcome,
} from "./jobs.js";
import { loadStuck } from "./stuck.js";

type Action = "complete" | "record-result" | "reset" | "none";
type Outcome = "done" | "planned" | "skipped" | "failed";

export interface RecoverRow {
  namespace: string;
  name: string;
  processingForSeconds: number;
  provider: string;
  action: Action;
  outcome: Outcome;
  message: string;
}

interface Plan {
  action: Action;
  /** Why, from the provider's answer. */
  reason: string;
  /** What the action does: [done, planned]. */
  effect?: [string, string];
  failed?: boolean;
}

function plan(job: MediaJob, view: ProviderView): Plan {
  const reset: [string, string] = ["reset to Pending (replay)", "would reset to Pending (replay)"];
  switch (view.state) {
    case "not-submitted":
      return { action: "reset", reason: view.message, effect: reset };
    case "not-found":
      return {
        action: "reset",
        reason: "the provider does not know the job (lost or expired)",
        effect: reset,
      };
    case "error":
      return { action: "none", reason: `could not ask the provider: ${view.message}`, failed: true };
    case "found": {
      const s = view.job.status;
      if (s === "COMPLETED") {
        return {
          action: "complete",
          reason: "the provider completed it",
          effect: ["completed from the provider's output", "would complete from the provider's output"],
        };
      }
      if (s === "IN_QUEUE" || s === "IN_PROGRESS")
        return { action: "none", reason: `the provider is still working on it (${s}); left alone` };
      const phase = applyProviderResult(job, view.job, new Date().toISOString())?.phase ?? "unchanged";
      const then = phase === "Pending" ? "Pending, to be retried" : phase;
      return {
        action: "record-result",
        reason: `the provider reports ${s}`,
        effect: [`recorded that result (now ${then})`, `would record that result (then ${then})`],
      };
    }
  }
}

async function execute(api: KubeApi, job: MediaJob, view: ProviderView, p: Plan): Promise<WriteOutcome> {
  const ns = job.metadata.namespace!;
  const name = job.metadata.name;
  const now = new Date().toISOString();
  if (p.action === "reset") return resetJob(api, ns, name, now);
  if (view.state !== "found") throw new Error(`recover: ${p.action} without a provider result`);
  return applyResult(api, ns, name, view.job, now);
}

export async function recoverOne(
  api: KubeApi,
  s: StuckJob,
  view: ProviderView,
  dryRun: boolean,
): Promise<RecoverRow> {
  const { job } = s;
  const p = plan(job, view);
  const row = {
    namespace: job.metadata.namespace ?? "",
    name: job.metadata.name,
    processingForSeconds: Math.floor(s.processingForMs / 1000),
    provider: providerState(view),
    action: p.action,
  };
  if (p.failed) return { ...row, outcome: "failed", message: p.reason };
  if (!p.effect) return { ...row, outcome: "skipped", message: p.reason };
  const [done, planned] = p.effect;
  if (dryRun) return { ...row, outcome: "planned", message: `${p.reason}: ${planned}` };
  const res = await execute(api, job, view, p);
  if (!res.written) return { ...row, outcome: "skipped", message: `not changed: ${res.message}` };
  const message = `${p.reason}: ${done}`;
  const reason = p.action === "reset" ? "ResetByOperator" : "RecoveredByOperator";
  await recordEvent(api, res.job, "Normal", reason, `kubectl media recover: ${message}`);
  return { ...row, outcome: "done", message };
}

export async function run(ctx: CliContext): Promise<number> {
  const { stuck, where } = await loadStuck(ctx);
  const { api } = await ctx.kube();
  const dryRun = ctx.inv.dryRun;
  const rows: RecoverRow[] = [];
  if (stuck.length > 0) {
    const gpu = await ctx.gpu();
    for (const s of stuck) {
      const view = await askProvider(gpu, s.job);
      if (view.state === "error" && (view.code === "INVALID_API_KEY" || view.code === "ACCOUNT_PROBLEM")) {
        throw new CliError(
          `stopped before changing anything more: the GPU provider refuses the key (${view.code}): ${view.message}`,
          "run 'kubectl media check-key' and follow its fix, then run recover again",
        );
      }
      rows.push(await recoverOne(api, s, view, dryRun));
    }
  }
  const failed = rows.filter((r) => r.outcome === "failed").length;
  if (ctx.out.machine) {
    ctx.out.data({ dryRun, items: rows });
    return failed ? EXIT_PROBLEM : EXIT_OK;
  }
  if (rows.length === 0) {
    ctx.out.note(`No stuck MediaJobs in ${where}: nothing to recover.`);
    return EXIT_OK;
  }
  const all = ctx.inv.allNamespaces;
  ctx.out.table(
    [...(all ? ["namespace"] : []), "name", "processing for", "provider", "action", "result"],
    rows.map((r) => [
      ...(all ? [r.namespace] : []),
      r.name,
      humanDuration(r.processingForSeconds * 1000),
      r.provider,
      r.action,
      `${r.outcome}: ${r.message}`,
    ]),
  );
  const count = (o: Outcome) => rows.filter((r) => r.outcome === o).length;
  ctx.out.note(
    dryRun
      ? `Dry run: nothing was changed. ${count("planned")} of ${rows.length} stuck job(s) would be changed; run again without --dry-run to do it.`
      : `${rows.length} stuck job(s) in ${where}: ${count("done")} recovered, ${count("skipped")} left as they are, ${failed} failed.` +
          (failed ? " Look at a failed one with 'kubectl media status NAME'." : ""),
  );
  return failed ? EXIT_PROBLEM : EXIT_OK;
}
