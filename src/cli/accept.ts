// accept <mediajob>: an operator vouches for a provider job that the job's callback named while its
// submission's answer was lost (condition Submitted, reason AdoptedByCallback). The controller holds
// such a job's next pipeline step back, because the caller of a callback URL chooses the job it
// names; the accepted id goes into an annotation (written with the resourceVersion read, so it is
// the id the operator saw), and the controller then feeds the output forward.
import { ACCEPTED_PROVIDER_JOB_ANNOTATION, adoptedWithoutEvidence } from "../callback/adoption.js";
import type { MediaJob } from "../crds/mediajob.js";
import type { CliContext } from "./context.js";
import { CliError, EXIT_OK } from "./errors.js";
import { getJob, recordEvent } from "./jobs.js";

export async function run(ctx: CliContext): Promise<number> {
  const name = ctx.inv.args[0]!;
  const { api } = await ctx.kube();
  const namespace = await ctx.namespace();
  const job = await getJob(api, namespace, name);
  const id = job.status?.providerJobId;
  if (!id || !adoptedWithoutEvidence(job)) {
    throw new CliError(
      `refused to accept MediaJob ${namespace}/${name}: its provider id was not adopted from a callback, or is accepted already`,
      `see the job with 'kubectl media status ${name} -n ${namespace}'`,
    );
  }
  const patched = await api.mergePatch<MediaJob>("mediajobs", namespace, name, {
    metadata: {
      resourceVersion: job.metadata.resourceVersion,
      annotations: { [ACCEPTED_PROVIDER_JOB_ANNOTATION]: id },
    },
  });
  await recordEvent(
    api,
    patched,
    "Normal",
    "AdoptionAccepted",
    `provider job ${id}, adopted from a callback, accepted by an operator: the next pipeline step may run`,
  );
  ctx.out.line(`mediajob.media-orchestrator.io/${name} accepted: provider job ${id}`);
  ctx.out.line(
    `The controller creates the next pipeline step within one tick, if the job has one. ` +
      `Follow it with: kubectl get mediajob ${name} -n ${namespace} -w`,
  );
  return EXIT_OK;
}
