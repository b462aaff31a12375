// The namespaces a test file creates are removed after it (test/setup/namespaces.ts), although the
// local control plane runs no namespace controller: objects first, finalizers included, then the
// namespace itself.
import { CoreV1Api } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { createTestNamespace, deleteTestNamespaces, testKubeConfig } from "../support/kube.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const core = kc.makeApiClient(CoreV1Api);

describe("test namespaces", () => {
  it("are removed with their objects, a MediaJob's finalizer included", async () => {
    const ns = await createTestNamespace(kc, "cleanup");
    await api.create(
      "mediajobs",
      ns,
      makeMediaJob("held")
        .finalizers("media-orchestrator.io/cancel-at-provider")
        .input({ audio: "s3://a/b.wav" })
        .build(),
    );
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: "key" } } });

    await deleteTestNamespaces(kc);

    const names = (await core.listNamespace()).items.map((n) => n.metadata?.name);
    expect(names).not.toContain(ns);
    const jobs = await api.list<MediaJob>("mediajobs");
    expect(jobs.items.filter((j) => j.metadata.namespace === ns)).toEqual([]);
    const secrets = await core.listSecretForAllNamespaces({ fieldSelector: `metadata.namespace=${ns}` });
    expect(secrets.items).toEqual([]);
  });
});
