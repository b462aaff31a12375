// The S3-compatible server the tests and the dev stack run (test/support/s3server.ts) catches what
// a real store catches: a URL whose signature was altered, a URL signed for another key or method,
// a request signed with the wrong secret, and a presigned URL past its expiry. A server that let
// any of them through would let the presigned I/O tests pass with broken URLs.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/storage/index.js";
import { startS3Server, type S3Server } from "../support/s3server.js";
import { storeEnv } from "../support/s3store.js";

let server: S3Server;
let store: Store;

beforeAll(async () => {
  server = await startS3Server();
  store = (await openStore(storeEnv(server, "media-test")))!;
  await store.client.createBucket();
}, 240_000);
afterAll(async () => {
  store?.client.close();
  await server?.stop();
});

const now = () => new Date();

describe("the test S3 server", () => {
  it("takes a presigned PUT and serves the bytes to a presigned GET", async () => {
    const put = await store.signer.presign("PUT", "ns-a/obj/1/out.txt", 60, now());
    expect((await fetch(put, { method: "PUT", body: "hello" })).status).toBe(200);
    const get = await store.signer.presign("GET", "ns-a/obj/1/out.txt", 60, now());
    const res = await fetch(get);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("hello");
  });

  it("refuses a URL whose signature was altered", async () => {
    const put = await store.signer.presign("PUT", "ns-a/obj/1/tampered.txt", 60, now());
    const tampered = put.replace(
      /X-Amz-Signature=([0-9a-f])/,
      (_m, c: string) => `X-Amz-Signature=${c === "0" ? "1" : "0"}`,
    );
    expect(tampered).not.toBe(put);
    const res = await fetch(tampered, { method: "PUT", body: "x" });
    expect(res.status).toBe(403);
    expect(await res.text()).toContain("SignatureDoesNotMatch");
    expect(await store.client.head("ns-a/obj/1/tampered.txt")).toBeUndefined();
  });

  it("refuses a URL used for another key or another method", async () => {
    const put = await store.signer.presign("PUT", "ns-a/obj/1/mine.txt", 60, now());
    const other = put.replace("/ns-a/obj/1/mine.txt", "/ns-b/obj/1/theirs.txt");
    expect((await fetch(other, { method: "PUT", body: "x" })).status).toBe(403);
    expect(await store.client.head("ns-b/obj/1/theirs.txt")).toBeUndefined();
    expect((await fetch(put, { method: "GET" })).status).toBe(403);
  });

  it("refuses an x-amz header the URL did not sign (the worker contract says to send none)", async () => {
    const put = await store.signer.presign("PUT", "ns-a/obj/1/checksum.txt", 60, now());
    const res = await fetch(put, { method: "PUT", body: "x", headers: { "x-amz-checksum-sha256": "AAAA" } });
    expect(res.status).toBe(403);
    expect(await res.text()).toContain("not signed");
  });

  it("refuses a presigned URL past its expiry", async () => {
    await store.client.put("ns-a/obj/1/old.txt", Buffer.from("old"));
    // Signed 2 s ago for 1 s: expired a second ago.
    const get = await store.signer.presign("GET", "ns-a/obj/1/old.txt", 1, new Date(Date.now() - 2_000));
    const res = await fetch(get);
    expect(res.status).toBe(403);
    expect(await res.text()).toContain("Request has expired");
  });

  it("refuses a request signed with the wrong secret", async () => {
    const wrong = (await openStore({
      ...storeEnv(server, "media-test"),
      STORAGE_SECRET_ACCESS_KEY: "not-the-secret",
    }))!;
    try {
      await expect(wrong.client.put("ns-a/obj/1/forged.txt", Buffer.from("x"))).rejects.toMatchObject({
        status: 403,
        code: "SignatureDoesNotMatch",
      });
    } finally {
      wrong.client.close();
    }
    expect(await store.client.head("ns-a/obj/1/forged.txt")).toBeUndefined();
  });
});
