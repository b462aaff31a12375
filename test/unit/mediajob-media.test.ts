// A job's media in the domain (src/mediajob/media.ts and the planners that call it), pure: the
// attempt's I/O planned with its submission or the job refused, a provider's COMPLETED held for
// the output check, the check's verdict applied (Completed, a retried failure, or nothing when
// the store did not answer), and the next step fed the previous step's outputs by name.
import { describe, expect, it } from "vitest";
import { makeGpuEndpoint, makeMediaJob, submittedStatus } from "../support/builders.js";
import type { GpuEndpoint } from "../../src/crds/gpuendpoint.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { withPhaseConditions } from "../../src/mediajob/conditions.js";
import { MEDIA_REFUSALS, OUTPUT_FAILURES } from "../../src/mediajob/media-reasons.js";
import { nextStepInputs, outputCheckDue } from "../../src/mediajob/media.js";
import type { Facts } from "../../src/mediajob/pass.js";
import { nextStepObject } from "../../src/mediajob/pipeline.js";
import { planJob } from "../../src/mediajob/plan.js";
import { providerReadDue } from "../../src/mediajob/processing.js";
import { applyProviderResult } from "../../src/mediajob/provider-result.js";
import { REASONS } from "../../src/mediajob/reasons.js";
import type { StoredOutput } from "../../src/storage/output-check.js";
import { redactPresigned } from "../../src/storage/mint.js";

const NOW = new Date("2026-01-01T01:00:00.000Z");
const now = NOW.toISOString();
const ago = (s: number) => new Date(NOW.getTime() - s * 1000).toISOString();
const BUCKET = "media";
const DIGEST = "b".repeat(64);

const media = {
  inputs: [{ name: "audio", uri: `s3://${BUCKET}/ns/episodes/42.wav`, sha256: "a".repeat(64), size: 10 }],
  outputs: [{ name: "transcript.json" }],
};
const job = (spec: Partial<MediaJob["spec"]> = {}, status?: MediaJobStatus): MediaJob =>
  makeMediaJob("clip")
    .ns("ns")
    .uid("uid-1")
    .generation(1)
    .spec({ media, ...spec })
    .status(status)
    .build();
// RunPod endpoints report their execution timeout (600 s by default): it bounds an attempt's URLs.
const ready: GpuEndpoint = makeGpuEndpoint("asr")
  .ns("ns")
  .ready("ep-1", undefined, { executionTimeoutMs: 600_000 })
  .build();
const facts = (o: Partial<Facts> = {}, bucket: string | null = BUCKET): Facts => ({
  now: NOW,
  settings: { defaultTimeoutSeconds: 600, tickMs: 30_000, ...(bucket && { storageBucket: bucket }) },
  newSubmissionId: "fresh",
  ...o,
});
const completed = { id: "p-1", status: "COMPLETED" as const, output: { text: "hi" } };
/** The job as the sidecar leaves it after the provider's COMPLETED: Processing, check due. */
const checking = (o: Partial<MediaJobStatus> = {}, spec: Partial<MediaJob["spec"]> = {}): MediaJob => {
  const j = job({ maxAttempts: 2, ...spec }, submittedStatus(ago(60), o));
  return { ...j, status: applyProviderResult(j, { ...completed, output: reportedOutput() }, ago(1))! };
};
const reportedOutput = (sha256 = DIGEST, size = 42) => ({
  text: "hi",
  _mediaOrchestrator: { outputs: { "transcript.json": { sha256, size } } },
});
const stored = (o: Partial<StoredOutput> = {}): StoredOutput[] => [
  { name: "transcript.json", key: "ns/uid-1/1/transcript.json", head: { size: 42 }, sha256: DIGEST, ...o },
];

describe("submitting a job with media", () => {
  it("plans one GET per input and one PUT per output with the attempt's keys, lasting until its deadlines", () => {
    const plan = planJob(
      job({ executionTimeoutSeconds: 300, startDeadlineSeconds: 60 }),
      facts({ endpoint: ready }),
    );
    const submit = plan.actions.find((a) => a.type === "submit");
    expect(submit?.type === "submit" && submit.submission.io).toEqual({
      scope: { namespace: "ns", jobUid: "uid-1", attempt: 1 },
      signedAt: NOW,
      // Start by now + 60 s, run at most 300 s, 60 s of grace.
      expiresAt: new Date(NOW.getTime() + (60 + 300 + 60) * 1000),
      expiresInSeconds: 420,
      gets: [{ name: "audio", key: "ns/episodes/42.wav", sha256: "a".repeat(64), size: 10 }],
      puts: [{ name: "transcript.json", key: "ns/uid-1/1/transcript.json" }],
    });
    // The plan carries keys: the URLs are signed by the edge, into the /run body only.
    expect(JSON.stringify(plan)).not.toMatch(/X-Amz|https?:/);
  });

  it("ends a job with media Failed, never submitted, in an installation without a store", () => {
    const plan = planJob(job(), facts({ endpoint: ready }, null));
    expect(plan.actions).toEqual([]);
    expect(plan.status).toMatchObject({ phase: "Failed", reason: "StorageNotConfigured" });
    expect(plan.events.map((e) => e[1])).toEqual(expect.arrayContaining(["StorageNotConfigured"]));
  });

  it("ends a job whose reference names another bucket Failed, InvalidInputReference", () => {
    const other = { inputs: [{ name: "a", uri: "s3://elsewhere/ns/a.wav" }] };
    const plan = planJob(job({ media: other }), facts({ endpoint: ready }));
    expect(plan.actions).toEqual([]);
    expect(plan.status).toMatchObject({ phase: "Failed", reason: "InvalidInputReference" });
    expect(plan.status.error).toContain("s3://elsewhere/ns/a.wav");
  });

  it("gives an attempt bounded only by the provider's 7-day time-to-live URLs for 7 days, SigV4's longest", () => {
    const unbounded = makeGpuEndpoint("asr").ns("ns").ready("ep-1", undefined).build();
    const plan = planJob(job(), facts({ endpoint: unbounded }));
    const submit = plan.actions.find((a) => a.type === "submit");
    expect(submit?.type === "submit" && submit.submission.io?.expiresInSeconds).toBe(7 * 24 * 3600);
  });

  it("submits a job without media as before, with no I/O plan", () => {
    const plan = planJob(job({ media: undefined }), facts({ endpoint: ready }, null));
    const submit = plan.actions.find((a) => a.type === "submit");
    expect(submit?.type === "submit" && submit.submission.io).toBeUndefined();
  });
});

describe("a COMPLETED attempt with declared outputs", () => {
  it("is held Processing for the output check, with its output recorded, and no provider read is due", () => {
    const j = checking();
    expect(j.status).toMatchObject({ phase: "Processing", output: reportedOutput() });
    expect(outputCheckDue(j.status)).toBe(true);
    expect(providerReadDue(j, NOW.getTime() + 3_600_000, 1)).toBeUndefined();
    // A job without declared outputs completes at once, as before.
    const plain = job({ media: undefined }, submittedStatus(ago(60)));
    expect(applyProviderResult(plain, completed, now)?.phase).toBe("Completed");
  });

  it("completes with status.outputs (keys and references) when every output is stored as reported", () => {
    const plan = planJob(checking(), facts({ outputs: { stored: stored() } }));
    expect(plan.status.phase).toBe("Completed");
    expect(plan.status.outputs).toEqual([
      {
        name: "transcript.json",
        key: "ns/uid-1/1/transcript.json",
        uri: `s3://${BUCKET}/ns/uid-1/1/transcript.json`,
        size: 42,
        sha256: DIGEST,
      },
    ]);
    expect(plan.status.conditions?.find((c) => c.type === "OutputsVerified")?.status).toBe("True");
  });

  it("fails the attempt OutputMissing and retries it while maxAttempts allows, then ends Failed", () => {
    const first = planJob(checking(), facts({ outputs: { stored: stored({ head: undefined }) } }));
    expect(first.status).toMatchObject({ phase: "Pending", failures: 1 });
    expect(first.status.error).toMatch(/^OutputMissing: .*transcript\.json/);
    expect(first.status.providerJobId).toBeUndefined();
    expect(first.status.submission).toBeUndefined();
    expect(first.events).toEqual([["Warning", "OutputMissing", expect.stringContaining("retrying")]]);
    const last = planJob(
      checking({ failures: 1 }),
      facts({ outputs: { stored: stored({ head: undefined }) } }),
    );
    expect(last.status).toMatchObject({ phase: "Failed", failures: 2, reason: "OutputMissing" });
  });

  it.each([
    ["OutputSizeMismatch", stored({ head: { size: 41 } })],
    ["OutputDigestMismatch", stored({ sha256: "c".repeat(64) })],
  ])("fails the attempt %s", (reason, facts_) => {
    const plan = planJob(checking({ failures: 1 }), facts({ outputs: { stored: facts_ } }));
    expect(plan.status).toMatchObject({ phase: "Failed", reason });
  });

  it("writes nothing when the store did not answer: the pass is retried, the job still Processing", () => {
    const j = checking();
    const plan = planJob(j, facts({ outputs: { error: "head ns/uid-1/1/transcript.json: 503 SlowDown" } }));
    expect(plan.status.phase).toBe("Processing");
    expect(outputCheckDue(plan.status)).toBe(true);
    expect(plan.status.failures).toBeUndefined();
    expect(plan.error).toMatchObject({ terminal: false });
    expect(plan.events).toEqual([["Warning", "OutputCheckFailed", expect.stringContaining("503 SlowDown")]]);
    // Nor without the store's facts at all (storage turned off meanwhile).
    expect(planJob(j, facts({}, null)).error).toMatchObject({ terminal: false });
  });

  it("is checked before a cancel or a passed deadline: the run has ended at the provider", () => {
    const j = checking({ startedAt: ago(3_600) }, { activeDeadlineSeconds: 60, cancel: true });
    const plan = planJob(j, facts({ outputs: { stored: stored() } }));
    expect(plan.actions).toEqual([]);
    expect(plan.status.phase).toBe("Completed");
  });

  it("a duplicate COMPLETED while the check is due leaves it due; a result once Completed changes nothing", () => {
    const j = checking();
    expect(outputCheckDue(applyProviderResult(j, completed, now))).toBe(true);
    const done = { ...j, status: planJob(j, facts({ outputs: { stored: stored() } })).status };
    expect(applyProviderResult(done, completed, now)).toBeUndefined();
  });
});

describe("the next pipeline step", () => {
  const outputs = [
    {
      name: "transcript.json",
      key: "ns/uid-1/1/transcript.json",
      uri: "s3://media/ns/uid-1/1/transcript.json",
      size: 42,
      sha256: DIGEST,
    },
    { name: "cues.vtt", key: "ns/uid-1/1/cues.vtt", uri: "s3://media/ns/uid-1/1/cues.vtt", size: 7 },
  ];

  it("reads the previous step's outputs by name, after its own references, which win on a name", () => {
    const own = [{ name: "cues.vtt", uri: "s3://media/ns/manual/cues.vtt" }];
    expect(nextStepInputs(own, outputs)).toEqual([
      { name: "cues.vtt", uri: "s3://media/ns/manual/cues.vtt" },
      { name: "transcript.json", uri: outputs[0]!.uri, size: 42, sha256: DIGEST },
    ]);
  });

  it("is created with them in spec.media.inputs, its own outputs declared as written", () => {
    const first = job(
      { then: [{ workload: "tts", media: { outputs: [{ name: "speech.wav" }] } }] },
      withPhaseConditions({ ...submittedStatus(ago(60)), phase: "Completed", outputs }, 1, now),
    );
    const next = nextStepObject(first) as { spec: MediaJob["spec"] };
    expect(next.spec.media).toEqual({
      outputs: [{ name: "speech.wav" }],
      inputs: nextStepInputs(undefined, outputs),
    });
  });
});

describe("the media reasons", () => {
  it("are each in the reason table (docs/reasons.md), with a fix", () => {
    for (const r of [...OUTPUT_FAILURES, ...MEDIA_REFUSALS]) expect(REASONS[r]?.shownAs, r).toBe("Failed");
  });
});

describe("a provider error that echoes the body sent", () => {
  it("keeps the objects' paths and loses every presigned query", () => {
    const url =
      "http://127.0.0.1:7070/media/ns/uid-1/1/out.wav?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F" +
      "20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260101T010000Z&X-Amz-Expires=420&X-Amz-Signature=abc123";
    const text = redactPresigned(
      `400: invalid input {"outputs":{"out.wav":{"url":"${url}","method":"PUT"}}}`,
    );
    expect(text).toContain("http://127.0.0.1:7070/media/ns/uid-1/1/out.wav?<presigned query redacted>");
    expect(text).not.toMatch(/X-Amz|abc123/);
    expect(redactPresigned("no url here: https://example.com/a?b=c")).toBe(
      "no url here: https://example.com/a?b=c",
    );
  });
});
