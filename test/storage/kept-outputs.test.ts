// The pure half of outputs kept before the provider forgets them: which foreign URLs the
// controller may fetch (an https URL to a public address, within the operator's allow-list; a
// private, loopback or link-local address never, unless allowed for tests), the redaction of a
// reported URL before the result reaches status, and what an output not kept makes of the attempt.
import { describe, expect, it } from "vitest";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";
import { decideNotKept, isHosted, redactOutputUrls, REDACTED_URL } from "../../src/mediajob/kept-outputs.js";
import { applyProviderResult } from "../../src/mediajob/provider-result.js";
import { planJob } from "../../src/mediajob/plan.js";
import {
  addressAllowed,
  foreignUrlVerdict,
  parseAllowedHosts,
  type KeepPolicy,
} from "../../src/storage/foreign-url.js";

const policy = (over: Partial<KeepPolicy> = {}): KeepPolicy => ({
  allowedHosts: [],
  allowPrivate: false,
  maxBytes: 1024,
  timeoutMs: 1000,
  ...over,
});
const SIGNED = "https://runpod-uploads.s3.amazonaws.com/11-28/job/out.wav?X-Amz-Signature=abc";

describe("foreignUrlVerdict", () => {
  it("fetches an https URL to a public host", () => {
    expect(foreignUrlVerdict(SIGNED, policy())).toMatchObject({ ok: true });
  });

  it.each([
    ["http://example.com/x", "scheme http:"],
    ["file:///etc/passwd", "scheme file:"],
    ["ftp://example.com/x", "scheme ftp:"],
    ["https://user:pw@example.com/x", "credentials"],
    ["https://127.0.0.1/x", "private"],
    ["https://10.1.2.3/x", "private"],
    ["https://169.254.169.254/latest/meta-data/", "private"],
    ["https://[::1]/x", "private"],
    ["https://[::ffff:192.168.1.1]/x", "private"],
    ["https://[fd00::1]/x", "private"],
    ["https://0.0.0.0/x", "private"],
    ["not a url", "not a URL"],
  ])("refuses %s", (url, cause) => {
    const v = foreignUrlVerdict(url, policy());
    expect(v.ok).toBe(false);
    expect(!v.ok && v.cause).toContain(cause);
    // The cause never repeats the URL: it goes to status and Events.
    expect(!v.ok && v.cause).not.toContain("passwd");
  });

  it("refuses a reported value that is not a string", () => {
    expect(foreignUrlVerdict({ href: SIGNED }, policy()).ok).toBe(false);
  });

  it("allows plain http and loopback only with allowPrivate (tests and dev)", () => {
    expect(foreignUrlVerdict("http://127.0.0.1:9000/x", policy({ allowPrivate: true })).ok).toBe(true);
  });

  it("narrows the hosts to the operator's allow-list, a leading dot naming a domain", () => {
    const p = policy({ allowedHosts: parseAllowedHosts(" .amazonaws.com, cdn.example.com ,") });
    expect(p.allowedHosts).toEqual([".amazonaws.com", "cdn.example.com"]);
    expect(foreignUrlVerdict(SIGNED, p).ok).toBe(true);
    expect(foreignUrlVerdict("https://cdn.example.com/a", p).ok).toBe(true);
    expect(foreignUrlVerdict("https://evil.example.com/a", p)).toMatchObject({ ok: false });
    expect(foreignUrlVerdict("https://amazonaws.com.evil.net/a", p)).toMatchObject({ ok: false });
    expect(foreignUrlVerdict("https://amazonaws.com/a", p)).toMatchObject({ ok: false });
  });
});

describe("addressAllowed", () => {
  it.each(["8.8.8.8", "52.216.1.1", "2606:4700::1111"])("allows the public address %s", (a) => {
    expect(addressAllowed(a, { allowPrivate: false })).toBe(true);
  });
  it.each([
    "127.0.0.1",
    "10.0.0.1",
    "172.16.5.4",
    "192.168.0.1",
    "169.254.169.254",
    "100.64.0.1",
    "::1",
    "fe80::1",
    "fc00::1",
    "::ffff:127.0.0.1",
    "::",
  ])("refuses the private, loopback or link-local address %s", (a) => {
    expect(addressAllowed(a, { allowPrivate: false })).toBe(false);
    expect(addressAllowed(a, { allowPrivate: true })).toBe(true);
  });
  it("refuses what is not an address", () => {
    expect(addressAllowed("localhost", { allowPrivate: false })).toBe(false);
  });
});

describe("the reported URL is a secret", () => {
  const output = {
    text: "hello",
    _mediaOrchestrator: {
      outputs: {
        "speech.wav": { url: SIGNED, sha256: "a".repeat(64), size: 3 },
        "t.json": { sha256: "b".repeat(64), size: 2 },
      },
    },
  };

  it("is redacted from the output, the rest kept as it is", () => {
    const r = redactOutputUrls(output) as typeof output;
    expect(JSON.stringify(r)).not.toContain("X-Amz-Signature");
    expect(r._mediaOrchestrator.outputs["speech.wav"]).toEqual({
      url: REDACTED_URL,
      sha256: "a".repeat(64),
      size: 3,
    });
    expect(r._mediaOrchestrator.outputs["t.json"]).toEqual(output._mediaOrchestrator.outputs["t.json"]);
    expect(r.text).toBe("hello");
    expect(isHosted(r._mediaOrchestrator.outputs["speech.wav"])).toBe(true);
    expect(isHosted(r._mediaOrchestrator.outputs["t.json"])).toBe(false);
    // Nothing to redact: the same object back.
    expect(redactOutputUrls({ a: 1 })).toEqual({ a: 1 });
    expect(redactOutputUrls("text")).toBe("text");
  });

  it("never reaches status.output through a COMPLETED result", () => {
    const job = {
      apiVersion: "media.example.com/v1alpha1",
      kind: "MediaJob",
      metadata: { name: "j", namespace: "ns", uid: "u1", generation: 1 },
      spec: { workload: "tts", input: {}, media: { outputs: [{ name: "speech.wav" }, { name: "t.json" }] } },
      status: { phase: "Processing", jobId: "u1", providerJobId: "p1", endpointId: "e1", attempts: 1 },
    } as unknown as MediaJob;
    const status = applyProviderResult(
      job,
      { id: "p1", status: "COMPLETED", output } as never,
      new Date().toISOString(),
    ) as MediaJobStatus;
    expect(JSON.stringify(status)).not.toContain("X-Amz-Signature");
    expect(status.phase).toBe("Processing");
  });
});

describe("an output not kept", () => {
  it("is tried again while the failure may pass, and fails the attempt otherwise", () => {
    expect(decideNotKept({ name: "a.wav", cause: "the reported URL answered 503", transient: true })).toEqual(
      {
        retry: "output a.wav was not kept in the object store: the reported URL answered 503",
      },
    );
    expect(
      decideNotKept({ name: "a.wav", cause: "the reported URL answered 404", transient: false }),
    ).toEqual({
      fail: {
        reason: "OutputNotKept",
        message: "output a.wav was not kept in the object store: the reported URL answered 404",
      },
    });
  });

  it("ends the job Failed with OutputNotKept once its attempts are spent, Pending before", () => {
    const now = new Date();
    const job = (failures: number) =>
      ({
        apiVersion: "media.example.com/v1alpha1",
        kind: "MediaJob",
        metadata: { name: "j", namespace: "ns", uid: "u1", generation: 1 },
        spec: { workload: "tts", input: {}, maxAttempts: 2, media: { outputs: [{ name: "a.wav" }] } },
        status: {
          phase: "Processing",
          jobId: "u1",
          providerJobId: "p1",
          endpointId: "e1",
          attempts: failures + 1,
          failures,
          conditions: [
            {
              type: "OutputsVerified",
              status: "Unknown",
              reason: "ProviderCompleted",
              message: "",
              lastTransitionTime: now.toISOString(),
            },
          ],
        },
      }) as unknown as MediaJob;
    const facts = (_j: MediaJob) => ({
      now,
      settings: { defaultTimeoutSeconds: 600, storageBucket: "b" },
      newSubmissionId: "x",
      outputs: { notKept: { name: "a.wav", cause: "the reported URL answered 404", transient: false } },
    });
    const first = planJob(job(0), facts(job(0)) as never);
    expect(first.status.phase).toBe("Pending");
    expect(first.status.error).toMatch(/^OutputNotKept: output a.wav/);
    const last = planJob(job(1), facts(job(1)) as never);
    expect(last.status.phase).toBe("Failed");
    expect(last.status.error).toMatch(/^OutputNotKept: /);
    const transient = planJob(job(0), {
      ...facts(job(0)),
      outputs: { notKept: { name: "a.wav", cause: "the reported URL answered 503", transient: true } },
    } as never);
    expect(transient.status.phase).toBe("Processing");
    expect(transient.error).toBeDefined();
  });
});
