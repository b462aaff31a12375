// make dev-up's .local/env names the dev store (STORAGE_*, written by the function dev-up uses):
// a shell that sources it reaches the store with the controller's settings, and a URL signed from
// them works against a real S3 server.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { envFile } from "../../scripts/devstack-lib.js";
import { parseEnv } from "../../src/config/env.js";
import { openStore } from "../../src/storage/index.js";
import { startS3Server, type S3Server } from "../support/s3server.js";

let server: S3Server;
beforeAll(async () => {
  server = await startS3Server();
}, 240_000);
afterAll(() => server?.stop());

describe(".local/env", () => {
  it("names the dev store, and its settings sign requests the store accepts", async () => {
    const text = envFile({
      kubeconfig: "/nonexistent/kubeconfig",
      simulatorUrl: "http://127.0.0.1:9",
      webhooksUrl: "http://127.0.0.1:9",
      controllerUrl: "http://127.0.0.1:9",
      webhookSecret: "whsec_env_test",
      storage: {
        endpoint: server.endpoint,
        bucket: "media-dev",
        accessKeyId: server.accessKeyId,
        secretAccessKey: server.secretAccessKey,
      },
    });
    const vars = Object.fromEntries(
      text
        .split("\n")
        .map((l) => /^export (STORAGE_[A-Z_]+)=(.*)$/.exec(l))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => [m[1]!, m[2]!]),
    );
    expect(Object.keys(vars).sort()).toEqual([
      "STORAGE_ACCESS_KEY_ID",
      "STORAGE_ADDRESSING",
      "STORAGE_BUCKET",
      "STORAGE_ENDPOINT",
      "STORAGE_REGION",
      "STORAGE_SECRET_ACCESS_KEY",
    ]);
    const store = (await openStore(parseEnv(vars)))!;
    try {
      await store.client.createBucket();
      const put = await store.signer.presign("PUT", "default/dev/1/hello.txt", 60, new Date());
      expect((await fetch(put, { method: "PUT", body: "hello dev" })).status).toBe(200);
      expect(await store.client.head("default/dev/1/hello.txt")).toMatchObject({ size: 9 });
    } finally {
      store.client.close();
    }
  });
});
