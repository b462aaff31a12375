// Per-file access to the run's control plane: a kubeconfig, an API door, and a namespace of the
// file's own (so files running side by side never see each other's objects).
import { randomBytes } from "node:crypto";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { inject } from "vitest";
import { KubeApi, type Plural } from "../../src/k8s/api.js";
import { GROUP, RESOURCE_DEFINITIONS, VERSION } from "../../src/crds/index.js";

export function testKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(inject("kubeconfig"));
  return kc;
}

export function testKubeconfigPath(): string {
  return inject("kubeconfig");
}

// The namespaces this test file created; test/setup/namespaces.ts removes them after the file.
const createdNamespaces = new Set<string>();

/** Creates a fresh namespace named after the test file; it is removed once the file has run. */
export async function createTestNamespace(kc: KubeConfig, prefix: string): Promise<string> {
  const slug = prefix
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .slice(0, 40)
    .replace(/-+$/, "");
  const name = `${slug}-${randomBytes(3).toString("hex")}`;
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  createdNamespaces.add(name);
  return name;
}

// What the tests leave in a namespace besides the project's resources: the Secrets of API keys,
// Events, and the Leases of leader election.
const CORE_COLLECTIONS = [
  "/api/v1/namespaces/{ns}/secrets",
  "/api/v1/namespaces/{ns}/configmaps",
  "/api/v1/namespaces/{ns}/events",
  "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
];

/**
 * Removes every namespace this file created. The local control plane runs no namespace controller
 * (no kube-controller-manager), so deleting a namespace alone would leave it Terminating with its
 * objects forever. This does that controller's work: delete the objects (a MediaJob keeps its
 * finalizer until the controller releases it, and no controller runs any more, so the finalizers
 * are cleared after the delete, when none can be added back), then delete the namespace and
 * finalize it (https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/).
 */
export async function deleteTestNamespaces(kc: KubeConfig = testKubeConfig()): Promise<void> {
  const api = new KubeApi(kc);
  for (const ns of [...createdNamespaces]) {
    for (const def of RESOURCE_DEFINITIONS) {
      const collection = `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${def.plural}`;
      await api.rawJson("DELETE", collection);
      const { items } = await api.list(def.plural as Plural, ns);
      for (const obj of items) {
        if (!(obj.metadata.finalizers as string[] | undefined)?.length) continue;
        await api
          .mergePatch(def.plural as Plural, ns, obj.metadata.name, { metadata: { finalizers: null } })
          .catch((err: unknown) => {
            if ((err as { code?: number }).code !== 404) throw err;
          });
      }
    }
    for (const path of CORE_COLLECTIONS) await api.rawJson("DELETE", path.replace("{ns}", ns));
    await api.rawJson("DELETE", `/api/v1/namespaces/${ns}`);
    await api.rawJson("PUT", `/api/v1/namespaces/${ns}/finalize`, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: ns },
      spec: { finalizers: [] },
    });
    createdNamespaces.delete(ns);
  }
}

/** Established is not quite served: wait until every resource answers a list. */
export async function waitForServed(kc: KubeConfig, timeoutMs = 30_000): Promise<void> {
  const api = new KubeApi(kc);
  const deadline = Date.now() + timeoutMs;
  for (const def of RESOURCE_DEFINITIONS) {
    for (;;) {
      try {
        await api.list(def.plural as never);
        break;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
}

/** Polls until `probe` returns a value (not undefined/false) or the time is up. */
export async function eventually<T>(
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  opts: { timeoutMs?: number; intervalMs?: number; message?: string | (() => string) } = {},
): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  let lastError: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${(typeof opts.message === "function" ? opts.message() : opts.message) ?? "condition not met"} within ${opts.timeoutMs ?? 20_000} ms` +
          (lastError ? `: ${String((lastError as Error).message ?? lastError)}` : ""),
      );
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 100));
  }
}

export interface RecordedEvent {
  type: string;
  reason: string;
  message: string;
}

/** The Events recorded about one object, as `kubectl describe` would list them. */
export async function eventsOf(kc: KubeConfig, namespace: string, name: string): Promise<RecordedEvent[]> {
  const list = await kc
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` });
  return list.items.map((e) => ({ type: e.type ?? "", reason: e.reason ?? "", message: e.message ?? "" }));
}
