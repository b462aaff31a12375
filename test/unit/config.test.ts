import { describe, expect, it } from "vitest";
import {
  ConfigError,
  fairShareWeights,
  parseEnv,
  requireSidecarVars,
  requireStrongCallbackSecrets,
  webhookSecrets,
} from "../../src/config/env.js";
import {
  callbackToken,
  callbackUrl,
  callbackExpiry,
  callbackKeyId,
  parseCallbackQuery,
  verifyCallback,
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

  it("reads the policy for unconfirmed submissions: fail by default, resubmit on request, nothing else", () => {
    expect(parseEnv({}).UNCONFIRMED_SUBMISSION_POLICY).toBe("fail");
    expect(parseEnv({ UNCONFIRMED_SUBMISSION_POLICY: "resubmit" }).UNCONFIRMED_SUBMISSION_POLICY).toBe(
      "resubmit",
    );
    expect(() => parseEnv({ UNCONFIRMED_SUBMISSION_POLICY: "retry" })).toThrow(
      /UNCONFIRMED_SUBMISSION_POLICY: must be fail \(at most once, the default\) or resubmit/,
    );
  });

  it("reads plans keyed by price id: none by default, checked at start", () => {
    expect(parseEnv({}).MEDIA_PLANS).toEqual({});
    expect(parseEnv({ MEDIA_PLANS: " " }).MEDIA_PLANS).toEqual({});
    const plan = { gpuSecondsPerPeriod: 3600, maxConcurrentJobs: 2, maxExecutionTimeoutMs: 600_000 };
    expect(parseEnv({ MEDIA_PLANS: JSON.stringify({ price_small: plan }) }).MEDIA_PLANS).toEqual({
      price_small: plan,
    });
    expect(() => parseEnv({ MEDIA_PLANS: "{not json" })).toThrow(/MEDIA_PLANS: must be a JSON object/);
    expect(() =>
      parseEnv({ MEDIA_PLANS: JSON.stringify({ price_small: { ...plan, maxExecutionTimeoutMs: 1000 } }) }),
    ).toThrow(/MEDIA_PLANS: invalid plans \(price_small.maxExecutionTimeoutMs/);
    expect(parseEnv({}).CANCEL_FOLLOW_WARNING_SECONDS).toBe(120);
  });

  it("reads the fair-share weights, and refuses a weight that is not a positive number", () => {
    expect(fairShareWeights(parseEnv({}))).toEqual(new Map());
    expect(fairShareWeights(parseEnv({ FAIR_SHARE_WEIGHTS: "cus_A=2, cus_B=0.5" }))).toEqual(
      new Map([
        ["cus_A", 2],
        ["cus_B", 0.5],
      ]),
    );
    expect(() => parseEnv({ FAIR_SHARE_WEIGHTS: "cus_A=0" })).toThrow(/FAIR_SHARE_WEIGHTS: "cus_A=0"/);
    expect(() => parseEnv({ FAIR_SHARE_WEIGHTS: "cus_A" })).toThrow(/expected account=weight/);
  });

  it("reads several webhook secrets for a rotation", () => {
    expect(webhookSecrets(parseEnv({ PAYMENT_PROVIDER_WEBHOOK_SECRET: "whsec_a, whsec_b" }))).toEqual([
      "whsec_a",
      "whsec_b",
    ]);
  });
});

describe("the webhooks sidecar's required variables", () => {
  const base = { CALLBACK_SECRET: "cb-0123456789abcdef0123456789abcdef", GPU_PROVIDER_API_KEY: "gpu-key" };
  const problem = (vars: Record<string, string>) => {
    try {
      requireSidecarVars(parseEnv(vars));
      return undefined;
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    }
  };

  it("refuses a missing signing secret, naming it and how to switch payment webhooks off", () => {
    const msg = problem(base);
    expect(msg).toContain("PAYMENT_PROVIDER_WEBHOOK_SECRET: required by the webhooks sidecar");
    expect(msg).toContain("PAYMENT_WEBHOOKS_ENABLED=false");
  });

  it("counts a list of empty secrets as missing, and never echoes a value", () => {
    expect(problem({ ...base, PAYMENT_PROVIDER_WEBHOOK_SECRET: " , " })).toMatch(
      /PAYMENT_PROVIDER_WEBHOOK_SECRET: required/,
    );
    const msg = problem({ CALLBACK_SECRET: "", PAYMENT_PROVIDER_WEBHOOK_SECRET: "whsec_DO-NOT-PRINT" });
    expect(msg).toMatch(/CALLBACK_SECRET: required by the webhooks sidecar/);
    // The provider key: every GPU callback is confirmed with the provider's status API.
    expect(msg).toMatch(/GPU_PROVIDER_API_KEY: required by the webhooks sidecar/);
    expect(msg).not.toContain("DO-NOT-PRINT");
  });

  it("accepts a signing secret, or payment webhooks switched off on purpose", () => {
    expect(problem({ ...base, PAYMENT_PROVIDER_WEBHOOK_SECRET: "whsec_a" })).toBeUndefined();
    expect(problem({ ...base, PAYMENT_WEBHOOKS_ENABLED: "false" })).toBeUndefined();
    expect(parseEnv({}).PAYMENT_WEBHOOKS_ENABLED).toBe(true);
  });

  it("refuses a callback secret (or the previous one) shorter than 32 bytes, naming it, never its value", () => {
    const ok = { ...base, PAYMENT_WEBHOOKS_ENABLED: "false" };
    expect(problem({ ...ok, CALLBACK_SECRET: "x" })).toMatch(/CALLBACK_SECRET: must be at least 32 bytes/);
    const msg = problem({ ...ok, CALLBACK_SECRET_PREVIOUS: "short-DO-NOT-PRINT" });
    expect(msg).toMatch(/CALLBACK_SECRET_PREVIOUS: must be at least 32 bytes/);
    expect(msg).not.toContain("DO-NOT-PRINT");
    expect(problem({ ...ok, CALLBACK_SECRET: "y".repeat(32) })).toBeUndefined();
    expect(() => requireStrongCallbackSecrets(parseEnv({ CALLBACK_SECRET: "x" }), "controller")).toThrow(
      /CALLBACK_SECRET: must be at least 32 bytes for the controller/,
    );
  });

  it("names PAYMENT_WEBHOOKS_ENABLED when its value is not a boolean", () => {
    expect(() => parseEnv({ PAYMENT_WEBHOOKS_ENABLED: "maybe" })).toThrow(/PAYMENT_WEBHOOKS_ENABLED/);
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

  const S = "s".repeat(32);
  const OLD = "o".repeat(32);
  const query = (url: string) => parseCallbackQuery(Object.fromEntries(new URL(url).searchParams))!;

  it("carry an expiry and a key id, and are refused once expired", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    const expiresAt = callbackExpiry(now, 600);
    // The job's timeout, the provider's 30-minute retention and a 10-minute margin.
    expect(expiresAt).toBe((now + 600_000 + 30 * 60_000 + 10 * 60_000) / 1000);
    const q = query(callbackUrl("https://hooks.example.com", S, t, { expiresAt }));
    expect(q).toMatchObject({ expiresAt, keyId: callbackKeyId(S) });
    expect(verifyCallback([S], q, now)).toEqual({ ok: true, version: 3 });
    expect(verifyCallback([S], q, expiresAt * 1000 + 1)).toEqual({ ok: false, reason: "expired" });
    // The expiry is signed: moving it forward breaks the token.
    expect(verifyCallback([S], { ...q, expiresAt: expiresAt + 3600 }, now)).toEqual({
      ok: false,
      reason: "bad_token",
    });
    expect(verifyCallback([S], { ...q, target: { ...t, attempt: 2 } }, now)).toEqual({
      ok: false,
      reason: "bad_token",
    });
    expect(verifyCallback([], q, now)).toEqual({ ok: false, reason: "no_secret" });
  });

  it("of the previous secret verify during a rotation; version 2 tokens verify without an expiry", () => {
    const now = Date.now();
    const q = query(callbackUrl("https://h.example.com", OLD, t, { expiresAt: callbackExpiry(now, 60) }));
    expect(verifyCallback([S], q, now)).toEqual({ ok: false, reason: "unknown_key" });
    expect(verifyCallback([S, OLD], q, now)).toEqual({ ok: true, version: 3 });
    const v2 = query(callbackUrl("https://h.example.com", OLD, t));
    expect(v2.expiresAt).toBeUndefined();
    expect(verifyCallback([S, OLD], v2, now)).toEqual({ ok: true, version: 2 });
    expect(verifyCallback([S], v2, now)).toEqual({ ok: false, reason: "bad_token" });
    expect(callbackKeyId(S)).not.toBe(callbackKeyId(OLD));
    expect(callbackKeyId(S)).not.toContain(S.slice(0, 4));
  });
});
