// The generated CRDs on the real apiserver: served, printed by kubectl, validated by the
// apiserver itself (OpenAPI + CEL), and the status subresource kept apart from spec.
import { execFileSync } from "node:child_process";
import { beforeAll, describe, expect, it } from "vitest";
import { API_VERSION } from "../../src/crds/index.js";
import { KubeApi, type KubeObject } from "../../src/k8s/api.js";
import { describeError } from "../../src/k8s/errors.js";
import { createTestNamespace, testKubeConfig, testKubeconfigPath } from "../support/kube.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";

function kubectl(...args: string[]): string {
  return execFileSync("kubectl", ["--kubeconfig", testKubeconfigPath(), "-n", ns, ...args], {
    encoding: "utf8",
  });
}

const endpoint = (name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: API_VERSION,
  kind: "GpuEndpoint",
  metadata: { name },
  spec,
});
const job = (name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: API_VERSION,
  kind: "MediaJob",
  metadata: { name },
  spec,
});

async function rejection(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return describeError(err);
  }
  throw new Error("the apiserver accepted an object it should have rejected");
}

beforeAll(async () => {
  ns = await createTestNamespace(kc, "crds");
});

describe("CRDs on the real apiserver", () => {
  it("lists the project's CRDs", () => {
    const out = execFileSync("kubectl", ["--kubeconfig", testKubeconfigPath(), "get", "crd", "-o", "name"], {
      encoding: "utf8",
    });
    for (const plural of ["mediajobs", "gpuendpoints", "paymentevents", "billingaccounts"]) {
      expect(out).toContain(`${plural}.media-orchestrator.io`);
    }
  });

  it("kubectl shows the printer columns, short names and the media category", async () => {
    await api.create("gpuendpoints", ns, endpoint("asr", { workload: "asr", minWorkers: 1, maxWorkers: 2 }));
    await api.create("mediajobs", ns, job("hello", { workload: "asr", input: { audio: "s3://a.wav" } }));

    const eps = kubectl("get", "gpuendpoints");
    expect(eps.split("\n")[0]).toMatch(/NAME\s+WORKLOAD\s+ENDPOINT ID\s+MIN\s+MAX\s+READY\s+AGE/);
    expect(eps).toMatch(/^asr\s+asr\s+1\s+2\s+\d+s$/m);

    const jobs = kubectl("get", "mj");
    expect(jobs.split("\n")[0]).toMatch(/NAME\s+WORKLOAD\s+PHASE\s+ENDPOINT\s+ATTEMPTS\s+AGE/);
    const wide = kubectl("get", "mediajobs", "-o", "wide");
    expect(wide.split("\n")[0]).toMatch(/JOB ID\s+PROVIDER JOB\s+REPLAY/);

    expect(kubectl("get", "gpuep", "-o", "name")).toContain("gpuendpoint.media-orchestrator.io/asr");
    const media = kubectl("get", "media", "-o", "name");
    expect(media).toContain("mediajob.media-orchestrator.io/hello");
    expect(media).toContain("gpuendpoint.media-orchestrator.io/asr");
  });

  it("applies the schema defaults for workers", async () => {
    const created = await api.create<KubeObject & { spec: Record<string, unknown> }>(
      "gpuendpoints",
      ns,
      endpoint("tts", { workload: "tts" }),
    );
    expect(created.spec).toMatchObject({ minWorkers: 0, maxWorkers: 3, idleTimeoutSeconds: 5 });
  });
});

describe("validation by the apiserver names the field", () => {
  it("rejects an unknown workload", async () => {
    const msg = await rejection(api.create("mediajobs", ns, job("bad-workload", { workload: "video" })));
    expect(msg).toMatch(/spec\.workload/);
    expect(msg).toMatch(/Unsupported value: "video"/);
  });

  it("rejects a MediaJob without a workload", async () => {
    const msg = await rejection(api.create("mediajobs", ns, job("no-workload", { input: {} })));
    expect(msg).toMatch(/spec\.workload: Required value/);
  });

  it("rejects maxWorkers below minWorkers (CEL)", async () => {
    const msg = await rejection(
      api.create(
        "gpuendpoints",
        ns,
        endpoint("bad-workers", { workload: "render", minWorkers: 3, maxWorkers: 1 }),
      ),
    );
    expect(msg).toMatch(/spec\.maxWorkers/);
    expect(msg).toMatch(/must be greater than or equal to spec\.minWorkers/);
  });

  it("rejects a change to spec.id, and adding or removing it", async () => {
    await api.create("mediajobs", ns, job("with-id", { workload: "tts", id: "order-42" }));
    const changed = await rejection(api.mergePatch("mediajobs", ns, "with-id", { spec: { id: "order-43" } }));
    expect(changed).toMatch(/spec\.id/);
    expect(changed).toMatch(/spec\.id is immutable/);
    const removed = await rejection(api.mergePatch("mediajobs", ns, "with-id", { spec: { id: null } }));
    expect(removed).toMatch(/spec\.id is immutable/);

    await api.create("mediajobs", ns, job("without-id", { workload: "tts" }));
    const added = await rejection(api.mergePatch("mediajobs", ns, "without-id", { spec: { id: "late" } }));
    expect(added).toMatch(/spec\.id is immutable/);

    // Other spec fields stay editable.
    const ok = await api.mergePatch<KubeObject & { spec: { timeoutSeconds?: number } }>(
      "mediajobs",
      ns,
      "with-id",
      {
        spec: { timeoutSeconds: 60 },
      },
    );
    expect(ok.spec.timeoutSeconds).toBe(60);
  });
});

describe("the status subresource", () => {
  it("keeps a status written through /status, and a spec change does not touch it", async () => {
    type Job = KubeObject & { spec: Record<string, unknown>; status?: Record<string, unknown> };
    const created = await api.create<Job>("mediajobs", ns, job("status-kept", { workload: "render" }));
    // Status sent with the main resource is ignored on create.
    expect(created.status).toBeUndefined();

    const written = await api.replaceStatus<Job>("mediajobs", {
      ...created,
      status: { phase: "Processing", jobId: "j-1", attempts: 1, replay: false },
    });
    expect(written.status).toMatchObject({ phase: "Processing", jobId: "j-1", attempts: 1 });

    const patched = await api.mergePatch<Job>("mediajobs", ns, "status-kept", {
      spec: { timeoutSeconds: 30 },
      status: { phase: "Completed" },
    });
    expect(patched.spec.timeoutSeconds).toBe(30);
    expect(patched.status).toMatchObject({ phase: "Processing", jobId: "j-1" });

    const read = await api.get<Job>("mediajobs", ns, "status-kept");
    expect(read?.status?.phase).toBe("Processing");
    expect(read?.metadata.generation).toBe(2);
  });

  it("refuses a status write with a stale resourceVersion (optimistic concurrency)", async () => {
    type Job = KubeObject & { status?: Record<string, unknown> };
    const created = await api.create<Job>("mediajobs", ns, job("stale", { workload: "asr" }));
    await api.replaceStatus<Job>("mediajobs", { ...created, status: { phase: "Pending" } });
    const msg = await rejection(
      api.replaceStatus<Job>("mediajobs", { ...created, status: { phase: "Failed" } }),
    );
    expect(msg).toMatch(/^409 Conflict/);
  });
});
