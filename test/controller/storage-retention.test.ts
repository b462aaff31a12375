// Retention of media objects against the real control plane and a real S3 server: a deleted
// MediaJob's objects go with it, the sweep deletes attempt objects of jobs that are gone, and
// never the tenants' own keys (their inputs) nor a live job's objects; each namespace's use is a
// metric.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { KubeApi, type KubeObject } from "../../src/k8s/api.js";
import { STORAGE_USAGE_ANNOTATION } from "../../src/storage/retention.js";
import { kubectlMedia } from "../support/cli.js";
import { changeBinding } from "../../src/cli/bind.js";
import { openStore, type Store } from "../../src/storage/index.js";
import { eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import { startS3Server, type S3Server } from "../support/s3server.js";
import { storeEnv } from "../support/s3store.js";
import { mediaJob, startControllerStack, type ControllerStack } from "../support/stack.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const BUCKET = "retention";
let server: S3Server;
let store: Store;
let stack: ControllerStack;

beforeAll(async () => {
  server = await startS3Server();
  const env = storeEnv(server, BUCKET);
  store = (await openStore(env))!;
  await store.client.createBucket();
  stack = await startControllerStack(kc, {
    name: "storage-retention",
    env: {
      ...(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined)) as Record<
        string,
        string
      >),
      STORAGE_SWEEP_INTERVAL_SECONDS: "1",
      STORAGE_ORPHAN_MIN_AGE_SECONDS: "0",
    },
  });
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  store?.client.close();
  await server?.stop();
});

const exists = async (key: string) => (await store.client.head(key)) !== undefined;

describe("media retention", () => {
  it("deletes a gone job's objects and orphans, keeps the tenant's inputs and a live job's objects", async () => {
    const ns = stack.ns;
    // The job names an account with no BillingAccount: it waits in Pending, alive.
    await changeBinding(api, ns, "cus_storage", "bind");
    const job = await api.create<MediaJob>(
      "mediajobs",
      ns,
      mediaJob("keeper", { workload: "asr", account: "cus_storage" }) as never,
    );
    const live = `${ns}/${job.metadata.uid}/1/out.bin`;
    const input = `${ns}/episodes/42.wav`;
    const orphan = `${ns}/${randomUUID()}/1/out.bin`;
    const otherTenant = `other-tenant/episodes/1.wav`;
    for (const key of [live, input, orphan, otherTenant]) await store.client.put(key, Buffer.from(key));

    await eventually(async () => !(await exists(orphan)), { timeoutMs: 30_000 });
    // Swept at least once more with everything else still there.
    const metrics = () =>
      stack.manager.metrics.registry.getSingleMetricAsString("media_orchestrator_storage_objects");
    await eventually(async () => (await metrics()).includes(`namespace="${ns}"} 2`), { timeoutMs: 30_000 });
    expect(await exists(live)).toBe(true);
    expect(await exists(input)).toBe(true);
    expect(await exists(otherTenant)).toBe(true);
    // The namespace's summary, for its tenants and kubectl media storage (no bucket credentials).
    const summary = async () =>
      (
        (await api.get<KubeObject>("namespaces", "", ns))?.metadata.annotations as
          Record<string, string> | undefined
      )?.[STORAGE_USAGE_ANNOTATION];
    await eventually(async () => (await summary()) !== undefined, { timeoutMs: 30_000 });
    const bytes = Buffer.byteLength(live) + Buffer.byteLength(input);
    expect(JSON.parse((await summary())!)).toEqual({ objects: 2, bytes, orphans: 0, orphanBytes: 0 });
    const run = await kubectlMedia(["storage", "-n", ns, "-o", "json"], { KUBECONFIG: testKubeconfigPath() });
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({
      items: [{ namespace: ns, objects: 2, bytes, orphans: 0, orphanBytes: 0 }],
    });
    const table = await kubectlMedia(["storage", "-n", ns], { KUBECONFIG: testKubeconfigPath() });
    expect(table.stdout).toMatch(new RegExp(`^${ns}\\s+2\\s+${bytes} B\\s+0$`, "m"));
    // At rest, the summary is not written again.
    const rv = (await api.get<KubeObject>("namespaces", "", ns))!.metadata.resourceVersion;
    await new Promise((r) => setTimeout(r, 2_500));
    expect((await api.get<KubeObject>("namespaces", "", ns))!.metadata.resourceVersion).toBe(rv);

    // The job deleted: its objects go with it; the tenant's input stays.
    await api.delete("mediajobs", ns, "keeper");
    await eventually(async () => !(await exists(live)), { timeoutMs: 30_000 });
    expect(await exists(input)).toBe(true);
    const deleted = await stack.manager.metrics.registry.getSingleMetricAsString(
      "media_orchestrator_storage_objects_deleted_total",
    );
    expect(deleted).toMatch(/reason="orphan"} [1-9]/);
  }, 120_000);
});
