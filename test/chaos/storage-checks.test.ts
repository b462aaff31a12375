// Chaos's storage checks and faults (bench/chaos/storage.ts) against a real S3 server: a Completed
// job whose output is absent, of another size or digest counts in outputsMissing, a key outside
// the job's namespace in crossTenantCacheHits, and the store's front answers 503 and resets
// connections during an outage while passing signed requests through untouched.
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { openStore, type Store } from "../../src/storage/index.js";
import { checkStorage, storeFront } from "../../bench/chaos/storage.js";
import { Rng } from "../../bench/chaos/rng.js";
import { startS3Server, type S3Server } from "../support/s3server.js";
import { storeEnv } from "../support/s3store.js";

let server: S3Server;
let store: Store;
beforeAll(async () => {
  server = await startS3Server();
  store = (await openStore(storeEnv(server, "chaos-check")))!;
  await store.client.createBucket();
}, 240_000);
afterAll(async () => {
  store?.client.close();
  await server?.stop();
});

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const body = Buffer.from("an output");
function completed(
  name: string,
  ns: string,
  output: { key: string; size: number; sha256?: string },
): MediaJob {
  return {
    apiVersion: "media-orchestrator.io/v1alpha1",
    kind: "MediaJob",
    metadata: { name, namespace: ns, uid: `${name}-uid` },
    spec: { workload: "tts", media: { outputs: [{ name: "out.bin" }] } },
    status: {
      phase: "Completed",
      outputs: [{ name: "out.bin", uri: `s3://chaos-check/${output.key}`, ...output }],
    },
  } as unknown as MediaJob;
}

describe("checkStorage", () => {
  it("counts outputs not in the store as recorded, and keys outside the job's namespace", async () => {
    await store.client.put("ns-a/u1/1/out.bin", body);
    await store.client.put("ns-b/u2/1/out.bin", body);
    const check = await checkStorage(
      [
        completed("good", "ns-a", { key: "ns-a/u1/1/out.bin", size: body.length, sha256: sha256(body) }),
        completed("absent", "ns-a", { key: "ns-a/u9/1/out.bin", size: body.length }),
        completed("resized", "ns-a", { key: "ns-a/u1/1/out.bin", size: body.length + 1 }),
        completed("other-bytes", "ns-a", {
          key: "ns-a/u1/1/out.bin",
          size: body.length,
          sha256: "0".repeat(64),
        }),
        completed("foreign", "ns-a", { key: "ns-b/u2/1/out.bin", size: body.length, sha256: sha256(body) }),
      ],
      store.client,
    );
    expect(check.mediaCompleted).toBe(5);
    expect(check.outputsMissing.map((m) => (m as { job: string }).job)).toEqual([
      "absent",
      "resized",
      "other-bytes",
    ]);
    expect(check.crossTenantCacheHits).toEqual([{ job: "foreign", key: "ns-b/u2/1/out.bin" }]);
  });
});

describe("storeFront", () => {
  it("passes signed requests through, answers 503 as told, and resets connections while down", async () => {
    const quiet = await storeFront(server.endpoint, new Rng(1), {
      serverErrors: 0,
      expiredUrls: 0,
      slowPuts: 0,
      slowPutMs: 0,
    });
    const through = (await openStore({ ...storeEnv(server, "chaos-check"), STORAGE_ENDPOINT: quiet.url }))!;
    await through.client.put("ns-a/u3/1/out.bin", body);
    expect(await through.client.sha256("ns-a/u3/1/out.bin")).toBe(sha256(body));
    const outage = quiet.outage(1_000);
    await expect(through.client.head("ns-a/u3/1/out.bin")).rejects.toMatchObject({ status: 0 });
    await outage;
    expect((await through.client.head("ns-a/u3/1/out.bin"))?.size).toBe(body.length);
    expect(quiet.stats.refused).toBeGreaterThan(0);
    through.client.close();
    await quiet.close();

    const failing = await storeFront(server.endpoint, new Rng(1), {
      serverErrors: 1,
      expiredUrls: 0,
      slowPuts: 0,
      slowPutMs: 0,
    });
    const refused = (await openStore({ ...storeEnv(server, "chaos-check"), STORAGE_ENDPOINT: failing.url }))!;
    await expect(refused.client.put("ns-a/u4/1/out.bin", body)).rejects.toMatchObject({
      status: 503,
      code: "SlowDown",
    });
    expect(await store.client.head("ns-a/u4/1/out.bin")).toBeUndefined();
    refused.client.close();
    await failing.close();
  });
});
