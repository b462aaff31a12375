// The edge half of the presigned I/O per attempt: signs the URLs of a plan (attempt-io.ts) and
// puts them where the worker reads them: the job's input under `_mediaOrchestrator`, beside the
// submission's identity (the worker contract, docs/provider.md). The URLs are bearer secrets for their lifetime: they travel only in
// the body sent to the provider, never into logs, Events, status or metrics (status keeps keys).
import { SUBMISSION_IDENTITY_KEY } from "../mediajob/submission-identity.js";
import type { AttemptIOPlan } from "./attempt-io.js";
import type { StoreSigner } from "./signer.js";

/**
 * What a worker finds beside the submission's identity (src/mediajob/submission-identity.ts) under
 * `_mediaOrchestrator`: the attempt's URLs and when they stop working.
 */
export interface AttemptIO {
  /** When every URL below stops working (RFC 3339). */
  expiresAt: string;
  inputs: Record<string, { url: string; sha256?: string; size?: number }>;
  outputs: Record<string, { url: string; method: "PUT" }>;
}

export async function mintAttemptIO(plan: AttemptIOPlan, signer: StoreSigner): Promise<AttemptIO> {
  const sign = (method: "GET" | "PUT", key: string) =>
    signer.presign(method, key, plan.expiresInSeconds, plan.signedAt);
  const inputs: AttemptIO["inputs"] = {};
  for (const g of plan.gets)
    inputs[g.name] = {
      url: await sign("GET", g.key),
      ...(g.sha256 !== undefined && { sha256: g.sha256 }),
      ...(g.size !== undefined && { size: g.size }),
    };
  const outputs: AttemptIO["outputs"] = {};
  for (const p of plan.puts) outputs[p.name] = { url: await sign("PUT", p.key), method: "PUT" };
  return {
    expiresAt: new Date(plan.signedAt.getTime() + plan.expiresInSeconds * 1000).toISOString(),
    inputs,
    outputs,
  };
}

/**
 * The input sent to the provider: `input` as withSubmissionIdentity made it (the user's input, the
 * identity under `_mediaOrchestrator`), with the attempt's URLs added to that object. Called after
 * withSubmissionIdentity, which has replaced whatever the user wrote there: only the controller
 * speaks under that key.
 */
export function withAttemptIO(input: Record<string, unknown>, io: AttemptIO): Record<string, unknown> {
  const own = input[SUBMISSION_IDENTITY_KEY];
  const identity = own !== null && typeof own === "object" && !Array.isArray(own) ? own : {};
  return { ...input, [SUBMISSION_IDENTITY_KEY]: { ...identity, ...io } };
}

/**
 * `text` with the signed query of every presigned URL in it cut off: a provider that echoes the
 * request body in an error (a refusal's message goes into the job's status) must not carry an
 * attempt's URLs there. The object's path stays, which is a key, not a secret.
 */
export function redactPresigned(text: string): string {
  return text.replace(
    /(https?:\/\/[^\s"'<>?]+)\?[^\s"'<>]*X-Amz-[^\s"'<>]*/gi,
    "$1?<presigned query redacted>",
  );
}
