// The body of a GPU callback, read without holding it. RunPod's callback carries the whole status
// object, its `input` and `output` included (up to the provider's 10 MB each), but the sidecar only
// needs two top-level fields of it: `id` (which provider job) and `status` (to tell a bad body from a
// good one). Everything else is re-read from the provider's status API. So the body is streamed
// through a JSON tokenizer (@streamparser/json) that keeps only those two fields: a body of any
// shape, `[{},{},...]` or 5,000 levels deep, costs the tokenizer's state, not a parsed tree, and
// strings and numbers are cut short before the tokenizer sees them (it holds each one whole while
// reading it). Its length is capped all the same (CALLBACK_BODY_LIMIT), and a body the sidecar does
// not need (the provider's id is already recorded) is discarded unparsed.
import type { Readable } from "node:stream";
import { TokenParser, Tokenizer, TokenType } from "@streamparser/json";

/**
 * The longest string or run of digits handed to the tokenizer. The tokenizer holds a string (or a
 * number) whole while it reads it, and a 24 MiB string of the job's output is no use here: only
 * `id` and `status` are read, both short. Longer strings and numbers are cut (the JSON stays valid).
 */
export const MAX_TOKEN_BYTES = 1024;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const U = 0x75;
const isDigit = (b: number) => b >= 0x30 && b <= 0x39;

/**
 * Cuts the inside of every JSON string, and every run of digits, to MAX_TOKEN_BYTES, so what the
 * tokenizer holds never depends on the body. A string is cut only at an ASCII byte outside an
 * escape (never inside `\uXXXX` or a multi-byte character), and the cut part is skipped up to the
 * string's closing quote; digits are dropped from within a run of digits. Stateful across chunks.
 */
class LongTokenCutter {
  #inString = false;
  #escaped = false;
  /** Hex digits of a `\uXXXX` escape still to come, and those read. */
  #hexLeft = 0;
  #hex = "";
  /** The last character kept was a high surrogate: cutting now would leave half a pair. */
  #afterHigh = false;
  #run = 0;
  #dropping = false;

  cut(chunk: Buffer): Buffer {
    const keep: Buffer[] = [];
    let from = 0;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!;
      let drop = false;
      if (this.#inString) {
        if (this.#escaped) {
          this.#escaped = false;
          if (b === U) {
            this.#hexLeft = 4;
            this.#hex = "";
          } else this.#afterHigh = false;
          drop = this.#dropping;
        } else if (this.#hexLeft > 0) {
          this.#hex += String.fromCharCode(b);
          if (--this.#hexLeft === 0) this.#afterHigh = /^[dD][89abAB]/.test(this.#hex);
          drop = this.#dropping;
        } else if (b === QUOTE) {
          this.#inString = false;
          this.#dropping = false;
        } else {
          // Cut at the start of a character: an ASCII byte, or the backslash of an escape.
          if (!this.#dropping && this.#run >= MAX_TOKEN_BYTES && b < 0x80 && !this.#afterHigh)
            this.#dropping = true;
          if (b === BACKSLASH) this.#escaped = true;
          else this.#afterHigh = false;
          drop = this.#dropping;
        }
        this.#run++;
      } else if (b === QUOTE) {
        this.#inString = true;
        this.#escaped = false;
        this.#hexLeft = 0;
        this.#afterHigh = false;
        this.#run = 0;
      } else if (isDigit(b)) {
        drop = ++this.#run > MAX_TOKEN_BYTES;
      } else {
        this.#run = 0;
      }
      if (drop) {
        if (i > from) keep.push(chunk.subarray(from, i));
        from = i + 1;
      }
    }
    if (from === 0) return chunk;
    if (chunk.length > from) keep.push(chunk.subarray(from));
    return Buffer.concat(keep);
  }
}

/** What the route needs of a callback body. Unvalidated: the route checks the shapes. */
export interface CallbackHint {
  id?: unknown;
  status?: unknown;
}

/** An error Fastify's error handler answers with its status code and a generic body. */
function httpError(statusCode: 400 | 413, code: string): Error {
  return Object.assign(new Error(code), { statusCode, code });
}

/** Counts the body's bytes against the limit, handing each chunk on; rejects past the limit. */
async function forEachChunk(body: Readable, limit: number, onChunk: (chunk: Buffer) => void): Promise<void> {
  let bytes = 0;
  for await (const chunk of body) {
    const buf = chunk as Buffer;
    bytes += buf.length;
    if (bytes > limit) {
      body.destroy();
      throw httpError(413, "FST_ERR_CTP_BODY_TOO_LARGE");
    }
    onChunk(buf);
  }
}

/** Reads and drops a body (up to the limit): the answer does not depend on it. */
export async function discardBody(body: Readable, limit: number): Promise<void> {
  await forEachChunk(body, limit, () => undefined);
}

/**
 * The top-level `id` and `status` of a JSON object body. 400 when the body is not one JSON object
 * (or names `__proto__` at its top level), 413 past `limit` bytes.
 */
export async function readCallbackHint(body: Readable, limit: number): Promise<CallbackHint> {
  const hint: CallbackHint = {};
  const tokenizer = new Tokenizer();
  const cutter = new LongTokenCutter();
  // The grammar is the parser's; it keeps only the two top-level values asked for.
  const parser = new TokenParser({ paths: ["$.id", "$.status"], keepStack: false });
  parser.onValue = ({ key, value }) => {
    if (key === "id") hint.id = value;
    else if (key === "status") hint.status = value;
  };
  let depth = 0;
  let topIsObject: boolean | undefined;
  let maybeKey: string | undefined;
  let valueOf: string | undefined;
  tokenizer.onToken = (t) => {
    if (topIsObject === undefined) topIsObject = t.token === TokenType.LEFT_BRACE;
    // Refused before the parser builds them: an object or array where `id` or `status` goes (the
    // parser would build it whole), and a top-level `__proto__`.
    if (depth === 1) {
      if (t.token === TokenType.STRING && valueOf === undefined) maybeKey = t.value as string;
      else if (t.token === TokenType.COLON) {
        valueOf = maybeKey;
        if (valueOf === "__proto__") throw httpError(400, "FST_ERR_CTP_INVALID_JSON_BODY");
      } else if (valueOf !== undefined) {
        const container = t.token === TokenType.LEFT_BRACE || t.token === TokenType.LEFT_BRACKET;
        if (container && (valueOf === "id" || valueOf === "status"))
          throw httpError(400, "FST_ERR_CTP_INVALID_JSON_BODY");
        valueOf = undefined;
      }
    }
    const opens = t.token === TokenType.LEFT_BRACE || t.token === TokenType.LEFT_BRACKET;
    const closes = t.token === TokenType.RIGHT_BRACE || t.token === TokenType.RIGHT_BRACKET;
    // A nested object or array goes to the parser as a null: it would build it (and drop it)
    // value by value, millions of objects for `[{},{},...]`. The top level's grammar is checked.
    if (opens && depth === 1) parser.write({ token: TokenType.NULL, value: null });
    else if (depth <= 1) parser.write(t);
    if (opens) depth++;
    else if (closes) depth--;
  };
  try {
    await forEachChunk(body, limit, (chunk) => tokenizer.write(cutter.cut(chunk)));
    tokenizer.end();
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 413) throw err;
    throw httpError(400, "FST_ERR_CTP_INVALID_JSON_BODY");
  }
  if (!topIsObject || !parser.isEnded) throw httpError(400, "FST_ERR_CTP_INVALID_JSON_BODY");
  return hint;
}
