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
import { createHmac, timingSafeEqual } from "node:crypto";

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

export function callbackToken(secret: string, t: CallbackTarget): string {
  const text = ["v2", ...FIELDS.map((f) => String(t[f]))].join("\n");
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

export function callbackUrl(baseUrl: string, secret: string, t: CallbackTarget): string {
  const u = new URL(CALLBACK_PATH, `${baseUrl.replace(/\/+$/, "")}/`);
  for (const f of FIELDS) u.searchParams.set(PARAMS[f], String(t[f]));
  u.searchParams.set("token", callbackToken(secret, t));
  return u.toString();
}

/** Reads a callback URL's query back into a target; undefined when a field is missing or malformed. */
export function parseCallbackQuery(
  query: Record<string, unknown>,
): { target: CallbackTarget; token: string } | undefined {
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
  return { target: { namespace, name, uid, jobId, attempt: Number(attemptText), submission }, token };
}

/** Constant-time check of a token against the target it claims. */
export function verifyCallbackToken(secret: string, t: CallbackTarget, token: string | undefined): boolean {
  // An empty secret would make every token computable by anyone.
  if (!token || !secret) return false;
  const expected = Buffer.from(callbackToken(secret, t));
  const given = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
