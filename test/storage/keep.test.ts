// The copy of a foreign URL into the store (src/storage/keep.ts) against a real S3 server and a
// small local HTTP server that plays the provider's storage: the bytes land under the key; a
// loopback address, literal or behind a name, is refused unless the policy allows private
// addresses (SSRF); an answer over the size bound, a redirect, a 404 are refused before anything
// is stored; a 503 or an answer that breaks off is transient and stores nothing; a store that
// refuses the PUT throws a StorageError that carries neither URL.
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StorageError } from "../../src/storage/client.js";
import type { KeepPolicy } from "../../src/storage/foreign-url.js";
import { openStore, type Store } from "../../src/storage/index.js";
import { isComplete, keepForeignOutput, KEPT_BYTES_HEADER } from "../../src/storage/keep.js";
import { keepHostedOutputs } from "../../src/controller/mediajob/keep-outputs.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import type { ProviderRead } from "../../src/mediajob/pass.js";
import { startS3Server, type S3Server } from "../support/s3server.js";
import { storeEnv } from "../support/s3store.js";

const BUCKET = "media-keep-copy";
const BYTES = Buffer.from("a rendered episode ".repeat(500));
let server: S3Server;
let store: Store;
let origin: Server;
let base: string;
let hits = 0;

beforeAll(async () => {
  server = await startS3Server();
  store = (await openStore(storeEnv(server, BUCKET)))!;
  await store.client.createBucket();
  origin = createServer((req, res) => {
    hits++;
    const path = (req.url ?? "").split("?")[0];
    if (path === "/ok") return res.writeHead(200, { "content-length": String(BYTES.length) }).end(BYTES);
    if (path === "/redirect") return res.writeHead(302, { location: "http://169.254.169.254/" }).end();
    if (path === "/busy") return res.writeHead(503, { "content-length": "0" }).end();
    if (path === "/short") {
      // Announces more than it sends, then hangs up: the answer broke off.
      res.writeHead(200, { "content-length": String(BYTES.length + 100) });
      res.write(BYTES);
      setTimeout(() => res.socket?.destroy(), 50);
      return;
    }
    res.writeHead(404, { "content-length": "0" }).end();
  });
  await new Promise<void>((r) => origin.listen(0, "127.0.0.1", r));
  base = `127.0.0.1:${(origin.address() as AddressInfo).port}`;
}, 240_000);

afterAll(async () => {
  origin?.close();
  store?.client.close();
  await server?.stop();
});

const policy = (over: Partial<KeepPolicy> = {}): KeepPolicy => ({
  allowedHosts: [],
  allowPrivate: true,
  maxBytes: 1024 * 1024,
  timeoutMs: 10_000,
  ...over,
});
let n = 0;
async function keep(path: string, over: Partial<KeepPolicy> = {}, host = base) {
  const key = `ns/uid-${++n}/1/out.bin`;
  const outcome = await keepForeignOutput({
    foreign: `http://${host}${path}?X-Amz-Signature=secret`,
    signPut: (bytes) => store.client.signedPut(key, { [KEPT_BYTES_HEADER]: String(bytes) }),
    key,
    policy: policy(over),
  });
  return { key, outcome };
}

describe("keepForeignOutput", () => {
  it("streams the bytes into the store under the key", async () => {
    const { key, outcome } = await keep("/ok");
    expect(outcome).toEqual({ ok: true, size: BYTES.length });
    expect(await store.client.sha256(key)).toBe(createHash("sha256").update(BYTES).digest("hex"));
  });

  it("refuses a loopback address, literal or behind a name, without allowPrivate, fetching nothing", async () => {
    const before = hits;
    const literal = await keep("/ok", { allowPrivate: false });
    expect(literal.outcome).toMatchObject({ ok: false, transient: false });
    const port = base.split(":")[1];
    // https, so only the address can refuse it: localhost resolves to loopback.
    const key = `ns/uid-${++n}/1/out.bin`;
    const named = await keepForeignOutput({
      foreign: `https://localhost:${port}/ok`,
      signPut: () => store.client.signedPut(key, {}),
      key,
      policy: policy({ allowPrivate: false }),
    });
    expect(named).toMatchObject({ ok: false, transient: false });
    expect(!named.ok && named.cause).toContain("resolves to a private, loopback or link-local address");
    expect(hits).toBe(before);
    expect(await store.client.head(literal.key)).toBeUndefined();
  });

  it("refuses an output over the size bound, a redirect and a 404 before storing anything", async () => {
    for (const [path, over, cause] of [
      ["/ok", { maxBytes: 100 }, "over STORAGE_KEEP_MAX_BYTES"],
      ["/redirect", {}, "redirects are not followed"],
      ["/nothing", {}, "answered 404"],
    ] as const) {
      const { key, outcome } = await keep(path, over);
      expect(outcome).toMatchObject({ ok: false, transient: false });
      expect(!outcome.ok && outcome.cause).toContain(cause);
      expect(!outcome.ok && outcome.cause).not.toContain("secret");
      expect(await store.client.head(key)).toBeUndefined();
    }
  });

  it("takes a 503 and an answer that breaks off as transient, leaving no whole object", async () => {
    for (const path of ["/busy", "/short"]) {
      const { key, outcome } = await keep(path);
      expect(outcome).toMatchObject({ ok: false, transient: true });
      // A store may keep the part it got (this one does; S3 answers IncompleteBody): never as whole.
      expect(isComplete(await store.client.head(key))).toBe(false);
    }
  });

  it("tells a whole copy by the length its metadata announces", async () => {
    const { key } = await keep("/ok");
    const head = await store.client.head(key);
    expect(head).toMatchObject({ size: BYTES.length, keptBytes: BYTES.length });
    expect(isComplete(head)).toBe(true);
    expect(isComplete({ size: 10, keptBytes: 12 })).toBe(false);
    expect(isComplete({ size: 10 })).toBe(true);
    expect(isComplete(undefined)).toBe(false);
  });

  it("throws a StorageError without either URL when the store refuses the PUT", async () => {
    const key = `ns/uid-${++n}/1/out.bin`;
    // Signed for another key: the store refuses the signature.
    const err = await keepForeignOutput({
      foreign: `http://${base}/ok?X-Amz-Signature=secret`,
      signPut: async () => {
        const other = await store.client.signedPut(`${key}.other`, {});
        return { ...other, url: new URL(other.url.href.replace(".other", "")) };
      },
      key,
      policy: policy(),
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageError);
    expect((err as Error).message).not.toContain("X-Amz");
    expect((err as Error).message).not.toContain("secret");
  });
});

describe("keepHostedOutputs (the controller's step)", () => {
  const job = {
    metadata: { name: "j", namespace: "ns", uid: "u" },
    spec: { workload: "tts", media: { outputs: [{ name: "out.bin" }] } },
    status: { phase: "Processing", endpointId: "e1", providerJobId: "p1" },
  } as unknown as MediaJob;
  const reported = { "out.bin": { url: "redacted", size: BYTES.length } };
  const withUrl = (path: string): ProviderRead => ({
    result: {
      id: "p1",
      status: "COMPLETED",
      output: { _mediaOrchestrator: { outputs: { "out.bin": { url: `http://${base}${path}` } } } },
    } as never,
  });

  it("copies from the URL the provider's result names, once: a whole copy is not fetched again", async () => {
    const keys = [{ name: "out.bin", key: `ns/u-${++n}/1/out.bin` }];
    const outcomes: string[] = [];
    const d = { onOutputKept: (o: string) => void outcomes.push(o) };
    let reads = 0;
    const read = () => (reads++, Promise.resolve(withUrl("/ok")));
    const s = { ...store, keep: policy() };
    expect(await keepHostedOutputs(d, read, s, job, keys, reported)).toBeUndefined();
    expect(await store.client.sha256(keys[0]!.key)).toBe(createHash("sha256").update(BYTES).digest("hex"));
    expect(await keepHostedOutputs(d, read, s, job, keys, reported)).toBeUndefined();
    expect(reads).toBe(1);
    expect(outcomes).toEqual(["kept"]);
  });

  it("copies again over an object cut short", async () => {
    const keys = [{ name: "out.bin", key: `ns/u-${++n}/1/out.bin` }];
    const s = { ...store, keep: policy() };
    const short = await store.client.signedPut(keys[0]!.key, { [KEPT_BYTES_HEADER]: String(BYTES.length) });
    const cut = await fetch(short.url, {
      method: "PUT",
      headers: short.headers,
      body: BYTES.subarray(0, 10),
    });
    expect(cut.status).toBe(200);
    expect(isComplete(await store.client.head(keys[0]!.key))).toBe(false);
    expect(
      await keepHostedOutputs({}, () => Promise.resolve(withUrl("/ok")), s, job, keys, reported),
    ).toBeUndefined();
    expect(await store.client.head(keys[0]!.key)).toMatchObject({ size: BYTES.length });
  });

  it("says the output was not kept once the provider has forgotten the result", async () => {
    const keys = [{ name: "out.bin", key: `ns/u-${++n}/1/out.bin` }];
    const s = { ...store, keep: policy() };
    expect(
      await keepHostedOutputs({}, () => Promise.resolve({ lost: true }), s, job, keys, reported),
    ).toEqual({
      name: "out.bin",
      cause: "the provider no longer holds the job's result: its retention ended first",
      transient: false,
    });
    // A provider that cannot be read now decides nothing: the pass is retried.
    await expect(
      keepHostedOutputs({}, () => Promise.resolve({ error: "503" }), s, job, keys, reported),
    ).rejects.toThrow(/could not be read/);
  });
});
