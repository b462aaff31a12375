// The edge half of the presigned I/O per attempt: signs the URLs of a plan (attempt-io.ts) and
// puts them where the worker reads them, the job's input under `_mediaOrchestrator` (the worker
// contract, docs/provider.md). The URLs are bearer secrets for their lifetime: they travel only in
// the body sent to the provider, never into logs, Events, status or metrics (status keeps keys).
import type { AttemptIOPlan } from "./attempt-io.js";
import type { StoreSigner } from "./signer.js";

/** The key of the job's input under which the worker finds its URLs. */
export const MEDIA_IO_FIELD = "_mediaOrchestrator";

/** What a worker receives (version 1 of the worker contract). */
export interface MediaOrchestratorIO {
  version: 1;
  attempt: number;
  /** When every URL below stops working (RFC 3339). */
  expiresAt: string;
  inputs: Record<string, { url: string; sha256?: string; size?: number }>;
  outputs: Record<string, { url: string; method: "PUT" }>;
}

export async function mintAttemptIO(plan: AttemptIOPlan, signer: StoreSigner): Promise<MediaOrchestratorIO> {
  const sign = (method: "GET" | "PUT", key: string) =>
    signer.presign(method, key, plan.expiresInSeconds, plan.signedAt);
  const inputs: MediaOrchestratorIO["inputs"] = {};
  for (const g of plan.gets)
    inputs[g.name] = {
      url: await sign("GET", g.key),
      ...(g.sha256 !== undefined && { sha256: g.sha256 }),
      ...(g.size !== undefined && { size: g.size }),
    };
  const outputs: MediaOrchestratorIO["outputs"] = {};
  for (const p of plan.puts) outputs[p.name] = { url: await sign("PUT", p.key), method: "PUT" };
  return {
    version: 1,
    attempt: plan.scope.attempt,
    expiresAt: new Date(plan.signedAt.getTime() + plan.expiresInSeconds * 1000).toISOString(),
    inputs,
    outputs,
  };
}

/**
 * The input sent to the provider: the job's own input with the attempt's URLs beside it. A
 * `_mediaOrchestrator` the user wrote is replaced: only the controller speaks for the store.
 */
export function withAttemptIO(
  input: Record<string, unknown> | undefined,
  io: MediaOrchestratorIO,
): Record<string, unknown> {
  return { ...input, [MEDIA_IO_FIELD]: io };
}
