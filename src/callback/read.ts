// A callback's read of its MediaJob. Most callbacks come for a job whose submission is recorded
// (Processing, with the provider's id): the API server's watch cache answers that without an etcd
// read. A cached object can be behind the latest write, so it settles only that case, where the
// result is then written with the object's resourceVersion and a stale one is refused (409) and
// read again. Anything else (no such job, another submission, a finished job, no provider id yet:
// the callback may have beaten the controller's record) is read from etcd before it is answered.
import type { MediaJob } from "../crds/mediajob.js";
import type { KubeApi } from "../k8s/api.js";
import { matchSubmission, type SubmissionRef } from "../mediajob/result.js";

/** Whether a cached read of the job is enough to go on with this callback. */
export const settledByCachedRead = (job: MediaJob | undefined, submission: SubmissionRef): boolean =>
  job !== undefined &&
  matchSubmission(job, submission) === "current" &&
  job.status?.providerJobId !== undefined;

export async function readCallbackJob(
  api: Pick<KubeApi, "get">,
  namespace: string,
  name: string,
  submission: SubmissionRef,
): Promise<MediaJob | undefined> {
  const cached = await api.get<MediaJob>("mediajobs", namespace, name, { fromCache: true });
  if (settledByCachedRead(cached, submission)) return cached;
  return api.get<MediaJob>("mediajobs", namespace, name);
}
