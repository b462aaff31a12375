// Outputs a worker left behind a foreign URL instead of writing them through its presigned PUT
// (docs/provider.md, "_mediaOrchestrator"; docs/design.md, "Outputs kept before the provider
// forgets them"): the worker reports `url` beside the output's sha256 and size, and the
// controller copies the bytes into the store under the attempt's own key before the provider's
// retention ends. The URL is secret-bearing (a presigned GET of the provider's bucket): status
// keeps the report with the URL redacted, and the controller reads the URL again from the
// provider's own result when it copies. Pure: the decision on what a copy's outcome makes of the
// attempt; src/controller/mediajob/keep-outputs.ts does the copy.
import type { ReportedOutputs } from "../storage/output-check.js";

/** What status.output keeps in place of a reported output's URL. */
export const REDACTED_URL = "redacted: the controller keeps the object under the job's own key";

/** Whether a worker reported this output behind a URL of its own (to be kept by the controller). */
export function isHosted(report: ReportedOutputs[string] | undefined): boolean {
  return typeof (report as { url?: unknown } | undefined)?.url === "string";
}

/**
 * The worker's output with every `_mediaOrchestrator.outputs.<name>.url` replaced by REDACTED_URL,
 * so no writer of the result (the sidecar's callback, the controller's poll, the CLI) puts the
 * URL in status. Anything else is returned as it is.
 */
export function redactOutputUrls(output: unknown): unknown {
  if (output === null || typeof output !== "object" || Array.isArray(output)) return output;
  const io = (output as { _mediaOrchestrator?: unknown })._mediaOrchestrator;
  if (io === null || typeof io !== "object" || Array.isArray(io)) return output;
  const outputs = (io as { outputs?: unknown }).outputs;
  if (outputs === null || typeof outputs !== "object" || Array.isArray(outputs)) return output;
  let changed = false;
  const redacted: Record<string, unknown> = {};
  for (const [name, report] of Object.entries(outputs as Record<string, unknown>)) {
    if (report !== null && typeof report === "object" && "url" in report) {
      changed = true;
      redacted[name] = { ...(report as object), url: REDACTED_URL };
    } else redacted[name] = report;
  }
  if (!changed) return output;
  return { ...(output as object), _mediaOrchestrator: { ...(io as object), outputs: redacted } };
}

/** Why a hosted output was not kept, as the copy found it. */
export interface NotKept {
  name: string;
  /** Fit for status and Events: never the URL. */
  cause: string;
  /** The same URL may work later (a 5xx, a timeout, a broken answer) while the provider holds the result. */
  transient: boolean;
}

export type KeepDecision = { retry: string } | { fail: { reason: "OutputNotKept"; message: string } };

/**
 * What a copy that did not keep an output makes of the attempt: a transient failure is tried
 * again at the next pass (which reads the provider's result again: once the provider has
 * forgotten it, the failure is final); anything else fails the attempt (OutputNotKept), retried
 * by the job's policy like a FAILED run.
 */
export function decideNotKept(n: NotKept): KeepDecision {
  const message = `output ${n.name} was not kept in the object store: ${n.cause}`;
  return n.transient ? { retry: message } : { fail: { reason: "OutputNotKept", message } };
}
