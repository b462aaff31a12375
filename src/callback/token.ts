// The GPU provider does not sign callbacks (RunPod sends a bare POST to the webhook URL:
// https://docs.runpod.io/serverless/endpoints/send-requests#webhook-notifications), so each
// submission's webhook URL carries what identifies the MediaJob and the one submission it belongs
// to, and an HMAC token over all of it, keyed with CALLBACK_SECRET.
//
// The token covers the object's uid and the submission (attempt number and the random id written
// with the submission intent), so a URL stays good for exactly one submission of one object: a
// callback of an earlier attempt, or one addressed to a deleted object re-created under the same
// name, fails the check. The token is checked before anything is read (no I/O), then the sidecar
// compares uid, attempt and submission id with the object's status.
//
// Version 3 tokens (the URLs the controller mints) also cover an expiry and the id of the key that
// signed them. Callback URLs leak (an ingress logs query strings by default), so a URL stops
// working once its job cannot call back any more: the job's timeout, plus the provider's 30-minute
// retention of a finished job's result, plus a margin (callbackExpiry). The key id lets the sidecar
// accept the previous secret during a rotation (CALLBACK_SECRET_PREVIOUS) without trying every key,
// so a rotation does not invalidate the URLs of jobs in flight. Version 2 tokens (no expiry, minted
// before version 3) still verify: the sidecar answers them like any other until their job is
// finished, and a finished job's callback is answered before its body is read (docs/webhooks.md).
import { createHash, createHmac, timingSafeEqual } from "node:crypto";

export const CALLBACK_PATH = "/reports/gpu_provider";

export interface CallbackTarget {
  namespace: string;
  name: string;
  uid: string;
  /** status.jobId: our job id, never the provider's. */
  jobId: string;
  /** status.submission.attempt of the submission this URL was made for. */
  attempt: number;
  /** status.submission.id: the random id written with the submission intent. */
  submission: string;
}

const FIELDS = ["namespace", "name", "uid", "jobId", "attempt", "submission"] as const;

/** What a version 3 token adds to the target, besides the signing key's id: when it stops being valid. */
export interface CallbackGrant {
  /** Unix seconds after which the URL is refused. */
  expiresAt: number;
}

/** The smallest secret accepted: an HMAC key shorter than its 32-byte output is the weak link. */
export const CALLBACK_SECRET_MIN_BYTES = 32;

/**
 * RunPod keeps a finished /run job's result for 30 minutes
 * (https://docs.runpod.io/serverless/endpoints/send-requests): a callback, or the operator's
 * `kubectl media recover` of it, is useless after that.
 */
const PROVIDER_RESULT_RETENTION_MS = 30 * 60_000;
/** Room for clock skew between replicas and a late callback retry. */
const CALLBACK_EXPIRY_MARGIN_MS = 10 * 60_000;

/** When a callback URL minted at `nowMs` for a job of `timeoutSeconds` stops being accepted. */
export function callbackExpiry(nowMs: number, timeoutSeconds: number): number {
  return Math.ceil(
    (nowMs + timeoutSeconds * 1000 + PROVIDER_RESULT_RETENTION_MS + CALLBACK_EXPIRY_MARGIN_MS) / 1000,
  );
}

/**
 * The key id a URL names: a short hash of the secret, so the sidecar picks the one key to check
 * (current or previous) and the id reveals nothing that helps to guess the secret.
 */
export function callbackKeyId(secret: string): string {
  return createHash("sha256").update(`media-orchestrator callback key\n${secret}`).digest("hex").slice(0, 8);
}

/**
 * The token of a URL: version 3 with a grant (expiry and key id), else the version 2 token of URLs
 * minted before expiries existed (kept to verify those).
 */
export function callbackToken(secret: string, t: CallbackTarget, grant?: CallbackGrant): string {
  const fields = FIELDS.map((f) => String(t[f]));
  const text = grant
    ? ["v3", ...fields, String(grant.expiresAt), callbackKeyId(secret)].join("\n")
    : ["v2", ...fields].join("\n");
  return createHmac("sha256", secret).update(text).digest("base64url");
}

/** Query parameter names in the URL, short because RunPod echoes the URL in every status object. */
const PARAMS: Record<(typeof FIELDS)[number], string> = {
  namespace: "ns",
  name: "name",
  uid: "uid",
  jobId: "job",
  attempt: "attempt",
  submission: "sub",
};

/** The webhook URL of one submission; with a grant (the controller's), a version 3 URL. */
export function callbackUrl(
  baseUrl: string,
  secret: string,
  t: CallbackTarget,
  grant?: CallbackGrant,
): string {
  const u = new URL(CALLBACK_PATH, `${baseUrl.replace(/\/+$/, "")}/`);
  for (const f of FIELDS) u.searchParams.set(PARAMS[f], String(t[f]));
  if (grant) {
    u.searchParams.set("exp", String(grant.expiresAt));
    u.searchParams.set("kid", callbackKeyId(secret));
  }
  u.searchParams.set("token", callbackToken(secret, t, grant));
  return u.toString();
}

export interface ParsedCallbackQuery {
  target: CallbackTarget;
  token: string;
  /** Version 3 only. */
  expiresAt?: number;
  keyId?: string;
}

/** Reads a callback URL's query back into a target; undefined when a field is missing or malformed. */
export function parseCallbackQuery(query: Record<string, unknown>): ParsedCallbackQuery | undefined {
  const text = (k: string, max: number): string | undefined => {
    const v = query[k];
    return typeof v === "string" && v.length > 0 && v.length <= max ? v : undefined;
  };
  const namespace = text("ns", 63);
  const name = text("name", 253);
  const uid = text("uid", 128);
  const jobId = text("job", 256);
  const attemptText = text("attempt", 6);
  const submission = text("sub", 64);
  const token = text("token", 128);
  if (!namespace || !name || !uid || !jobId || !attemptText || !submission || !token) return undefined;
  if (!/^[1-9][0-9]{0,5}$/.test(attemptText)) return undefined;
  const target = { namespace, name, uid, jobId, attempt: Number(attemptText), submission };
  const exp = query.exp;
  const kid = query.kid;
  if (exp === undefined && kid === undefined) return { target, token };
  if (typeof exp !== "string" || !/^[1-9][0-9]{0,11}$/.test(exp)) return undefined;
  if (typeof kid !== "string" || !/^[0-9a-f]{8}$/.test(kid)) return undefined;
  return { target, token, expiresAt: Number(exp), keyId: kid };
}

/** Why a callback URL was refused, or the version it verified as. */
export type CallbackVerdict =
  { ok: true; version: 2 | 3 } | { ok: false; reason: "no_secret" | "unknown_key" | "bad_token" | "expired" };

/**
 * Checks a parsed URL against the keys in use (the current secret first, then the previous one
 * during a rotation): the signature, then the expiry. An expired URL is refused whatever its job.
 */
export function verifyCallback(
  secrets: ReadonlyArray<string | undefined>,
  q: ParsedCallbackQuery,
  nowMs: number,
): CallbackVerdict {
  const keys = secrets.filter((s): s is string => !!s);
  if (keys.length === 0) return { ok: false, reason: "no_secret" };
  if (q.expiresAt === undefined) {
    return keys.some((k) => verifyCallbackToken(k, q.target, q.token))
      ? { ok: true, version: 2 }
      : { ok: false, reason: "bad_token" };
  }
  const key = keys.find((k) => callbackKeyId(k) === q.keyId);
  if (!key) return { ok: false, reason: "unknown_key" };
  if (!sameToken(callbackToken(key, q.target, { expiresAt: q.expiresAt }), q.token))
    return { ok: false, reason: "bad_token" };
  if (q.expiresAt * 1000 < nowMs) return { ok: false, reason: "expired" };
  return { ok: true, version: 3 };
}

function sameToken(expectedText: string, token: string): boolean {
  const expected = Buffer.from(expectedText);
  const given = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** Constant-time check of a version 2 token against the target it claims. */
export function verifyCallbackToken(secret: string, t: CallbackTarget, token: string | undefined): boolean {
  // An empty secret would make every token computable by anyone.
  if (!token || !secret) return false;
  return sameToken(callbackToken(secret, t), token);
}
