// The object store as the environment configures it: off without a bucket, a half-configured store
// refused at start with a message that names variables and never values, AWS's addressing by
// default on AWS, and object URLs whose keys are escaped as S3 signs them.
import { describe, expect, it } from "vitest";
import { ConfigError, parseEnv } from "../../src/config/env.js";
import { objectUrl, storageConfig } from "../../src/storage/config.js";

const env = (vars: Record<string, string>) => parseEnv({ ...vars });

describe("storageConfig", () => {
  it("is off without STORAGE_BUCKET", () => {
    expect(storageConfig(env({}))).toBeUndefined();
  });

  it("refuses store settings without a bucket", () => {
    expect(() => storageConfig(env({ STORAGE_ENDPOINT: "http://127.0.0.1:9000" }))).toThrow(
      /STORAGE_BUCKET: required/,
    );
  });

  it("defaults to AWS S3 of the region, virtual-hosted, keys when keys are set", () => {
    const c = storageConfig(
      env({
        STORAGE_BUCKET: "media-prod",
        STORAGE_REGION: "eu-west-1",
        STORAGE_ACCESS_KEY_ID: "AK",
        STORAGE_SECRET_ACCESS_KEY: "SK",
      }),
    );
    expect(c).toEqual({
      bucket: "media-prod",
      endpoint: "https://s3.eu-west-1.amazonaws.com",
      region: "eu-west-1",
      addressing: "virtual",
      credentials: "keys",
    });
  });

  it("takes the pod's identity when no keys are set, path addressing off AWS", () => {
    const c = storageConfig(env({ STORAGE_BUCKET: "media", STORAGE_ENDPOINT: "http://127.0.0.1:7070/" }));
    expect(c).toMatchObject({ endpoint: "http://127.0.0.1:7070", addressing: "path", credentials: "pod" });
  });

  it("refuses half a key pair or keys beside the pod's identity, naming variables only", () => {
    const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    let err: unknown;
    try {
      storageConfig(env({ STORAGE_BUCKET: "media", STORAGE_SECRET_ACCESS_KEY: secret }));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect(String(err)).toContain("STORAGE_ACCESS_KEY_ID: required");
    expect(String(err)).not.toContain(secret);
    expect(() =>
      storageConfig(
        env({ STORAGE_BUCKET: "media", STORAGE_CREDENTIALS: "pod", STORAGE_ACCESS_KEY_ID: "AK" }),
      ),
    ).toThrow(/set one/);
  });

  it("refuses a dotted bucket with virtual addressing, and a bucket name S3 would refuse", () => {
    expect(() => storageConfig(env({ STORAGE_BUCKET: "media.prod", STORAGE_ADDRESSING: "virtual" }))).toThrow(
      /path addressing/,
    );
    expect(() => env({ STORAGE_BUCKET: "Media_Prod" })).toThrow(/STORAGE_BUCKET/);
  });
});

describe("objectUrl", () => {
  const path = storageConfig(env({ STORAGE_BUCKET: "media", STORAGE_ENDPOINT: "http://127.0.0.1:7070" }))!;
  const virtual = storageConfig(
    env({ STORAGE_BUCKET: "media", STORAGE_ACCESS_KEY_ID: "a", STORAGE_SECRET_ACCESS_KEY: "b" }),
  )!;

  it("puts the bucket in the path or the host", () => {
    expect(objectUrl(path, "ns/uid/1/out.wav").href).toBe("http://127.0.0.1:7070/media/ns/uid/1/out.wav");
    expect(objectUrl(virtual, "ns/uid/1/out.wav").href).toBe(
      "https://media.s3.us-east-1.amazonaws.com/ns/uid/1/out.wav",
    );
  });

  it("escapes each segment as S3 signs it (RFC 3986), keeping the slashes", () => {
    expect(objectUrl(path, "ns/my file (1)!.wav").pathname).toBe("/media/ns/my%20file%20%281%29%21.wav");
  });
});
