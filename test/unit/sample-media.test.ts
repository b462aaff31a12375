// The sample pipeline names its audio's digest and size: they must be those of the bytes dev-up and
// the demo put in the store, or the simulated ASR worker refuses the input and the demo fails.
import { describe, expect, it } from "vitest";
import { sampleAudio, samplePipeline, sha256 } from "../../scripts/sample-media.js";
import { MediaJob } from "../../src/crds/mediajob.js";

describe("the sample pipeline's media", () => {
  it("names the digest and size of the audio dev-up stores, in its own namespace and bucket", () => {
    const [job] = samplePipeline("default", "media-dev");
    const parsed = MediaJob.parse(job);
    const [audio] = parsed.spec.media!.inputs!;
    expect(audio).toEqual({
      name: "audio.wav",
      uri: "s3://media-dev/default/episodes/42.wav",
      sha256: sha256(sampleAudio()),
      size: sampleAudio().length,
    });
  });

  it("points the audio at another namespace's prefix and bucket, the digest unchanged", () => {
    const job = MediaJob.parse(samplePipeline("team-a", "media-e2e")[0]);
    expect(job.spec.media!.inputs![0]).toMatchObject({
      uri: "s3://media-e2e/team-a/episodes/42.wav",
      sha256: sha256(sampleAudio()),
    });
  });

  it("declares a file for every step, so each step's output is stored and checked", () => {
    const job = MediaJob.parse(samplePipeline("default", "media-dev")[0]);
    expect([job.spec.media, ...job.spec.then!.map((s) => s.media)].map((m) => m!.outputs![0]!.name)).toEqual([
      "transcript.json",
      "speech.wav",
      "episode.mp4",
    ]);
  });

  it("is a WAV file: RIFF header, PCM, its data chunk's length the rest of the file", () => {
    const b = sampleAudio();
    expect(b.subarray(0, 4).toString("ascii")).toBe("RIFF");
    expect(b.subarray(8, 12).toString("ascii")).toBe("WAVE");
    expect(b.readUInt16LE(20)).toBe(1);
    expect(b.readUInt32LE(40)).toBe(b.length - 44);
  });
});
