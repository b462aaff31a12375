// The chart's storage values, rendered by the real helm: off by default; with a bucket, the
// controller gets STORAGE_* and the store's keys as files of its own secrets volume (the sidecar
// never sees them, and no key is ever an environment variable), and the product accepts the
// rendered settings; with the pod's identity, no key file at all; a bad bucket name is refused.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseEnv } from "../../src/config/env.js";
import { storageConfig } from "../../src/storage/config.js";
import { CHART_DIR, helm, helmTemplate, type Manifest } from "../support/helm.js";

interface Container {
  name: string;
  env: Array<{ name: string; value?: string }>;
}
interface Volume {
  name: string;
  projected?: { sources: Array<{ secret: { name: string; items: Array<{ key: string; path: string }> } }> };
}
type Deployment = Manifest & { spec: { template: { spec: { containers: Container[]; volumes: Volume[] } } } };
type Secret = Manifest & { data?: Record<string, string> };

function render(args: string[]) {
  const objs = helmTemplate("mo", "media-system", args);
  const deployment = objs.find((o) => o.kind === "Deployment") as Deployment;
  const secret = objs.find((o) => o.kind === "Secret" && o.metadata.name === "mo-media-orchestrator") as
    Secret | undefined;
  const pod = deployment.spec.template.spec;
  const keyFiles = (container: string) =>
    pod.volumes
      .filter((v) => v.name === `${container}-secrets`)
      .flatMap((v) => v.projected?.sources ?? [])
      .flatMap((s) => s.secret.items.map((i) => i.path))
      .filter((p) => p.startsWith("STORAGE_"));
  const storageEnv = (container: string) =>
    Object.fromEntries(
      pod.containers
        .find((c) => c.name === container)!
        .env.filter((e) => e.name.startsWith("STORAGE_"))
        .map((e) => [e.name, e.value]),
    );
  return { secret, keyFiles, storageEnv };
}

describe("the chart's storage values", () => {
  it("configure no store by default", () => {
    const r = render([]);
    expect(r.storageEnv("controller")).toEqual({});
    expect(r.keyFiles("controller")).toEqual([]);
  });

  it("give the controller the store's settings and its keys as files, the sidecar no keys", () => {
    const r = render([
      "--set",
      "storage.bucket=media-prod",
      "--set",
      "storage.region=eu-west-1",
      "--set",
      "storage.accessKeyId=AKIAEXAMPLE",
      "--set",
      "storage.secretAccessKey=example-secret",
    ]);
    const env = r.storageEnv("controller");
    expect(env).toEqual({
      STORAGE_BUCKET: "media-prod",
      STORAGE_REGION: "eu-west-1",
      STORAGE_CREDENTIALS: "keys",
      // The retention sweep's settings (docs/design.md, Retention).
      STORAGE_SWEEP_INTERVAL_SECONDS: "3600",
      STORAGE_ORPHAN_MIN_AGE_SECONDS: "3600",
      STORAGE_CACHE_TTL_SECONDS: "604800",
      STORAGE_KEEP_MAX_BYTES: "5368709120",
      STORAGE_KEEP_TIMEOUT_SECONDS: "900",
    });
    expect(r.keyFiles("controller")).toEqual(["STORAGE_ACCESS_KEY_ID", "STORAGE_SECRET_ACCESS_KEY"]);
    expect(r.keyFiles("webhooks")).toEqual([]);
    expect(Object.keys(r.secret?.data ?? {})).toEqual(
      expect.arrayContaining(["STORAGE_ACCESS_KEY_ID", "STORAGE_SECRET_ACCESS_KEY"]),
    );

    // The product reads the rendered settings with the files the Secret provides.
    const dir = mkdtempSync(join(tmpdir(), "chart-storage-"));
    for (const [k, v] of Object.entries(r.secret!.data!))
      writeFileSync(join(dir, k), Buffer.from(v, "base64"));
    const parsed = parseEnv({ ...env, SECRETS_DIR: dir });
    expect(storageConfig(parsed)).toEqual({
      bucket: "media-prod",
      endpoint: "https://s3.eu-west-1.amazonaws.com",
      region: "eu-west-1",
      addressing: "virtual",
      credentials: "keys",
    });
    expect(parsed.STORAGE_SECRET_ACCESS_KEY).toBe("example-secret");
  });

  it("mount no key with the pod's identity", () => {
    const r = render([
      "--set",
      "storage.bucket=media",
      "--set",
      "storage.credentials=pod",
      "--set",
      "storage.endpoint=http://minio.store:9000",
    ]);
    expect(r.keyFiles("controller")).toEqual([]);
    const env = r.storageEnv("controller");
    expect(storageConfig(parseEnv(env))).toMatchObject({
      credentials: "pod",
      addressing: "path",
      endpoint: "http://minio.store:9000",
    });
  });

  it("refuse a bucket name S3 would refuse", () => {
    const res = helm(["template", "mo", CHART_DIR, "--set", "storage.bucket=Media_Prod"]);
    expect(res.status).not.toBe(0);
    expect(res.stderr).toContain("/storage/bucket");
  });
});
