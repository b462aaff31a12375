// The copy of an output a worker left behind a foreign URL (its provider's storage, RunPod's
// `rp_upload`, any https URL) into the store under the attempt's own key, before the provider
// forgets it (docs/design.md, "Outputs kept before the provider forgets them"). The bytes are
// streamed from the foreign answer straight into a presigned PUT of the key: constant memory, the
// size bounded by the answer's Content-Length (required, at most the policy's maxBytes) and counted
// as it flows, the whole copy bounded in time. The PUT carries the announced length in the
// object's metadata (KEPT_BYTES_HEADER): a store that keeps the part of a body cut short (some
// do, where S3 answers IncompleteBody) leaves an object whose size differs from it, which
// isComplete() tells apart, and the copy is done again. The URL is tenant-influenced and secret-bearing: it
// is checked (foreign-url.ts) and its resolved addresses judged at connection time, no redirect is
// followed, and no error, log or result ever carries it. The digest is checked afterwards against
// the store's own bytes (output-check.ts), like a worker's PUT.
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import type { IncomingMessage, ClientRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { StorageError } from "./client.js";
import { addressAllowed, foreignUrlVerdict, type KeepPolicy } from "./foreign-url.js";
import { nodeHttp } from "../http/node-http.js";

/** The metadata header a kept object carries: the bytes its copy announced. */
export const KEPT_BYTES_HEADER = "x-amz-meta-kept-bytes";

/** Whether an object at a kept output's key is a whole copy (an object without the header: a worker's PUT). */
export function isComplete(head: { size: number; keptBytes?: number } | undefined): boolean {
  return head !== undefined && (head.keptBytes === undefined || head.keptBytes === head.size);
}

/** A copy's end: kept (its size), or why not and whether the same URL may work later. */
export type KeepOutcome = { ok: true; size: number } | { ok: false; cause: string; transient: boolean };

class AddressRefused extends Error {
  override name = "AddressRefused";
}

/** dns.lookup that refuses a name resolving to any address the policy forbids (DNS rebinding included). */
function guardedLookup(policy: KeepPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, "", 0);
      if (addresses.length === 0 || addresses.some((a) => !addressAllowed(a.address, policy)))
        return callback(new AddressRefused("address refused"), "", 0);
      if ((options as { all?: boolean }).all)
        return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

function open(url: URL, policy: KeepPolicy, signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = (url.protocol === "https:" ? httpsRequest : nodeHttp.request)(url, {
      method: "GET",
      // No pool: every copy resolves (and judges) the name itself.
      agent: false,
      lookup: guardedLookup(policy),
      headers: { accept: "*/*", "accept-encoding": "identity" },
      signal,
    });
    req.on("response", resolve).on("error", reject).end();
  });
}

/** Counts the bytes through it and fails the stream when they differ from the announced length. */
function exactly(length: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      seen += chunk.length;
      if (seen > length) return cb(Object.assign(new Error("longer than announced"), { source: true }));
      cb(null, chunk);
    },
    flush(cb) {
      cb(seen === length ? null : Object.assign(new Error("shorter than announced"), { source: true }));
    },
  });
}

const transientStatus = (s: number) => s === 408 || s === 429 || s >= 500;

/**
 * Copies the object behind `foreign` into the store through `putUrl` (a presigned PUT of the
 * attempt's key). A refusal or failure of the foreign side is an outcome (transient or not); a
 * refusal or failure of the store throws a StorageError (the pass is retried, nothing decided).
 */
export async function keepForeignOutput(req: {
  foreign: unknown;
  /** The signed PUT of the key for a body of `bytes` bytes (the length rides in its metadata). */
  signPut: (bytes: number) => Promise<{ url: URL; headers: Record<string, string> }>;
  key: string;
  policy: KeepPolicy;
}): Promise<KeepOutcome> {
  const verdict = foreignUrlVerdict(req.foreign, req.policy);
  if (!verdict.ok) return { ok: false, cause: verdict.cause, transient: false };
  const signal = AbortSignal.timeout(req.policy.timeoutMs);
  let source: IncomingMessage;
  try {
    source = await open(verdict.url, req.policy, signal);
  } catch (err) {
    if (err instanceof AddressRefused)
      return {
        ok: false,
        cause: "the reported URL's host resolves to a private, loopback or link-local address: refused",
        transient: false,
      };
    const kind = signal.aborted ? "TimeoutError" : ((err as { code?: string }).code ?? "error");
    return { ok: false, cause: `the reported URL could not be fetched (${kind})`, transient: true };
  }
  const status = source.statusCode ?? 0;
  const length = Number(source.headers["content-length"]);
  const refuse = (cause: string, transient = false): KeepOutcome => {
    source.destroy();
    return { ok: false, cause, transient };
  };
  if (status >= 300 && status < 400)
    return refuse(`the reported URL answered ${status}: redirects are not followed`);
  if (status !== 200) return refuse(`the reported URL answered ${status}`, transientStatus(status));
  if (source.headers["content-length"] === undefined || !Number.isSafeInteger(length) || length < 0)
    return refuse("the reported URL's answer has no Content-Length");
  if (length > req.policy.maxBytes)
    return refuse(`the output is ${length} bytes, over STORAGE_KEEP_MAX_BYTES (${req.policy.maxBytes})`);

  let put: { url: URL; headers: Record<string, string> };
  try {
    put = await req.signPut(length);
  } catch {
    source.destroy();
    throw new StorageError("keep", req.key, 0, "SigningFailed");
  }
  const sink: ClientRequest = (put.url.protocol === "https:" ? httpsRequest : nodeHttp.request)(put.url, {
    method: "PUT",
    agent: false,
    headers: { ...put.headers, "content-length": String(length) },
    signal,
  });
  const answered = new Promise<IncomingMessage>((resolve, reject) => {
    sink.on("response", resolve).on("error", reject);
  });
  let sourceFailed = false;
  source.on("error", () => (sourceFailed = true)).on("aborted", () => (sourceFailed = true));
  try {
    await pipeline(source, exactly(length), sink);
  } catch (err) {
    sink.destroy();
    answered.catch(() => undefined);
    if (sourceFailed || (err as { source?: boolean }).source === true)
      return {
        ok: false,
        cause: `the reported URL's answer broke off or differed from its Content-Length`,
        transient: true,
      };
    if (signal.aborted)
      return { ok: false, cause: "the copy took longer than STORAGE_KEEP_TIMEOUT_SECONDS", transient: true };
    throw new StorageError("keep", req.key, 0, (err as { code?: string }).code ?? "error");
  }
  let res: IncomingMessage;
  try {
    res = await answered;
  } catch (err) {
    throw new StorageError(
      "keep",
      req.key,
      0,
      signal.aborted ? "TimeoutError" : ((err as { code?: string }).code ?? "error"),
    );
  }
  let body = "";
  res.setEncoding("utf8");
  for await (const chunk of res) if (body.length < 4096) body += chunk as string;
  if ((res.statusCode ?? 0) >= 300) {
    const code = /<Code>([A-Za-z0-9.]{1,64})<\/Code>/.exec(body)?.[1] ?? `HTTP${res.statusCode}`;
    throw new StorageError("keep", req.key, res.statusCode ?? 0, code);
  }
  return { ok: true, size: length };
}
