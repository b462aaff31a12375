import { createHash } from "node:crypto";

// Deterministic, plausible worker outputs. The same input always gives the same output (the hash
// of its canonical JSON drives every choice), so a replayed or duplicated job is indistinguishable
// from the first run and tests can compare outputs across runs.

export type Workload = "asr" | "tts" | "render";
export const WORKLOADS: readonly Workload[] = ["asr", "tts", "render"];

/** Guesses the workload from an endpoint name such as "media-asr-dev"; render is the fallback. */
export function inferWorkload(name: string): Workload {
  const lower = name.toLowerCase();
  if (/(^|[^a-z])(asr|transcri|whisper|stt)/.test(lower)) return "asr";
  if (/(^|[^a-z])(tts|speech|voice)/.test(lower)) return "tts";
  return "render";
}

export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

function inputDigest(input: unknown): string {
  return createHash("sha256").update(canonicalJson(input)).digest("hex");
}

const WORDS = [
  "the",
  "quarterly",
  "numbers",
  "look",
  "strong",
  "and",
  "we",
  "expect",
  "growth",
  "in",
  "every",
  "region",
  "next",
  "year",
  "thanks",
  "for",
  "joining",
  "today's",
  "call",
  "our",
  "team",
  "will",
  "share",
  "details",
  "about",
  "new",
  "products",
  "shortly",
  "please",
  "hold",
  "questions",
  "until",
  "end",
];

function stringField(input: Record<string, unknown>, ...keys: string[]): string | undefined {
  for (const k of keys) if (typeof input[k] === "string" && input[k] !== "") return input[k];
  return undefined;
}

/** A byte stream from the digest, for picking words and sizes without Math.random. */
function picker(digest: string): (n: number) => number {
  let i = 0;
  return (n) => {
    const byte = parseInt(digest.slice((i % 32) * 2, (i % 32) * 2 + 2), 16);
    i++;
    return byte % n;
  };
}

function asrOutput(input: Record<string, unknown>, digest: string) {
  const pick = picker(digest);
  const language = stringField(input, "language", "lang") ?? "en";
  const segments: Array<{ start: number; end: number; text: string }> = [];
  let t = 0;
  const segmentCount = 2 + pick(3);
  for (let s = 0; s < segmentCount; s++) {
    const words = Array.from({ length: 4 + pick(6) }, () => WORDS[pick(WORDS.length)] ?? "");
    const duration = Math.round((words.length * 0.35 + pick(10) / 10) * 100) / 100;
    const text = words.join(" ");
    segments.push({
      start: t,
      end: Math.round((t + duration) * 100) / 100,
      text: text[0]?.toUpperCase() + text.slice(1) + ".",
    });
    t = Math.round((t + duration + 0.2) * 100) / 100;
  }
  return {
    transcript: segments.map((s) => s.text).join(" "),
    language,
    durationSeconds: segments.at(-1)?.end ?? 0,
    segments,
    source: stringField(input, "audio_url", "audioUrl", "url", "audio") ?? null,
  };
}

function ttsOutput(input: Record<string, unknown>, digest: string) {
  const text = stringField(input, "text", "transcript", "ssml") ?? "";
  const voice = stringField(input, "voice", "speaker") ?? "en-US-neutral-1";
  const sampleRate = 24_000;
  const durationSeconds = Math.max(0.5, Math.round((text.length / 15) * 100) / 100);
  return {
    audio: {
      url: `https://simulator.invalid/tts/${digest.slice(0, 16)}.wav`,
      format: "wav",
      voice,
      sampleRate,
      channels: 1,
      durationSeconds,
      sizeBytes: Math.round(durationSeconds * sampleRate * 2) + 44,
      sha256: digest,
    },
    characters: text.length,
  };
}

function renderOutput(input: Record<string, unknown>, digest: string) {
  const pick = picker(digest);
  const format = stringField(input, "format") ?? "mp4";
  const width = typeof input.width === "number" ? input.width : 1280;
  const height = typeof input.height === "number" ? input.height : 720;
  const fps = typeof input.fps === "number" ? input.fps : 30;
  const durationSeconds = typeof input.durationSeconds === "number" ? input.durationSeconds : 5 + pick(55);
  return {
    media: {
      url: `https://simulator.invalid/render/${digest.slice(0, 16)}.${format}`,
      format,
      width,
      height,
      fps,
      durationSeconds,
      frames: Math.round(durationSeconds * fps),
      sizeBytes: Math.round(durationSeconds * width * height * 0.12),
      sha256: digest,
    },
    template: stringField(input, "template") ?? "default",
  };
}

/**
 * What a simulated worker reads from its own input, as a real handler may: `input.simulate =
 * {outputBytes, fail, tracebackChars}` makes it return an output of about that many bytes, fail,
 * or fail with a traceback that long. For tests of what a provider can legitimately send back
 * (RunPod passes a handler's return value through whatever its size).
 */
export function workerControls(input: Record<string, unknown>): {
  outputBytes?: number;
  fail?: boolean;
  tracebackChars?: number;
} {
  const c = input.simulate;
  if (c === null || typeof c !== "object" || Array.isArray(c)) return {};
  const o = c as Record<string, unknown>;
  const size = (v: unknown) =>
    typeof v === "number" && Number.isInteger(v) && v > 0 ? Math.min(v, 8 * 1024 * 1024) : undefined;
  return {
    ...(size(o.outputBytes) !== undefined && { outputBytes: size(o.outputBytes) }),
    ...(o.fail === true && { fail: true }),
    ...(size(o.tracebackChars) !== undefined && { tracebackChars: size(o.tracebackChars) }),
  };
}

export function outputFor(workload: Workload, submitted: Record<string, unknown>): Record<string, unknown> {
  // The controller's submission identity (docs/controller.md, "Submission identity") says which
  // submission this is, not what to compute: a worker's output depends on the user's input only.
  const { _mediaOrchestrator: _identity, ...input } = submitted;
  const digest = inputDigest(input);
  const output = (() => {
    switch (workload) {
      case "asr":
        return asrOutput(input, digest);
      case "tts":
        return ttsOutput(input, digest);
      case "render":
        return renderOutput(input, digest);
    }
  })();
  const pad = workerControls(input).outputBytes;
  return pad === undefined ? output : { ...output, padding: "x".repeat(pad) };
}

/**
 * The error string of a FAILED job, shaped like runpod-python's uncaught-exception report: a
 * JSON-encoded string, not an object (runpod-python, runpod/serverless/modules/rp_job.py, run_job).
 */
export function failureFor(workload: Workload, workerId: string, input: Record<string, unknown>): string {
  const messages: Record<Workload, string> = {
    asr: "CUDA out of memory while decoding audio",
    tts: "voice model returned an empty waveform",
    render: "ffmpeg exited with code 1",
  };
  return JSON.stringify({
    error_type: "<class 'RuntimeError'>",
    error_message: `${messages[workload]} (input ${inputDigest(input).slice(0, 8)})`,
    error_traceback:
      'Traceback (most recent call last):\n  File "handler.py", line 42, in handler\nRuntimeError' +
      "\n".padEnd(workerControls(input).tracebackChars ?? 0, "  at frame"),
    hostname: `${workerId}-sim`,
    worker_id: workerId,
    runpod_version: "1.7.9",
  });
}
