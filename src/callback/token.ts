// The GPU provider does not sign callbacks, so each job's webhook URL carries what identifies the
// MediaJob and an HMAC token over it, keyed with CALLBACK_SECRET. A forged or altered URL fails the
// token check; the provider only ever learns the tokens of its own jobs.
import { createHmac, timingSafeEqual } from "node:crypto";

export const CALLBACK_PATH = "/reports/gpu_provider";

export interface CallbackTarget {
  namespace: string;
  name: string;
  jobId: string;
}

export function callbackToken(secret: string, t: CallbackTarget): string {
  return createHmac("sha256", secret).update(`v1\n${t.namespace}\n${t.name}\n${t.jobId}`).digest("base64url");
}

export function callbackUrl(baseUrl: string, secret: string, t: CallbackTarget): string {
  const u = new URL(CALLBACK_PATH, `${baseUrl.replace(/\/+$/, "")}/`);
  u.searchParams.set("ns", t.namespace);
  u.searchParams.set("name", t.name);
  u.searchParams.set("job", t.jobId);
  u.searchParams.set("token", callbackToken(secret, t));
  return u.toString();
}

/** Constant-time check of a token against the target it claims. */
export function verifyCallbackToken(secret: string, t: CallbackTarget, token: string | undefined): boolean {
  // An empty secret would make every token computable by anyone.
  if (!token || !secret) return false;
  const expected = Buffer.from(callbackToken(secret, t));
  const given = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
