// The generated CRDs on the real apiserver: served, printed by kubectl, validated by the
// apiserver itself (the OpenAPI schema and the rules policies), and the status subresource kept apart from spec.
import { execFileSync } from "node:child_process";
import { beforeAll, describe, expect, it } from "vitest";
import { API_VERSION } from "../../src/crds/index.js";
import { KubeApi, type KubeObject } from "../../src/k8s/api.js";
import { describeError, kubeError } from "../../src/k8s/errors.js";
import { newPaymentRecord } from "../../src/webhooks/paymentrecord.js";
import { createTestNamespace, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import { changeBinding } from "../../src/cli/bind.js";

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
    expect(jobs.split("\n")[0]).toMatch(/NAME\s+WORKLOAD\s+PHASE\s+REASON\s+ENDPOINT\s+ATTEMPTS\s+AGE/);
    const wide = kubectl("get", "mediajobs", "-o", "wide");
    expect(wide.split("\n")[0]).toMatch(/AGE\s+MESSAGE\s+JOB ID\s+PROVIDER JOB\s+REPLAY/);

    expect(kubectl("get", "gpuep", "-o", "name")).toContain("gpuendpoint.media-orchestrator.io/asr");
    const media = kubectl("get", "media", "-o", "name");
    expect(media).toContain("mediajob.media-orchestrator.io/hello");
    expect(media).toContain("gpuendpoint.media-orchestrator.io/asr");
  });

  it("kubectl shows a PaymentEvent's outcome and message as the sidecar records them", async () => {
    // Exactly the record the sidecar creates for a processed event: the outcome in a label.
    const rec = newPaymentRecord(
      {
        id: "evt_columns",
        type: "customer.subscription.updated",
        created: 1_700_000_000,
        customerId: "cus_1",
      },
      ns,
      "Processed",
      "account cus_1 is active",
    );
    await api.create("paymentevents", ns, rec as unknown as KubeObject);
    const out = kubectl("get", "payev");
    expect(out.split("\n")[0]).toMatch(/NAME\s+EVENT\s+TYPE\s+OUTCOME\s+LATEST\s+AGE/);
    expect(out).toMatch(/evt_columns\s+customer\.subscription\.updated\s+Processed\s+/);
    const wide = kubectl("get", "payev", "-o", "wide");
    expect(wide.split("\n")[0]).toMatch(/MESSAGE\s+DELIVERIES/);
    expect(wide).toContain("account cus_1 is active");
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
    // The real message only: no rule line of the apiserver's beside it.
    expect(msg).not.toMatch(/some validation rules were not checked/);
  });

  it("rejects a MediaJob without a workload", async () => {
    const msg = await rejection(api.create("mediajobs", ns, job("no-workload", { input: {} })));
    expect(msg).toMatch(/spec\.workload: Required value/);
    expect(msg).not.toMatch(/some validation rules were not checked|<nil>/);
  });

  it("refuses a bad GpuEndpoint with its own message only", async () => {
    const msg = await rejection(
      api.create("gpuendpoints", ns, endpoint("bad-type", { workload: "render", maxWorkers: "many" })),
    );
    expect(msg).toMatch(/spec\.maxWorkers: Invalid value: "string"/);
    expect(msg).not.toMatch(/some validation rules were not checked|<nil>/);
  });

  it("rejects maxWorkers below minWorkers (the GpuEndpoint rules policy)", async () => {
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

describe("the spec of a submitted job is frozen (the MediaJob rules policy)", () => {
  type Job = KubeObject & { spec: Record<string, unknown>; status?: Record<string, unknown> };
  async function withStatus(name: string, spec: Record<string, unknown>, status: Record<string, unknown>) {
    const created = await api.create<Job>("mediajobs", ns, job(name, spec));
    return api.replaceStatus<Job>("mediajobs", { ...created, status });
  }

  it("refuses spec.workload patched on a finished job, as Job and RayJob do", async () => {
    await withStatus(
      "finished",
      { workload: "asr", input: { audio: "s3://a.wav" } },
      { phase: "Completed", jobId: "finished", attempts: 1, output: { text: "hi" } },
    );
    const msg = await rejection(api.mergePatch("mediajobs", ns, "finished", { spec: { workload: "tts" } }));
    expect(msg).toMatch(/spec is immutable once the job has been submitted/);
    const input = await rejection(
      api.mergePatch("mediajobs", ns, "finished", { spec: { input: { audio: "s3://b.wav" } } }),
    );
    expect(input).toMatch(/spec is immutable/);
    const read = await api.get<Job>("mediajobs", ns, "finished");
    expect(read?.spec).toMatchObject({ workload: "asr", input: { audio: "s3://a.wav" } });
  });

  it("refuses changes to a running job's spec and to its pipeline steps", async () => {
    await withStatus(
      "running",
      { workload: "asr", timeoutSeconds: 60, then: [{ workload: "tts" }] },
      { phase: "Processing", jobId: "running", attempts: 1 },
    );
    // Bound, so the account change meets the frozen spec, not the binding rule.
    await changeBinding(api, ns, "cus_1", "bind");
    for (const spec of [{ timeoutSeconds: 30 }, { then: [{ workload: "render" }] }, { account: "cus_1" }])
      expect(await rejection(api.mergePatch("mediajobs", ns, "running", { spec }))).toMatch(
        /spec is immutable/,
      );
  });

  it("lets suspend and ttlSecondsAfterFinished change, and activeDeadlineSeconds be added or lowered, never raised or removed", async () => {
    await withStatus("tunable", { workload: "asr" }, { phase: "Processing", jobId: "tunable", attempts: 1 });
    const suspended = await api.mergePatch<Job>("mediajobs", ns, "tunable", {
      spec: { suspend: true, ttlSecondsAfterFinished: 3600 },
    });
    expect(suspended.spec).toMatchObject({ suspend: true, ttlSecondsAfterFinished: 3600 });
    await api.mergePatch("mediajobs", ns, "tunable", { spec: { activeDeadlineSeconds: 600 } });
    const lowered = await api.mergePatch<Job>("mediajobs", ns, "tunable", {
      spec: { activeDeadlineSeconds: 300 },
    });
    expect(lowered.spec.activeDeadlineSeconds).toBe(300);
    const raised = await rejection(
      api.mergePatch("mediajobs", ns, "tunable", { spec: { activeDeadlineSeconds: 900 } }),
    );
    expect(raised).toMatch(/activeDeadlineSeconds may only be lowered/);
    const removed = await rejection(
      api.mergePatch("mediajobs", ns, "tunable", { spec: { activeDeadlineSeconds: null } }),
    );
    expect(removed).toMatch(/activeDeadlineSeconds may only be lowered/);
  });

  it("leaves the spec of a job never submitted editable (waiting for its account, say)", async () => {
    for (const a of ["cus_typo", "cus_right"]) await changeBinding(api, ns, a, "bind");
    await withStatus(
      "draft",
      { workload: "asr", account: "cus_typo" },
      { phase: "Pending", jobId: "draft", attempts: 0 },
    );
    const fixed = await api.mergePatch<Job>("mediajobs", ns, "draft", {
      spec: { account: "cus_right", workload: "tts" },
    });
    expect(fixed.spec).toMatchObject({ account: "cus_right", workload: "tts" });
    // Changed to an account the namespace is not bound to: refused at admission (docs/design.md, Tenancy).
    const refused = await api
      .mergePatch<Job>("mediajobs", ns, "draft", { spec: { account: "cus_elsewhere" } })
      .then(
        () => undefined,
        (err: unknown) => kubeError(err),
      );
    expect(refused?.code).toBe(403);
    expect(refused?.message).toMatch(/is not bound to account cus_elsewhere/);
  });

  it("still accepts status writes and metadata changes on a finished job", async () => {
    const done = await withStatus(
      "meta",
      { workload: "asr" },
      { phase: "Failed", jobId: "meta", attempts: 2 },
    );
    await api.replaceStatus<Job>("mediajobs", { ...done, status: { ...done.status, reason: "Failed" } });
    const labelled = await api.mergePatch<Job>("mediajobs", ns, "meta", {
      metadata: { labels: { team: "audio" } },
    });
    expect(labelled.metadata.labels).toMatchObject({ team: "audio" });
  });
});

describe("kubectl explain describes every status field", () => {
  it("mediajob.status: phase, conditions, output, submission, error, the timestamps and the rest", () => {
    const out = execFileSync(
      "kubectl",
      ["--kubeconfig", testKubeconfigPath(), "explain", "mediajob.status", "--recursive=false"],
      { encoding: "utf8" },
    );
    const fields = [...out.matchAll(/^ {2}(\w+)\t?\s+<[^>]+>\n(?: {2}enum: .*\n)?((?: {4}.*\n)*)/gm)].map(
      (m) => ({
        name: m[1]!,
        text: m[2]!.trim(),
      }),
    );
    const names = fields.map((f) => f.name);
    expect(names.length).toBeGreaterThan(15);
    for (const f of ["phase", "conditions", "output", "submission", "error", "submittedAt", "completedAt"])
      expect(names).toContain(f);
    // kubectl prints "<no description>" for a field the schema does not describe.
    const undocumented = fields
      .filter((f) => f.text === "" || f.text.includes("<no description>"))
      .map((f) => f.name);
    expect(undocumented, out).toEqual([]);
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

    // suspend: a field that stays changeable once the job was submitted.
    const patched = await api.mergePatch<Job>("mediajobs", ns, "status-kept", {
      spec: { suspend: true },
      status: { phase: "Completed" },
    });
    expect(patched.spec.suspend).toBe(true);
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
