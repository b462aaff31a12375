// The sample pipeline's media (config/samples/pipeline.yaml): the episode's audio, a small WAV made
// here byte for byte the same every time, so the sample can name its SHA-256 and size and the
// simulated ASR worker checks the bytes it downloads against them. dev-up and the demo put it in
// the environment's bucket under the namespace's prefix, where a tenant keeps its own inputs
// (docs/design.md, "Keys"); the retention sweep never deletes such a key.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import type { KubeObject } from "../src/k8s/api.js";
import { REPO_ROOT } from "../test/support/controlplane.js";

/** Where the audio lives under a namespace's prefix. */
export const SAMPLE_AUDIO_PATH = "episodes/42.wav";
export const SAMPLE_PIPELINE_FILE = join(REPO_ROOT, "config/samples/pipeline.yaml");

/** Half a second of a 440 Hz tone, 8 kHz mono 8-bit PCM, in a RIFF/WAVE container. */
export function sampleAudio(): Buffer {
  const rate = 8_000;
  const samples = rate / 2;
  const data = Buffer.alloc(samples);
  for (let i = 0; i < samples; i++)
    data[i] = 128 + Math.round(100 * Math.sin((2 * Math.PI * 440 * i) / rate));
  const header = Buffer.alloc(44);
  header.write("RIFF", 0, "ascii");
  header.writeUInt32LE(36 + samples, 4);
  header.write("WAVEfmt ", 8, "ascii");
  header.writeUInt32LE(16, 16); // fmt chunk size
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate, 28); // bytes per second
  header.writeUInt16LE(1, 32); // block align
  header.writeUInt16LE(8, 34); // bits per sample
  header.write("data", 36, "ascii");
  header.writeUInt32LE(samples, 40);
  return Buffer.concat([header, data]);
}

export const sha256 = (b: Buffer): string => createHash("sha256").update(b).digest("hex");

/** The audio's object key in a namespace. */
export const sampleAudioKey = (namespace: string): string => `${namespace}/${SAMPLE_AUDIO_PATH}`;

/** Puts the sample audio where the pipeline in `namespace` reads it. */
export async function seedSampleMedia(
  store: { put(key: string, body: Buffer, contentType?: string): Promise<void> },
  namespace: string,
): Promise<void> {
  await store.put(sampleAudioKey(namespace), sampleAudio(), "audio/wav");
}

/**
 * The sample pipeline's MediaJob as written, its audio reference pointed at `bucket` and
 * `namespace` (the file names dev-up's: bucket media-dev, namespace default).
 */
export function samplePipeline(namespace: string, bucket: string): KubeObject[] {
  const docs = parseAllDocuments(readFileSync(SAMPLE_PIPELINE_FILE, "utf8"))
    .map((d) => d.toJS() as KubeObject & { spec?: { media?: { inputs?: Array<{ uri: string }> } } })
    .filter(Boolean);
  for (const doc of docs)
    for (const input of doc.spec?.media?.inputs ?? [])
      if (input.uri.endsWith(`/${SAMPLE_AUDIO_PATH}`))
        input.uri = `s3://${bucket}/${sampleAudioKey(namespace)}`;
  return docs;
}
