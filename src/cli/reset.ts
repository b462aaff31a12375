// reset <mediajob>: the runbook's reset. Pending, updatedAt now, replay true, only from Processing,
// as one atomic JSON patch (docs/cli.md gives the same reset as a kubectl patch). Also the deliberate
// resubmission of a job Failed with SubmissionUnconfirmed (its submission may have run once, and
// its result never arrived): the controller never resubmits such a job by itself.
import type { CliContext } from "./context.js";
import { CliError, EXIT_OK } from "./errors.js";
import { jobNotFound, recordEvent, resetJob } from "./jobs.js";

export async function run(ctx: CliContext): Promise<number> {
  const name = ctx.inv.args[0]!;
  const { api } = await ctx.kube();
  const namespace = await ctx.namespace();
  const res = await resetJob(api, namespace, name, new Date().toISOString(), { failedUnconfirmed: true });
  if (!res.written) {
    if (!res.job) throw jobNotFound(namespace, name);
    throw new CliError(
      `refused to reset MediaJob ${namespace}/${name}: ${res.message}. A reset applies only to a Processing job, ` +
        "or to a job Failed with SubmissionUnconfirmed",
      res.job.status?.phase === "Pending"
        ? "nothing to do: a Pending job is already queued; the controller submits it within one tick"
        : `see the job with 'kubectl media status ${name} -n ${namespace}'; to run a finished job again, create a new MediaJob`,
    );
  }
  if (res.from === "Failed") {
    await recordEvent(
      api,
      res.job,
      "Warning",
      "ResubmittedByOperator",
      "a job Failed with SubmissionUnconfirmed reset to Pending (replay) by an operator: if its unconfirmed submission did run, it runs twice",
    );
    ctx.out.line(
      `mediajob.media-orchestrator.io/${name} reset: Failed (SubmissionUnconfirmed) -> Pending, replay=true`,
    );
    ctx.out.line(
      "Its earlier submission may have run at the provider: if it did, the job runs twice. " +
        `The controller submits it within one tick. Follow it with: kubectl get mediajob ${name} -n ${namespace} -w`,
    );
    return EXIT_OK;
  }
  await recordEvent(api, res.job, "Normal", "ResetByOperator", "reset to Pending (replay) by an operator");
  ctx.out.line(`mediajob.media-orchestrator.io/${name} reset: Processing -> Pending, replay=true`);
  ctx.out.line(
    `The controller resubmits it with the same job id (${res.job.status?.jobId ?? "-"}) within one tick. ` +
      `Follow it with: kubectl get mediajob ${name} -n ${namespace} -w`,
  );
  return EXIT_OK;
}
