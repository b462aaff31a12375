// The one cancel at the provider, for the pass (a cancel, a suspension, a deadline, a usage cap)
// and for a deletion: behind the leader's fence, the cancel, then the job's own status, whose
// figures (executionTime, delayTime) a stopped job's usage is recorded from (RunPod's cancel answers
// little: the id and a status). The answer is the domain's to read (afterStop, afterDeletionCancel).
import { describeError } from "../../k8s/errors.js";
import type { CancelAnswer } from "../../mediajob/stop.js";
import { isProviderError } from "../../provider/index.js";
import type { MediaJobDeps } from "./deps.js";
import { readProviderStatus } from "./gather.js";

/**
 * What became of a cancel: not sent (this replica may no longer lead), or the answer, with the
 * provider's error behind a lost job or a failed call (a deletion tells the failure apart).
 */
export type Cancelled = { fenced: true } | { answer: CancelAnswer; err?: unknown };

export async function cancelAtProvider(
  d: Pick<MediaJobDeps, "provider">,
  fenceHolds: () => boolean,
  endpointId: string,
  providerJobId: string,
): Promise<Cancelled> {
  if (!fenceHolds()) return { fenced: true };
  try {
    const res = await d.provider.cancel(endpointId, providerJobId);
    const read = await readProviderStatus(d, endpointId, providerJobId);
    return { answer: "result" in read ? { result: read.result, confirmed: true } : { result: res } };
  } catch (err) {
    return {
      answer: isProviderError(err, "JOB_NOT_FOUND") ? { lost: true } : { error: describeError(err) },
      err,
    };
  }
}
