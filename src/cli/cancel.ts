// cancel <mediajob>: sets spec.cancel, for good. The controller does the rest: a waiting job ends
// Cancelled without reaching the provider; a running one is cancelled there and followed until the
// provider reports it ended (a worker may run on, and be billed, after a cancel), then ends
// Cancelled with what the provider reported. Idempotent: a job cancelled already, or finished, is
// left as it is.
import type { MediaJob } from "../crds/mediajob.js";
import { isTerminal } from "../mediajob/job.js";
import type { CliContext } from "./context.js";
import { EXIT_OK } from "./errors.js";
import { getJob, recordEvent } from "./jobs.js";
import { jobPhase } from "../mediajob/job.js";

export async function run(ctx: CliContext): Promise<number> {
  const name = ctx.inv.args[0]!;
  const { api } = await ctx.kube();
  const namespace = await ctx.namespace();
  const job = await getJob(api, namespace, name);
  const phase = jobPhase(job.status);
  if (isTerminal(phase)) {
    ctx.out.line(`mediajob.media-orchestrator.io/${name} is ${phase} already: nothing to cancel`);
    return EXIT_OK;
  }
  if (job.spec.cancel) {
    ctx.out.line(`mediajob.media-orchestrator.io/${name} is being cancelled already (${phase})`);
    return EXIT_OK;
  }
  const patched = await api.mergePatch<MediaJob>("mediajobs", namespace, name, { spec: { cancel: true } });
  const at = job.status?.providerJobId ? ` (provider job ${job.status.providerJobId})` : "";
  await recordEvent(api, patched, "Normal", "CancelRequested", `spec.cancel set${at}`);
  ctx.out.line(`mediajob.media-orchestrator.io/${name} cancel requested${at}`);
  ctx.out.line(
    phase === "Processing"
      ? `The controller cancels it at the provider and follows it until the provider reports it ended. ` +
          `Follow it with: kubectl get mediajob ${name} -n ${namespace} -w`
      : `It ends Cancelled without being submitted.`,
  );
  return EXIT_OK;
}
