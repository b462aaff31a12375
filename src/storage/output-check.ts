// Before a job is Completed, its declared outputs are checked in the store: each exists, has the
// size the worker reported, and, when the worker reported a digest, the bytes have it. A provider's
// COMPLETED with an output missing is a failure of its own (OutputMissing), retried by policy like
// a FAILED run: a worker that returned without uploading (or whose upload was refused) must not
// leave a Completed job pointing at nothing. verifyOutputs is the pure decision; inspectOutputs
// gathers the facts (a HEAD per output, a streamed SHA-256 only where a digest was reported).
import type { ObjectHead, StorageClient } from "./client.js";

/** What the worker reported under `_mediaOrchestrator.outputs` in its output (the worker contract). */
export type ReportedOutputs = Record<string, { sha256?: unknown; size?: unknown }>;

/** The facts of one declared output: its key, what the store holds, the stored bytes' SHA-256 if read. */
export interface StoredOutput {
  name: string;
  key: string;
  head: ObjectHead | undefined;
  sha256?: string;
}

/** An output as status records it: the key, never a URL. */
interface VerifiedOutput {
  key: string;
  size: number;
  sha256?: string;
}

export type OutputVerdict =
  | { ok: true; outputs: Record<string, VerifiedOutput> }
  | {
      ok: false;
      reason: "OutputMissing" | "OutputSizeMismatch" | "OutputDigestMismatch" | "OutputNotKept";
      message: string;
    };

/** The digests and sizes a worker reported, from its output; anything malformed counts as not reported. */
export function reportedOutputs(output: unknown): ReportedOutputs {
  const io = (output as { _mediaOrchestrator?: { outputs?: unknown } } | null)?._mediaOrchestrator?.outputs;
  if (io === null || typeof io !== "object" || Array.isArray(io)) return {};
  return io as ReportedOutputs;
}

const HEX_SHA256 = /^[0-9a-f]{64}$/;

/** The verdict on an attempt's outputs: every declared one must be stored as reported. */
export function verifyOutputs(stored: readonly StoredOutput[], reported: ReportedOutputs): OutputVerdict {
  const outputs: Record<string, VerifiedOutput> = {};
  const missing = stored.filter((s) => s.head === undefined).map((s) => s.name);
  if (missing.length)
    return {
      ok: false,
      reason: "OutputMissing",
      message: `the provider reported COMPLETED, but no object was stored for ${missing.join(", ")}`,
    };
  for (const s of stored) {
    const head = s.head!;
    const r = reported[s.name];
    if (typeof r?.size === "number" && r.size !== head.size)
      return {
        ok: false,
        reason: "OutputSizeMismatch",
        message: `output ${s.name}: ${head.size} bytes stored, ${r.size} reported by the worker`,
      };
    const digest = typeof r?.sha256 === "string" && HEX_SHA256.test(r.sha256) ? r.sha256 : undefined;
    if (digest !== undefined && s.sha256 !== digest)
      return {
        ok: false,
        reason: "OutputDigestMismatch",
        message: `output ${s.name}: the stored bytes' SHA-256 differs from the worker's report`,
      };
    outputs[s.name] = { key: s.key, size: head.size, ...(digest !== undefined && { sha256: digest }) };
  }
  return { ok: true, outputs };
}

/**
 * The facts verifyOutputs decides on: a HEAD per declared output and, where the worker reported a
 * digest and the object exists, its SHA-256 read from the store (streamed, in constant memory).
 */
export async function inspectOutputs(
  client: StorageClient,
  puts: ReadonlyArray<{ name: string; key: string }>,
  reported: ReportedOutputs,
): Promise<StoredOutput[]> {
  const facts: StoredOutput[] = [];
  for (const p of puts) {
    const head = await client.head(p.key);
    const wantsDigest = typeof reported[p.name]?.sha256 === "string";
    const sha256 = head !== undefined && wantsDigest ? await client.sha256(p.key) : undefined;
    facts.push({ name: p.name, key: p.key, head, ...(sha256 !== undefined && { sha256 }) });
  }
  return facts;
}
