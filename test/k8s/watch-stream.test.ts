// The watch stream of src/k8s/http.ts against the real apiserver: events arrive whole, in order,
// whatever their size (an event larger than a chunk, characters outside ASCII split between
// chunks), and the watch ends when the apiserver ends it.
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import { KubeHttp, type WatchObject } from "../../src/k8s/http.js";
import { createTestNamespace, eventually, testKubeConfig } from "../support/kube.js";

const kc = testKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const http = new KubeHttp(kc, 10_000);
let ns = "";

beforeAll(async () => {
  ns = await createTestNamespace(kc, "watch-stream");
});
afterAll(async () => {
  await http.close();
});

it("delivers every event whole, large ones and multibyte text included, then ends with the server's timeout", async () => {
  const seen: Array<{ type: string; name?: string; data?: string }> = [];
  let ended: unknown = "not yet";
  const controller = new AbortController();
  const list = await core.listNamespacedConfigMap({ namespace: ns });
  await http.watch(
    `/api/v1/namespaces/${ns}/configmaps`,
    { resourceVersion: list.metadata?.resourceVersion ?? "", timeoutSeconds: 5 },
    (type, obj: WatchObject) =>
      seen.push({ type, name: obj.metadata?.name, data: (obj.data as Record<string, string>)?.text }),
    (err) => (ended = err),
    controller.signal,
  );
  // 200 KiB of text with a 3-byte character every few bytes: chunk edges fall inside characters.
  const big = "žlutý kůň ★ ".repeat(16_000);
  const names = ["small", "big", "after"];
  for (const name of names)
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name }, data: { text: name === "big" ? big : name } },
    });
  await eventually(() => seen.length >= 3, { timeoutMs: 10_000 });
  expect(seen.map((e) => [e.type, e.name])).toEqual(names.map((n) => ["ADDED", n]));
  expect(seen[1]!.data).toBe(big);
  await eventually(() => ended !== "not yet", { timeoutMs: 15_000, message: "the watch to end" });
  expect(ended).toBeUndefined();
});
