// The executor's half of outputs kept before the provider forgets them (src/mediajob/kept-outputs.ts):
// before a COMPLETED attempt's outputs are checked, each declared output the worker reported
// behind a URL of its own and not yet in the store is copied there under the attempt's key. The
// URL is read again from the provider's own result (status keeps it redacted), so the copy can
// happen only while the provider holds the result (RunPod: 30 minutes for /run); a provider that
// has forgotten it leaves the output not kept. A whole copy already at the key (an earlier pass
// copied it, its write failed) is not copied again; one cut short (keep.ts, isComplete) is.
import type { MediaJob } from "../../crds/mediajob.js";
import { isHosted, type NotKept } from "../../mediajob/kept-outputs.js";
import type { Store } from "../../storage/index.js";
import { isComplete, keepForeignOutput, KEPT_BYTES_HEADER } from "../../storage/keep.js";
import { reportedOutputs, type ReportedOutputs } from "../../storage/output-check.js";
import type { ProviderRead } from "../../mediajob/pass.js";
import type { MediaJobDeps } from "./deps.js";

/**
 * Copies the attempt's hosted outputs that are not in the store yet. Undefined when every one is
 * there (or none is hosted); why one was not kept otherwise. A store that fails throws (a
 * StorageError, no URL in it), as does a provider that cannot be read: the pass is retried.
 */
export async function keepHostedOutputs(
  d: Pick<MediaJobDeps, "onOutputKept">,
  /** The provider's status of a job (gather.ts's readProviderStatus). */
  readResult: (endpointId: string, providerJobId: string) => Promise<ProviderRead>,
  store: Store,
  job: MediaJob,
  keys: ReadonlyArray<{ name: string; key: string }>,
  reported: ReportedOutputs,
): Promise<NotKept | undefined> {
  const hosted = keys.filter((k) => isHosted(reported[k.name]));
  const missing: typeof hosted = [];
  for (const h of hosted) if (!isComplete(await store.client.head(h.key))) missing.push(h);
  if (missing.length === 0) return undefined;
  const notKept = (name: string, cause: string, transient = false): NotKept => {
    d.onOutputKept?.(transient ? "retried" : "not_kept");
    return { name, cause, transient };
  };
  const { endpointId, providerJobId } = job.status ?? {};
  if (endpointId === undefined || providerJobId === undefined)
    return notKept(missing[0]!.name, "the provider's job is not known, so its result cannot be read");
  const read = await readResult(endpointId, providerJobId);
  if ("lost" in read)
    return notKept(
      missing[0]!.name,
      "the provider no longer holds the job's result: its retention ended first",
    );
  if ("error" in read) throw new Error(`the provider's result could not be read: ${read.error}`);
  const urls = reportedOutputs(read.result.output);
  for (const m of missing) {
    const url = (urls[m.name] as { url?: unknown } | undefined)?.url;
    if (typeof url !== "string") return notKept(m.name, "the provider's result names no URL for it");
    const outcome = await keepForeignOutput({
      foreign: url,
      signPut: (bytes) => store.client.signedPut(m.key, { [KEPT_BYTES_HEADER]: String(bytes) }),
      key: m.key,
      policy: store.keep,
    });
    if (!outcome.ok) return notKept(m.name, outcome.cause, outcome.transient);
    d.onOutputKept?.("kept");
  }
  return undefined;
}
