// Per-file access to the run's control plane: a kubeconfig, an API door, and a namespace of the
// file's own (so files running side by side never see each other's objects).
import { randomBytes } from "node:crypto";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { inject } from "vitest";
import { KubeApi } from "../../src/k8s/api.js";
import { RESOURCE_DEFINITIONS } from "../../src/crds/index.js";

export function testKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(inject("kubeconfig"));
  return kc;
}

export function testKubeconfigPath(): string {
  return inject("kubeconfig");
}

/** Creates a fresh namespace named after the test file. */
export async function createTestNamespace(kc: KubeConfig, prefix: string): Promise<string> {
  const slug = prefix
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .slice(0, 40)
    .replace(/-+$/, "");
  const name = `${slug}-${randomBytes(3).toString("hex")}`;
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  return name;
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
