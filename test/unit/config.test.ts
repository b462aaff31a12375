import { describe, expect, it } from "vitest";
import { ConfigError, parseEnv, webhookSecrets } from "../../src/config/env.js";
import {
  callbackToken,
  callbackUrl,
  parseCallbackQuery,
  verifyCallbackToken,
} from "../../src/callback/token.js";

describe("configuration", () => {
  it("applies defaults", () => {
    const env = parseEnv({});
    expect(env).toMatchObject({
      RESYNC_INTERVAL_SECONDS: 30,
      JOB_TIMEOUT_SECONDS: 600,
      MEDIA_ENV: "dev",
      LEADER_ELECTION: true,
    });
  });

  it("names every bad variable and never echoes a value", () => {
    const secret = "sk-live-DO-NOT-PRINT";
    try {
      parseEnv({ RESYNC_INTERVAL_SECONDS: "soon", GPU_PROVIDER_API_URL: secret, MEDIA_ENV: "Prod!" });
      throw new Error("accepted");
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const msg = (err as Error).message;
      expect(msg).toMatch(/RESYNC_INTERVAL_SECONDS/);
      expect(msg).toMatch(/GPU_PROVIDER_API_URL/);
      expect(msg).toMatch(/MEDIA_ENV/);
      expect(msg).not.toContain(secret);
    }
  });

  it("reads several webhook secrets for a rotation", () => {
    expect(webhookSecrets(parseEnv({ PAYMENT_PROVIDER_WEBHOOK_SECRET: "whsec_a, whsec_b" }))).toEqual([
      "whsec_a",
      "whsec_b",
    ]);
  });
});

describe("callback tokens", () => {
  const t = {
    namespace: "ns",
    name: "job",
    uid: "uid-1",
    jobId: "j1",
    attempt: 1,
    submission: "sub-aaaaaaaa",
  };
  it("verify only for the same object, submission and secret", () => {
    const token = callbackToken("s", t);
    expect(verifyCallbackToken("s", t, token)).toBe(true);
    expect(verifyCallbackToken("other", t, token)).toBe(false);
    expect(verifyCallbackToken("s", { ...t, jobId: "j2" }, token)).toBe(false);
    expect(verifyCallbackToken("s", { ...t, uid: "uid-2" }, token)).toBe(false);
    expect(verifyCallbackToken("s", { ...t, attempt: 2 }, token)).toBe(false);
    expect(verifyCallbackToken("s", { ...t, submission: "sub-bbbbbbbb" }, token)).toBe(false);
    expect(verifyCallbackToken("s", t, undefined)).toBe(false);
    expect(verifyCallbackToken("s", t, token.slice(1))).toBe(false);
  });

  it("travel in the webhook URL with the job's coordinates", () => {
    const u = new URL(callbackUrl("https://hooks.example.com/base/", "s", t));
    expect(u.pathname).toBe("/reports/gpu_provider");
    expect(Object.fromEntries(u.searchParams)).toEqual({
      ns: "ns",
      name: "job",
      uid: "uid-1",
      job: "j1",
      attempt: "1",
      sub: "sub-aaaaaaaa",
      token: callbackToken("s", t),
    });
    expect(parseCallbackQuery(Object.fromEntries(u.searchParams))).toEqual({
      target: t,
      token: callbackToken("s", t),
    });
    expect(parseCallbackQuery({ ...Object.fromEntries(u.searchParams), attempt: "0" })).toBeUndefined();
  });
});
