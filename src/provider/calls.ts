// What the client tells its observer about each attempt at the GPU provider: the numbers behind
// media_orchestrator_provider_* (src/provider/metrics.ts). Label values come from fixed sets:
// operation names of this client and ProviderError codes, never ids.
import { ProviderError } from "./errors.js";

/** The job API (/v2/{endpoint}/run, /status, ...) or the management API (endpoints, keys). */
export type ProviderApi = "job" | "management";

export interface ProviderCall {
  api: ProviderApi;
  /** The client's operation: submit, status, cancel, health, checkKey, listEndpoints, ... */
  op: string;
  /** "ok", or the ProviderError code the attempt ended with (RATE_LIMITED for a 429). */
  outcome: string;
  seconds: number;
  /** The HTTP status, when an answer came. */
  status?: number;
}

const JOB_OPS: ReadonlySet<string> = new Set(["submit", "status", "cancel", "health"]);

/** Which API an operation of the client belongs to. */
export const callApi = (op: string): ProviderApi => (JOB_OPS.has(op) ? "job" : "management");

/** One attempt, timed and reported to `onCall` (when there is one) whatever it ends with. */
export function observed<T>(
  onCall: ((call: ProviderCall) => void) | undefined,
  api: ProviderApi,
  op: string,
  attempt: (timeoutMs: number) => Promise<T>,
): (timeoutMs: number) => Promise<T> {
  if (!onCall) return attempt;
  return async (timeoutMs) => {
    const started = performance.now();
    const report = (outcome: string, status?: number) =>
      onCall({
        api,
        op,
        outcome,
        seconds: (performance.now() - started) / 1000,
        ...(status !== undefined && { status }),
      });
    try {
      const result = await attempt(timeoutMs);
      report("ok");
      return result;
    } catch (err) {
      if (err instanceof ProviderError) report(err.code, err.status);
      else report("error");
      throw err;
    }
  };
}
