// stuck: MediaJobs in Processing longer than the expected timeout (the runbook's step 1).
import type { CliContext } from "./context.js";
import { humanDuration } from "./duration.js";
import { EXIT_OK, EXIT_PROBLEM } from "./errors.js";
import { findStuck, listJobs, type StuckJob } from "./jobs.js";

export async function loadStuck(ctx: CliContext): Promise<{ stuck: StuckJob[]; where: string }> {
  const { api } = await ctx.kube();
  const namespace = await ctx.listNamespace();
  const { env } = await ctx.config();
  const jobs = await listJobs(api, namespace);
  const stuck = findStuck(jobs, Date.now(), {
    olderThanMs: ctx.inv.olderThanMs,
    defaultTimeoutSeconds: env.JOB_TIMEOUT_SECONDS,
  });
  return { stuck, where: namespace === undefined ? "any namespace" : `namespace "${namespace}"` };
}

export async function run(ctx: CliContext): Promise<number> {
  const { stuck, where } = await loadStuck(ctx);
  if (ctx.out.machine) {
    ctx.out.data({
      items: stuck.map(({ job, processingForMs, limitMs }) => ({
        namespace: job.metadata.namespace,
        name: job.metadata.name,
        workload: job.spec.workload,
        jobId: job.status?.jobId ?? null,
        providerJobId: job.status?.providerJobId ?? null,
        endpointId: job.status?.endpointId ?? null,
        attempts: job.status?.attempts ?? 0,
        submittedAt: job.status?.submittedAt ?? null,
        processingForSeconds: Math.floor(processingForMs / 1000),
        limitSeconds: limitMs / 1000,
      })),
    });
  } else if (stuck.length === 0) {
    ctx.out.note(`No stuck MediaJobs in ${where}.`);
  } else {
    const all = ctx.inv.allNamespaces;
    ctx.out.table(
      [
        ...(all ? ["namespace"] : []),
        "name",
        "workload",
        "endpoint",
        "provider job",
        "attempts",
        "processing for",
        "limit",
      ],
      stuck.map(({ job, processingForMs, limitMs }) => [
        ...(all ? [job.metadata.namespace ?? ""] : []),
        job.metadata.name,
        job.spec.workload,
        job.status?.endpointId ?? "<none>",
        job.status?.providerJobId ?? "<none>",
        String(job.status?.attempts ?? 0),
        humanDuration(processingForMs),
        humanDuration(limitMs),
      ]),
    );
    ctx.out.note(
      `${stuck.length} stuck MediaJob(s) in ${where}. Inspect one with 'kubectl media status NAME'; ` +
        "recover them all with 'kubectl media recover' (try --dry-run first).",
    );
  }
  return stuck.length > 0 ? EXIT_PROBLEM : EXIT_OK;
}
