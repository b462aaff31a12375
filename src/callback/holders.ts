// Which MediaJobs hold a provider job id: the apiserver answers from the MediaJob CRD's selectable
// field .status.providerJobId (src/crds/mediajob.ts), so any replica can ask, however fresh, and
// a callback cannot adopt for one job a provider job another job has recorded. Asked within the
// watched scope (WATCH_NAMESPACE, or every namespace), which is where the chart grants `list`.
import type { MediaJob } from "../crds/mediajob.js";
import type { KubeApi } from "../k8s/api.js";
import { kubeError } from "../k8s/errors.js";

/** `namespace/name`: who holds a provider job (a re-created object of the same name is the same user's). */
export const holderKey = (job: Pick<MediaJob, "metadata">): string =>
  `${job.metadata.namespace}/${job.metadata.name}`;

/**
 * The holders of `providerJobId` in `namespace` (undefined: every namespace), or "unsupported"
 * when the apiserver cannot filter on the field (selectableFields is beta from Kubernetes 1.31
 * and GA from 1.32; an older apiserver answers 400). Any other failure is thrown: the caller
 * answers 503 and the provider retries.
 */
export async function providerJobHolders(
  api: KubeApi,
  namespace: string | undefined,
  providerJobId: string,
  timeoutMs = 5_000,
): Promise<string[] | "unsupported"> {
  try {
    const res = await api.list<MediaJob>("mediajobs", namespace, {
      fieldSelector: `status.providerJobId=${providerJobId}`,
      pageSize: 10,
      timeoutMs,
    });
    return res.items.map(holderKey);
  } catch (err) {
    if (kubeError(err)?.code === 400) return "unsupported";
    throw err;
  }
}
