// complete <mediajob>: for a job the provider shows COMPLETED whose callback was missed. The
// provider's output is applied exactly as the callback would have applied it; the controller then
// creates the next pipeline step by itself.
import { nextStepName } from "../mediajob/pipeline.js";
import type { CliContext } from "./context.js";
import { CliError, EXIT_OK } from "./errors.js";
import {
  applyResult,
  askProvider,
  getJob,
  providerErrorHint,
  recordEvent,
  type ProviderView,
} from "./jobs.js";

export async function run(ctx: CliContext): Promise<number> {
  const name = ctx.inv.args[0]!;
  const { api } = await ctx.kube();
  const namespace = await ctx.namespace();
  const statusCmd = `kubectl media status ${name} -n ${namespace}`;
  const resetCmd = `kubectl media reset ${name} -n ${namespace}`;
  const job = await getJob(api, namespace, name);
  const phase = job.status?.phase;
  if (phase === "Completed") {
    ctx.out.line(`mediajob.media-orchestrator.io/${name} is already Completed: nothing to do`);
    return EXIT_OK;
  }
  if (phase !== "Processing") {
    throw new CliError(
      `refused to complete MediaJob ${namespace}/${name}: it is ${phase ?? "without a phase"}, not Processing`,
      phase === "Pending"
        ? "a Pending job is (re)submitted by the controller within one tick; nothing to complete"
        : `see the job with '${statusCmd}'`,
    );
  }
  const view = await askProvider(await ctx.gpu(), job);
  if (view.state !== "found" || view.job.status !== "COMPLETED")
    throw refusal(namespace, name, view, statusCmd, resetCmd);

  const res = await applyResult(api, namespace, name, view.job, new Date().toISOString());
  if (!res.written) {
    throw new CliError(
      `did not complete MediaJob ${namespace}/${name}: ${res.message}`,
      `the job changed while this ran; look again with '${statusCmd}'`,
    );
  }
  await recordEvent(
    api,
    res.job,
    "Normal",
    "CompletedByOperator",
    `completed from the provider's result for job ${view.id} (the callback was missed)`,
  );
  const keys = Object.keys(res.job.status?.output ?? {});
  ctx.out.line(`mediajob.media-orchestrator.io/${name} completed from the provider's result`);
  ctx.out.line(`  provider job ${view.id} on endpoint ${view.endpointId}; output {${keys.join(", ")}}`);
  const next = job.spec.then?.[0];
  if (next) {
    ctx.out.line(
      `The controller now creates the next pipeline step: MediaJob ${nextStepName(job)} (${next.workload}). ` +
        `Follow it with: kubectl get mediajobs -n ${namespace} -w`,
    );
  } else {
    ctx.out.line("This was the last step of its pipeline.");
  }
  return EXIT_OK;
}

function refusal(
  ns: string,
  name: string,
  view: ProviderView,
  statusCmd: string,
  resetCmd: string,
): CliError {
  const what = `refused to complete MediaJob ${ns}/${name}`;
  switch (view.state) {
    case "found": {
      const s = view.job.status;
      if (s === "IN_QUEUE" || s === "IN_PROGRESS") {
        return new CliError(
          `${what}: the provider says the job is still running (${s}), not COMPLETED`,
          `wait for it; check again with '${statusCmd}'`,
        );
      }
      return new CliError(
        `${what}: the provider reports ${s}, not COMPLETED; there is no output to take`,
        `run it again with '${resetCmd}', or let 'kubectl media recover' record the ${s} result`,
      );
    }
    case "not-found":
      return new CliError(
        `${what}: the provider does not know job ${view.id} (lost, expired or never received)`,
        `replay it with '${resetCmd}'`,
      );
    case "not-submitted":
      return new CliError(`${what}: ${view.message}`, `resubmit it with '${resetCmd}'`);
    case "error":
      return new CliError(
        `${what}: could not read the job's status at the provider: ${view.message}`,
        providerErrorHint(view),
      );
  }
}
