// Installs the generated CRDs (from the zod schemas, not from files) and waits until the apiserver
// serves them: Established, and the resource answers a list.
import type { KubeConfig } from "@kubernetes/client-node";
import { allCustomResourceDefinitions } from "../../src/crds/index.js";
import { KubeApi } from "../../src/k8s/api.js";
import { isAlreadyExists } from "../../src/k8s/errors.js";

const CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

interface Crd {
  metadata: {
    name: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  status?: { conditions?: Array<{ type: string; status: string }> };
}

/**
 * `owner` adds labels and annotations to every CRD (dev-up gives them the Helm ownership of the
 * CRD release, so that release can adopt them).
 */
export async function installCrds(
  kc: KubeConfig,
  timeoutMs = 60_000,
  owner: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
): Promise<string[]> {
  const api = new KubeApi(kc);
  const crds = (allCustomResourceDefinitions() as unknown as Crd[]).map((crd) => ({
    ...crd,
    metadata: {
      ...crd.metadata,
      labels: { ...crd.metadata.labels, ...owner.labels },
      annotations: { ...crd.metadata.annotations, ...owner.annotations },
    },
  }));
  for (const crd of crds) {
    try {
      await api.rawJson("POST", CRDS, crd);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      const current = await api.rawJson<Crd>("GET", `${CRDS}/${crd.metadata.name}`);
      await api.rawJson("PUT", `${CRDS}/${crd.metadata.name}`, {
        ...crd,
        metadata: { ...crd.metadata, resourceVersion: current.metadata.resourceVersion },
      });
    }
  }
  const deadline = Date.now() + timeoutMs;
  for (const crd of crds) {
    for (;;) {
      const current = await api.rawJson<Crd>("GET", `${CRDS}/${crd.metadata.name}`);
      if (current.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) break;
      if (Date.now() > deadline)
        throw new Error(`CRD ${crd.metadata.name} not Established after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return crds.map((c) => c.metadata.name);
}
