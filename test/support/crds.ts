// Installs the generated CRDs (from the zod schemas, not from files) and waits until the apiserver
// serves them: Established, and the resource answers a list. Then the tenancy admission policies
// (src/crds/admission-policy.ts), with the local stack's processes (the admin kubeconfig, group
// system:masters) as its operators, as the chart's own release would name its ServiceAccounts.
import type { KubeConfig } from "@kubernetes/client-node";
import { accountBindingPolicy, operatorOnlyPolicy } from "../../src/crds/admission-policy.js";
import { allCustomResourceDefinitions, allRulesPolicies } from "../../src/crds/index.js";
import { KubeApi } from "../../src/k8s/api.js";
import { describeError, isAlreadyExists } from "../../src/k8s/errors.js";
import { makeGpuEndpoint } from "./builders.js";

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
  await installPolicies(api, owner);
  return crds.map((c) => c.metadata.name);
}

const ADMISSION = "/apis/admissionregistration.k8s.io/v1";

/**
 * The resources' rules and the binding policy (with `owner`'s metadata, as the CRDs: they belong to
 * the CRD release) and an operator-only policy whose operators are the group system:masters. Returns
 * once the apiserver enforces the rules (it loads a new policy a moment after it is created).
 */
export async function installPolicies(
  api: KubeApi,
  owner: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
): Promise<void> {
  type Obj = {
    kind: string;
    metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  };
  const owned = (o: Obj): Obj => ({
    ...o,
    metadata: {
      ...o.metadata,
      ...(owner.labels && { labels: { ...o.metadata.labels, ...owner.labels } }),
      ...(owner.annotations && { annotations: { ...o.metadata.annotations, ...owner.annotations } }),
    },
  });
  const objects = [
    ...(allRulesPolicies() as Obj[]).map(owned),
    ...(accountBindingPolicy("false") as Obj[]).map(owned),
    ...(operatorOnlyPolicy({
      name: "media-orchestrator-operator-only",
      operatorGroups: JSON.stringify(["system:masters"]),
      operatorUsers: "[]",
    }) as Obj[]),
  ];
  for (const obj of objects) {
    const path = `${ADMISSION}/${obj.kind === "ValidatingAdmissionPolicy" ? "validatingadmissionpolicies" : "validatingadmissionpolicybindings"}`;
    try {
      await api.rawJson("POST", path, obj);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      const current = await api.rawJson<Crd>("GET", `${path}/${obj.metadata.name}`);
      await api.rawJson("PUT", `${path}/${obj.metadata.name}`, {
        ...obj,
        metadata: { ...obj.metadata, resourceVersion: current.metadata.resourceVersion },
      });
    }
  }
  await untilRulesEnforced(api);
}

/**
 * A server-side dry run of a GpuEndpoint that breaks its rule (maxWorkers below minWorkers), until
 * the rules' policy refuses it: then the apiserver enforces the policies created with it.
 */
async function untilRulesEnforced(api: KubeApi, timeoutMs = 30_000): Promise<void> {
  const path = `${api.objectPath("gpuendpoints", "default")}?dryRun=All`;
  const probe = makeGpuEndpoint("rules-probe", "asr").spec({ minWorkers: 2, maxWorkers: 1 }).build();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await api.rawJson("POST", path, probe);
    } catch (err) {
      if (describeError(err).includes("maxWorkers must be")) return;
      if (Date.now() > deadline) throw err;
    }
    if (Date.now() > deadline)
      throw new Error(`the resources' admission rules not enforced after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
