// The verdict on an attempt's outputs before its job may be Completed: every declared output
// stored, with the size and digest the worker reported. A Completed job whose output is missing
// or differs from the worker's report would point at nothing, or at the wrong bytes.
import { describe, expect, it } from "vitest";
import { reportedOutputs, verifyOutputs, type StoredOutput } from "../../src/storage/output-check.js";

const digest = "b".repeat(64);
const stored = (over: Partial<StoredOutput> = {}): StoredOutput => ({
  name: "speech.wav",
  key: "studio-a/uid/1/speech.wav",
  head: { size: 48_000 },
  sha256: digest,
  ...over,
});

describe("verifyOutputs", () => {
  it("records each output's key, size and reported digest", () => {
    expect(verifyOutputs([stored()], { "speech.wav": { sha256: digest, size: 48_000 } })).toEqual({
      ok: true,
      outputs: { "speech.wav": { key: "studio-a/uid/1/speech.wav", size: 48_000, sha256: digest } },
    });
  });

  it("takes an output the worker reported nothing about on its stored size alone", () => {
    expect(verifyOutputs([stored({ sha256: undefined })], {})).toEqual({
      ok: true,
      outputs: { "speech.wav": { key: "studio-a/uid/1/speech.wav", size: 48_000 } },
    });
  });

  it("fails OutputMissing when a declared output was not stored, naming every missing one", () => {
    const v = verifyOutputs([stored({ head: undefined }), stored({ name: "a.json", head: undefined })], {});
    expect(v).toMatchObject({ ok: false, reason: "OutputMissing" });
    expect(!v.ok && v.message).toContain("speech.wav, a.json");
  });

  it("fails on a size or digest that differs from the worker's report", () => {
    expect(verifyOutputs([stored()], { "speech.wav": { size: 47_999 } })).toMatchObject({
      ok: false,
      reason: "OutputSizeMismatch",
    });
    expect(
      verifyOutputs([stored({ sha256: "c".repeat(64) })], { "speech.wav": { sha256: digest } }),
    ).toMatchObject({
      ok: false,
      reason: "OutputDigestMismatch",
    });
  });
});

describe("reportedOutputs", () => {
  it("reads _mediaOrchestrator.outputs of the worker's output, and nothing from anything else", () => {
    expect(
      reportedOutputs({ text: "hi", _mediaOrchestrator: { outputs: { a: { sha256: digest } } } }),
    ).toEqual({
      a: { sha256: digest },
    });
    for (const junk of [
      null,
      "text",
      42,
      [],
      { _mediaOrchestrator: null },
      { _mediaOrchestrator: { outputs: [1] } },
    ])
      expect(reportedOutputs(junk)).toEqual({});
  });
});
