// A simulated worker's media I/O through the presigned URLs the controller puts under
// `_mediaOrchestrator` in the job's input (the worker contract, docs/provider.md): it GETs each
// input when the job starts, checking the digest and size it was given, and PUTs each declared
// output when the job ends, with bytes derived from the job's output, and reports each output's
// SHA-256 and size in its own output under `_mediaOrchestrator.outputs`. A refused or failed
// transfer fails the job, as a real handler's exception would, with a message naming the object,
// never its URL. `simulate.skipOutputs: true` in the input makes a worker that completes without
// uploading anything (what the controller must catch); `simulate.hostOutputs` one that leaves its
// outputs at the provider and reports their URLs instead (hosted.ts).
import { createHash } from "node:crypto";
import { hostMode, type HostedObjects } from "./hosted.js";

interface Transfer {
  url: string;
  sha256?: string;
  size?: number;
}

/** The URLs of the attempt, when the controller sent any. */
function attemptUrls(
  input: Record<string, unknown>,
): { inputs: Record<string, Transfer>; outputs: Record<string, Transfer> } | undefined {
  const io = input._mediaOrchestrator;
  if (io === null || typeof io !== "object") return undefined;
  const { inputs, outputs } = io as { inputs?: unknown; outputs?: unknown };
  const table = (v: unknown): Record<string, Transfer> => {
    const out: Record<string, Transfer> = {};
    if (v === null || typeof v !== "object") return out;
    for (const [name, t] of Object.entries(v as Record<string, unknown>))
      if (t !== null && typeof t === "object" && typeof (t as Transfer).url === "string")
        out[name] = t as Transfer;
    return out;
  };
  const r = { inputs: table(inputs), outputs: table(outputs) };
  return Object.keys(r.inputs).length + Object.keys(r.outputs).length > 0 ? r : undefined;
}

export function hasMediaIO(input: Record<string, unknown>): boolean {
  return attemptUrls(input) !== undefined;
}

export type MediaIOResult = { ok: true; output?: Record<string, unknown> } | { ok: false; error: string };

/** S3's error code from an error body, for the job's error (the body itself may echo the URL). */
function refusal(status: number, body: string): string {
  const code = /<Code>([A-Za-z0-9.]{1,64})<\/Code>/.exec(body)?.[1];
  return code !== undefined ? `${status} ${code}` : String(status);
}

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** GETs every input and checks it against the digest and size the controller sent. */
export async function readInputs(input: Record<string, unknown>, timeoutMs = 30_000): Promise<MediaIOResult> {
  const urls = attemptUrls(input);
  for (const [name, t] of Object.entries(urls?.inputs ?? {})) {
    let bytes: Uint8Array;
    try {
      const res = await fetch(t.url, { signal: AbortSignal.timeout(timeoutMs) });
      if (res.status !== 200)
        return { ok: false, error: `input ${name}: GET answered ${refusal(res.status, await res.text())}` };
      bytes = new Uint8Array(await res.arrayBuffer());
    } catch (err) {
      return { ok: false, error: `input ${name}: GET failed (${(err as Error).name})` };
    }
    if (t.size !== undefined && bytes.byteLength !== t.size)
      return { ok: false, error: `input ${name}: ${bytes.byteLength} bytes, ${t.size} expected` };
    if (t.sha256 !== undefined && sha256(bytes) !== t.sha256)
      return { ok: false, error: `input ${name}: its SHA-256 differs from the reference's` };
  }
  return { ok: true };
}

/** The bytes a worker writes for an output: the job's output as JSON for a .json name, else derived bytes. */
function outputBytes(name: string, output: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(output ?? null));
  if (name.endsWith(".json")) return json;
  // 1 to 4 KiB, the same for the same output and name.
  const seed = createHash("sha256").update(name).update(json).digest();
  const size = 1024 + (seed.readUInt16BE(0) % 3072);
  const blocks: Buffer[] = [];
  let block = seed;
  for (let n = 0; n < size; n += block.length)
    blocks.push((block = createHash("sha256").update(block).digest()));
  return Buffer.concat(blocks).subarray(0, size);
}

/** PUTs every declared output; the result's output lists what was written (name: sha256, size). */
async function writeOutputs(
  input: Record<string, unknown>,
  output: unknown,
  hosted?: HostedObjects,
  timeoutMs = 30_000,
): Promise<MediaIOResult> {
  const urls = attemptUrls(input);
  const simulate = input.simulate as { skipOutputs?: unknown } | undefined;
  if (urls === undefined || simulate?.skipOutputs === true) return { ok: true };
  const written: Record<string, { sha256: string; size: number; url?: string }> = {};
  const mode = hosted === undefined ? undefined : hostMode(input);
  for (const [name, t] of Object.entries(urls.outputs)) {
    const body = outputBytes(name, output);
    if (mode !== undefined) {
      // Left at the provider (hosted.ts): the URL of its copy there, for the controller to keep.
      const url = hosted!.host(body, mode === "missing");
      const reported =
        mode === "wrongDigest" ? sha256(Buffer.concat([body, Buffer.from("x")])) : sha256(body);
      written[name] = { url, sha256: reported, size: body.byteLength };
      continue;
    }
    try {
      const res = await fetch(t.url, { method: "PUT", body, signal: AbortSignal.timeout(timeoutMs) });
      if (res.status !== 200)
        return { ok: false, error: `output ${name}: PUT answered ${refusal(res.status, await res.text())}` };
      await res.arrayBuffer();
    } catch (err) {
      return { ok: false, error: `output ${name}: PUT failed (${(err as Error).name})` };
    }
    written[name] = { sha256: sha256(body), size: body.byteLength };
  }
  return { ok: true, output: { _mediaOrchestrator: { outputs: written } } };
}

/** The end of a worker's media I/O: its reads (begun at start), then its uploads of `output`. */
export async function finishMediaIO(
  input: Record<string, unknown>,
  read: Promise<MediaIOResult>,
  output: unknown,
  hosted?: HostedObjects,
): Promise<MediaIOResult> {
  const r = await read;
  return r.ok ? writeOutputs(input, output, hosted) : r;
}

/** The job's output with what the worker wrote beside it, as the worker contract asks. */
export function withMediaOutput(
  output: Record<string, unknown>,
  media: MediaIOResult | undefined,
): Record<string, unknown> {
  return media?.ok === true && media.output !== undefined ? { ...output, ...media.output } : output;
}

/** A FAILED job's error after a refused transfer, shaped as runpod-python reports a handler's exception. */
export function mediaFailure(message: string, workerId: string): string {
  return JSON.stringify({
    error_type: "<class 'RuntimeError'>",
    error_message: message,
    error_traceback:
      'Traceback (most recent call last):\n  File "handler.py", line 17, in handler\nRuntimeError',
    hostname: `${workerId}-sim`,
    worker_id: workerId,
    runpod_version: "1.7.9",
  });
}
