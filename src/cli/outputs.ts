// outputs: a completed MediaJob's outputs (status.outputs: keys, sizes, digests; never URLs), each
// with a presigned GET URL that lasts --expires (15 minutes unless told, at most 12 hours), signed
// with the store's settings and keys from the environment or --secret, as the controller signs a
// worker's (src/storage). Without them the outputs are listed without URLs. Only keys under the
// job's own prefix are signed: a status written by hand cannot make this sign another object.
import type { MediaJob } from "../crds/mediajob.js";
import { jobObjectPrefix } from "../storage/keys.js";
import type { CliContext } from "./context.js";
import { CliError, EXIT_OK, EXIT_PROBLEM } from "./errors.js";
import { humanBytes } from "./storage.js";

const DEFAULT_EXPIRES_MS = 15 * 60_000;
const MAX_EXPIRES_MS = 12 * 3_600_000;

export async function run(ctx: CliContext): Promise<number> {
  const name = ctx.inv.args[0]!;
  const expiresMs = ctx.inv.expiresMs ?? DEFAULT_EXPIRES_MS;
  if (expiresMs > MAX_EXPIRES_MS)
    throw new CliError(
      "--expires is at most 12h",
      "download URLs are short-lived: ask again when one expires",
    );
  const ns = await ctx.namespace();
  const { api } = await ctx.kube();
  const job = await api.get<MediaJob>("mediajobs", ns, name);
  if (!job) throw new CliError(`MediaJob ${ns}/${name} not found`, `kubectl get mediajobs -n ${ns}`);
  const prefix = jobObjectPrefix(ns, job.metadata.uid ?? "");
  const outputs = (job.status?.outputs ?? []).filter((o) => o.key.startsWith(prefix));
  if (outputs.length === 0) {
    const declared = job.spec.media?.outputs?.length ?? 0;
    ctx.out.note(
      declared === 0
        ? `MediaJob ${name} declares no outputs (spec.media.outputs).`
        : `MediaJob ${name} has no outputs recorded yet: it is ${job.status?.phase ?? "Pending"} ` +
            "(outputs are recorded once checked in the store, when the job is Completed).",
    );
    return EXIT_PROBLEM;
  }
  const { env } = await ctx.config();
  const { openStore } = await import("../storage/index.js");
  const store = await openStore(env);
  const signedAt = new Date();
  const expiresAt = new Date(signedAt.getTime() + Math.ceil(expiresMs / 1000) * 1000).toISOString();
  const rows = [];
  for (const o of outputs) {
    const url = store && (await store.signer.presign("GET", o.key, Math.ceil(expiresMs / 1000), signedAt));
    rows.push({ ...o, ...(url && { url, expiresAt }) });
  }
  store?.client.close();
  if (ctx.out.machine) ctx.out.data({ job: name, namespace: ns, items: rows });
  else {
    ctx.out.table(
      ["name", "size", "sha256", store ? `url (until ${expiresAt})` : "key"],
      rows.map((r) => [r.name, humanBytes(r.size), r.sha256?.slice(0, 12) ?? "-", r.url ?? r.key]),
    );
    if (!store)
      ctx.out.note(
        "No download URLs: the store's settings are not in the environment (STORAGE_BUCKET, STORAGE_ENDPOINT, " +
          "STORAGE_ACCESS_KEY_ID, STORAGE_SECRET_ACCESS_KEY; the dev stack's .local/env exports them).",
      );
  }
  return EXIT_OK;
}
