// The callback body reader: the top-level `id` and `status` of any JSON object body, read as a
// stream that never holds the body, a tree of it, or one of its long strings or numbers.
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { MAX_TOKEN_BYTES, readCallbackHint } from "../../src/webhooks/callback-body.js";

/** The body as a stream of chunks of `size` bytes. */
const stream = (body: string | Buffer, size: number) => {
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const chunks: Buffer[] = [];
  for (let i = 0; i < buf.length; i += size) chunks.push(buf.subarray(i, i + size));
  return Readable.from(chunks);
};

const read = (body: string | Buffer, size = 65_536, limit = 64 * 1024 * 1024) =>
  readCallbackHint(stream(body, size), limit);

const status = (p: Promise<unknown>) =>
  p.then(
    () => 200,
    (e: { statusCode?: number }) => e.statusCode,
  );

describe("readCallbackHint", () => {
  it("keeps the top-level id and status, nothing nested", async () => {
    const body = JSON.stringify({
      delayTime: 12,
      input: { id: "nested", status: "FAILED" },
      id: "job-1-u1",
      output: [{ id: "x" }],
      status: "COMPLETED",
    });
    for (const size of [1, 3, 7, 64, 65_536])
      expect(await read(body, size)).toEqual({ id: "job-1-u1", status: "COMPLETED" });
    // An object or array where `id` or `status` goes is refused before it is built.
    expect(await status(read('{"id":{"a":"b"},"status":"COMPLETED"}'))).toBe(400);
    expect(await status(read(`{"status":[${"{},".repeat(100_000)}{}]}`))).toBe(400);
  });

  it("refuses what is not one JSON object (400) and bodies over the limit (413)", async () => {
    for (const body of [
      '{"id" "x"}',
      '{"id":"x",}',
      "{,}",
      '{"id":"x"}{',
      '{"id":"x"} 1',
      "",
      "[]",
      "[{},{}]",
      '"COMPLETED"',
      "null",
      "{not json",
      '{"id":"x"',
      '{"__proto__":{"a":1},"id":"x"}',
    ])
      expect(await status(read(body)), body).toBe(400);
    expect(await status(read(`{"id":"${"x".repeat(2000)}"}`, 100, 1000))).toBe(413);
  });

  it("cuts long strings and numbers without breaking the JSON, wherever the chunks end", async () => {
    const tricky = `é😀\\"\\\\\\n\\u00e9\\uD83D\\uDE00${"\\uD83D\\uDE00".repeat(300)}`;
    const long = `${"a".repeat(MAX_TOKEN_BYTES - 3)}${tricky.repeat(50)}${"b".repeat(5000)}`;
    const body = `{"output":{"text":"${long}","n":${"9".repeat(5000)}.${"1".repeat(5000)}e${"2".repeat(3000)}},"id":"job-2","status":"FAILED","error":"${long}"}`;
    expect(() => JSON.parse(body)).not.toThrow();
    for (const size of [1, 2, 5, 13, 1000, 65_536])
      expect(await read(body, size), `chunks of ${size}`).toEqual({ id: "job-2", status: "FAILED" });
  });

  it("reads a body of millions of objects or 5,000 levels deep", async () => {
    const many = `{"id":"j","status":"COMPLETED","output":[${"{},".repeat(1_000_000)}{}]}`;
    expect(await read(many)).toEqual({ id: "j", status: "COMPLETED" });
    const deep = `{"id":"j","status":"COMPLETED","output":${"[".repeat(5000)}${"]".repeat(5000)}}`;
    expect(await read(deep)).toEqual({ id: "j", status: "COMPLETED" });
  });
});
