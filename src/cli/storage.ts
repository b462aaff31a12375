// storage: what each namespace keeps in the media bucket (objects, bytes) and the orphans the last
// sweep found and has not deleted yet, from the summary the controller's sweep writes on each
// Namespace (src/storage/retention.ts): no bucket credentials needed, nothing but Kubernetes read.
import type { KubeObject } from "../k8s/api.js";
import { kubeError } from "../k8s/errors.js";
import { readStorageSummary, type StorageSummary } from "../storage/retention.js";
import type { CliContext } from "./context.js";
import { CliError, EXIT_OK } from "./errors.js";

/** Bytes for people: B, KiB, MiB, GiB, TiB. */
export function humanBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
}

export async function run(ctx: CliContext): Promise<number> {
  const { api } = await ctx.kube();
  const only = await ctx.listNamespace();
  let namespaces: KubeObject[];
  try {
    namespaces =
      only === undefined
        ? (await api.list<KubeObject>("namespaces", "")).items
        : [await api.get<KubeObject>("namespaces", "", only)].filter((n): n is KubeObject => n !== undefined);
  } catch (err) {
    if (kubeError(err)?.code === 403)
      throw new CliError(
        "reading Namespaces is refused to this user",
        "the storage summary lives on each Namespace (annotation media-orchestrator.io/storage-usage): ask an operator, or for get on your namespace",
      );
    throw err;
  }
  const rows = namespaces.flatMap((ns) => {
    const s = readStorageSummary(ns.metadata.annotations as Record<string, string> | undefined);
    return s ? [{ namespace: ns.metadata.name, ...s }] : [];
  });
  rows.sort((a, b) => a.namespace.localeCompare(b.namespace));
  if (ctx.out.machine) ctx.out.data({ items: rows });
  else if (rows.length === 0)
    ctx.out.note(
      `No media stored ${only === undefined ? "in any namespace" : `in namespace "${only}"`}, or no sweep has run yet ` +
        "(storage off: STORAGE_BUCKET unset; the first sweep runs when a controller starts leading).",
    );
  else
    ctx.out.table(
      ["namespace", "objects", "size", "orphans"],
      rows.map((r: StorageSummary & { namespace: string }) => [
        r.namespace,
        String(r.objects),
        humanBytes(r.bytes),
        r.orphans === 0 ? "0" : `${r.orphans} (${humanBytes(r.orphanBytes)})`,
      ]),
    );
  return EXIT_OK;
}
