// The stage cache's entries in the bucket (docs/design.md, "The stage cache"). A stage whose outputs
// were stored and checked leaves an entry `<namespace>/_cache/<stage key>/<jobUid>.<attempt>`
// whose body names those outputs (keys, sizes, digests) and the worker's output. The name alone
// says which attempt's objects the entry keeps, so the retention sweep needs no read to spare
// them; the namespace first, so an entry is found only by jobs of the tenant that paid for it.
// Pure, but for lookupStage, which reads the store.
import type { StorageClient } from "./client.js";

export const CACHE_DIR = "_cache";

/** One stored output of a cached stage, as status.outputs records it. */
interface CachedOutput {
  name: string;
  key: string;
  size: number;
  sha256?: string;
}

/** An entry's body. */
export interface StageEntry {
  outputs: CachedOutput[];
  /** The worker's output (status.output) of the attempt: the next pipeline step's input.previous. */
  output?: unknown;
}

const HEX64 = /^[0-9a-f]{64}$/;
const ATTEMPT = /^[1-9][0-9]{0,8}$/;

const stagePrefix = (namespace: string, stageKey: string): string => `${namespace}/${CACHE_DIR}/${stageKey}/`;

export const stageEntryKey = (namespace: string, stageKey: string, jobUid: string, attempt: number): string =>
  `${stagePrefix(namespace, stageKey)}${jobUid}.${attempt}`;

/** An entry's parts from its key, or undefined for any other key. */
export function parseStageEntryKey(
  key: string,
): { namespace: string; stageKey: string; jobUid: string; attempt: number } | undefined {
  const parts = key.split("/");
  if (parts.length !== 4 || parts[1] !== CACHE_DIR || parts[0] === "" || !HEX64.test(parts[2]!))
    return undefined;
  const dot = parts[3]!.lastIndexOf(".");
  const jobUid = parts[3]!.slice(0, dot);
  const attempt = parts[3]!.slice(dot + 1);
  if (dot <= 0 || !ATTEMPT.test(attempt)) return undefined;
  return { namespace: parts[0]!, stageKey: parts[2]!, jobUid, attempt: Number(attempt) };
}

/** An entry's body read back, or undefined when it is not one (a hand-made object is not trusted). */
export function parseStageEntry(text: string, namespace: string): StageEntry | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  const outputs = (v as { outputs?: unknown } | null)?.outputs;
  if (!Array.isArray(outputs) || outputs.length === 0) return undefined;
  for (const o of outputs as CachedOutput[])
    if (
      typeof o?.name !== "string" ||
      typeof o.key !== "string" ||
      // Only the tenant's own objects: an entry can never point a job at another namespace's.
      !o.key.startsWith(`${namespace}/`) ||
      !Number.isSafeInteger(o.size) ||
      (o.sha256 !== undefined && !HEX64.test(o.sha256))
    )
      return undefined;
  return v as StageEntry;
}

/**
 * The newest entry of a stage in a namespace whose outputs are all still stored with their sizes,
 * or undefined (a miss). One list, one read of the entry, a HEAD per output.
 */
export async function lookupStage(
  client: Pick<StorageClient, "list" | "getText" | "head">,
  namespace: string,
  stageKey: string,
): Promise<(StageEntry & { entryKey: string }) | undefined> {
  const listed = await client.list(undefined, stagePrefix(namespace, stageKey));
  const newest = [...listed.objects].sort((a, b) => b.lastModifiedMs - a.lastModifiedMs);
  for (const candidate of newest.slice(0, 3)) {
    if (!parseStageEntryKey(candidate.key)) continue;
    const text = await client.getText(candidate.key);
    const entry = text === undefined ? undefined : parseStageEntry(text, namespace);
    if (!entry) continue;
    const heads = await Promise.all(entry.outputs.map((o) => client.head(o.key)));
    if (heads.every((h, i) => h !== undefined && h.size === entry.outputs[i]!.size))
      return { ...entry, entryKey: candidate.key };
  }
  return undefined;
}
