// The media rules of the MediaJob rules policy (src/crds/media-rules.ts) on the real apiserver, as
// a tenant holding the chart's `edit` role in its namespace (impersonated, as `kubectl --as`): an
// input reference must lie under the job's own namespace, in a job and in its pipeline steps, and
// an inline input over the documented limit is refused with the policy's message, never etcd's.
import { beforeAll, describe, expect, it } from "vitest";
import { changeBinding } from "../../src/cli/bind.js";
import { API_VERSION } from "../../src/crds/index.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { INLINE_INPUT_MAX_BYTES } from "../../src/crds/media-rules.js";
import { KubeApi, type KubeObject } from "../../src/k8s/api.js";
import { kubeError } from "../../src/k8s/errors.js";
import { createTestNamespace, testKubeConfig } from "../support/kube.js";
import { chartEditUser } from "../support/tenants.js";

const kc = testKubeConfig();
const admin = new KubeApi(kc);
let ns = "";
let other = "";
let tenant: KubeApi;

const job = (name: string, spec: Record<string, unknown>): KubeObject => ({
  apiVersion: API_VERSION,
  kind: "MediaJob",
  metadata: { name },
  spec: { workload: "asr", account: "cus_media_adm", ...spec },
});

async function outcome(p: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await p;
    return { code: 200, message: "" };
  } catch (err) {
    const k = kubeError(err);
    if (!k) throw err;
    return { code: k.code, message: k.message };
  }
}

beforeAll(async () => {
  ns = await createTestNamespace(kc, "media-adm");
  other = await createTestNamespace(kc, "media-adm-other");
  await changeBinding(admin, ns, "cus_media_adm", "bind");
  tenant = await chartEditUser(kc, ns, "tenant-media-adm");
});

describe("input references stay in the job's namespace", () => {
  it("a tenant naming another namespace's object is refused, and the message names its own prefix", async () => {
    const refs = [
      `s3://media/${other}/secret.wav`,
      `s3://media/${ns}/../${other}/secret.wav`,
      `s3://media/${ns}//x.wav`,
      `s3://media/${ns}`,
      `s3://media/${ns}x/a.wav`,
    ];
    for (const [i, uri] of refs.entries()) {
      const r = await outcome(
        tenant.create("mediajobs", ns, job(`steal-${i}`, { media: { inputs: [{ name: "audio", uri }] } })),
      );
      expect(r.code, uri).toBe(422);
      expect(r.message).toContain(`must be s3://<bucket>/${ns}/<key>`);
    }
    // In a later pipeline step too: the step the controller creates would carry it.
    const step = await outcome(
      tenant.create(
        "mediajobs",
        ns,
        job("steal-step", {
          then: [{ workload: "tts", media: { inputs: [{ name: "a", uri: `s3://media/${other}/a.wav` }] } }],
        }),
      ),
    );
    expect(step.code).toBe(422);
    expect(await admin.get<MediaJob>("mediajobs", ns, "steal-0")).toBeUndefined();
  });

  it("a reference under its own namespace, with declared outputs, is admitted as written", async () => {
    const uri = `s3://media/${ns}/episodes/42.wav`;
    const sha256 = "a".repeat(64);
    const r = await outcome(
      tenant.create(
        "mediajobs",
        ns,
        job("own", {
          suspend: true,
          media: {
            inputs: [{ name: "audio", uri, sha256, size: 12 }],
            outputs: [{ name: "transcript.json" }],
          },
        }),
      ),
    );
    expect(r).toEqual({ code: 200, message: "" });
    const stored = await admin.get<MediaJob>("mediajobs", ns, "own");
    expect(stored?.spec.media).toEqual({
      inputs: [{ name: "audio", uri, sha256, size: 12 }],
      outputs: [{ name: "transcript.json" }],
    });
  });

  it("the schema refuses an output name with a slash and a malformed digest", async () => {
    const r = await outcome(
      tenant.create(
        "mediajobs",
        ns,
        job("bad-names", {
          media: {
            inputs: [{ name: "a", uri: `s3://media/${ns}/a`, sha256: "XYZ" }],
            outputs: [{ name: "../x" }],
          },
        }),
      ),
    );
    expect(r.code).toBe(422);
    expect(r.message).toContain("spec.media.outputs[0].name");
    expect(r.message).toContain("spec.media.inputs[0].sha256");
  });
});

describe("the inline input's size limit", () => {
  it("a 3 MB spec.input gets the policy's message, naming the limit and the way out, not etcd's", async () => {
    const r = await outcome(
      tenant.create("mediajobs", ns, job("big", { input: { image: "A".repeat(3_000_000) } })),
    );
    expect(r.code).toBe(422);
    expect(r.message).toContain(`at most ${INLINE_INPUT_MAX_BYTES / 1024} KiB inline`);
    expect(r.message).toContain("spec.media.inputs");
    expect(r.message).not.toMatch(/etcd|ResourceExhausted|larger than max/);
  });

  it("counts nested strings and the pipeline steps' inputs together", async () => {
    const half = "B".repeat(300 * 1024);
    const nested = await outcome(
      tenant.create(
        "mediajobs",
        ns,
        job("nested", {
          input: { a: { b: [{ c: half }] } },
          then: [{ workload: "tts", input: { d: [[half]] } }],
        }),
      ),
    );
    expect(nested.code).toBe(422);
    expect(nested.message).toContain("this job 600 KiB");
    // Many small values within the limit are admitted: the estimate's cost stays within CEL's budget.
    const many = await outcome(
      tenant.create(
        "mediajobs",
        ns,
        job("many", { suspend: true, input: { frames: Array.from({ length: 100_000 }, (_, i) => i % 10) } }),
      ),
    );
    expect(many).toEqual({ code: 200, message: "" });
    // A transcript's worth of structured values (900 segments of 12 fields, 10,800 values) as well.
    const segment = (i: number) => ({
      start: i,
      end: i + 1,
      text: `segment ${i}`,
      words: Array.from({ length: 9 }, (_, w) => w),
    });
    const structured = await outcome(
      tenant.create(
        "mediajobs",
        ns,
        job("structured", {
          suspend: true,
          input: { segments: Array.from({ length: 900 }, (_, i) => segment(i)) },
        }),
      ),
    );
    expect(structured).toEqual({ code: 200, message: "" });
    // Values too many for CEL's cost limit to walk (a 100 x 500 grid, about 100 KB) are admitted:
    // the limits' policy fails open, it never refuses what it could not judge.
    const grid = await outcome(
      tenant.create(
        "mediajobs",
        ns,
        job("grid", {
          suspend: true,
          input: { grid: Array.from({ length: 100 }, () => Array.from({ length: 500 }, (_, j) => j % 10)) },
        }),
      ),
    );
    expect(grid).toEqual({ code: 200, message: "" });
    const fits = await outcome(
      tenant.create("mediajobs", ns, job("fits", { suspend: true, input: { a: { b: [{ c: half }] } } })),
    );
    expect(fits.code).toBe(200);
  });
});
