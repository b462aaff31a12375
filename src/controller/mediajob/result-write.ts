// The edge that writes a provider's result onto a MediaJob's status, for every writer (the
// sidecar's callbacks, the CLI's `complete` / `recover`): a read-modify-write with the
// resourceVersion, retried on conflict with a fresh read, each read decided by the domain
// (src/mediajob/result.ts decideResult), so concurrent and repeated deliveries of the same result
// converge on one final state.
import type { MediaJob } from "../../crds/mediajob.js";
import type { KubeApi } from "../../k8s/api.js";
import { withPhaseConditions } from "../../mediajob/conditions.js";
import { decideResult, type ResultOutcome, type ResultWrite } from "../../mediajob/result.js";

export interface ResultWriteOutcome {
  outcome: ResultOutcome;
  job?: MediaJob;
  conflicts: number;
  /** The provider's id was taken from the result (a callback), not from a recorded /run answer. */
  adopted?: boolean;
}

export async function writeProviderResult(
  api: KubeApi,
  namespace: string,
  name: string,
  w: ResultWrite,
): Promise<ResultWriteOutcome> {
  let outcome: ResultOutcome = "gone";
  let adopted = false;
  const res = await api.updateStatusWithRetry<MediaJob>(
    "mediajobs",
    namespace,
    name,
    (current) => {
      const decision = decideResult(current, w);
      outcome = decision.outcome;
      adopted = decision.adopted === true;
      if (!decision.status) return undefined;
      return { ...current, status: withPhaseConditions(decision.status, current.metadata.generation, w.now) };
    },
    w.conflictAttempts ?? 8,
    w.read,
  );
  if (!res.object) return { outcome: "gone", conflicts: res.conflicts };
  return { outcome, job: res.object, conflicts: res.conflicts, ...(adopted ? { adopted } : {}) };
}
