// The body of a GPU callback, read without holding it. RunPod's callback carries the whole status
// object, its `input` and `output` included (up to the provider's 10 MB each), but the sidecar only
// needs two top-level fields of it: `id` (which provider job) and `status` (to tell a bad body from a
// good one). Everything else is re-read from the provider's status API. So the body is streamed
// through a JSON tokenizer (@streamparser/json) that keeps only those two fields: a body of any
// shape, `[{},{},...]` or 5,000 levels deep, costs the tokenizer's state, not a parsed tree. Its
// length is capped all the same (CALLBACK_BODY_LIMIT), and a body the sidecar does not need (the
// provider's id is already recorded) is discarded unparsed.
import type { Readable } from "node:stream";
import { Tokenizer, TokenType } from "@streamparser/json";

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
  let depth = 0;
  let topIsObject = false;
  let expectKey = false;
  let key: string | undefined;
  let bad = false;
  const tokenizer = new Tokenizer();
  tokenizer.onToken = ({ token, value }) => {
    switch (token) {
      case TokenType.LEFT_BRACE:
      case TokenType.LEFT_BRACKET:
        if (depth === 0) {
          topIsObject = token === TokenType.LEFT_BRACE;
          expectKey = true;
        } else if (depth === 1) take({});
        depth++;
        return;
      case TokenType.RIGHT_BRACE:
      case TokenType.RIGHT_BRACKET:
        depth--;
        return;
      case TokenType.COMMA:
        if (depth === 1) expectKey = true;
        return;
      case TokenType.COLON:
        return;
      case TokenType.STRING:
        if (depth === 1 && expectKey) {
          key = value as string;
          expectKey = false;
          if (key === "__proto__") bad = true;
          return;
        }
        if (depth === 1) take(value);
        return;
      default:
        if (depth === 0) topIsObject = false;
        if (depth === 1) take(value);
    }
  };
  // A nested value of `id` or `status` is kept as an object marker, never as what it holds.
  const take = (value: unknown) => {
    if (key === "id") hint.id = value;
    else if (key === "status") hint.status = value;
    key = undefined;
  };
  try {
    await forEachChunk(body, limit, (chunk) => tokenizer.write(chunk));
    tokenizer.end();
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 413) throw err;
    throw httpError(400, "FST_ERR_CTP_INVALID_JSON_BODY");
  }
  if (!topIsObject || bad) throw httpError(400, "FST_ERR_CTP_INVALID_JSON_BODY");
  return hint;
}
