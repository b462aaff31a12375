// Stripe-compatible webhook signatures, pure: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`,
// HMAC-SHA256 over "<t>.<raw body bytes>", keyed with the whole signing secret as text (`whsec_...`
// included, no base64 decoding). Any v1 may match any configured secret (rotation); other schemes
// (v0) are ignored. Unlike stripe-node, a timestamp too far in the future fails as well as one too
// old. Comparisons are constant-time over fixed-length digests, and every (secret, signature) pair
// is compared, so the time taken does not tell which one came close.
import { createHmac, timingSafeEqual } from "node:crypto";

/** Why a signature check failed: a short fixed word, safe for logs and metric labels. */
export type SignatureFailure =
  | "no_secret_configured"
  | "missing_header"
  | "malformed_header"
  | "missing_timestamp"
  | "missing_v1_signature"
  | "no_matching_signature"
  | "timestamp_outside_tolerance";

export type SignatureResult = { ok: true; timestamp: number } | { ok: false; reason: SignatureFailure };

/** Headers longer than this are refused unparsed (Node already caps all headers at 16 KiB). */
const MAX_HEADER_LENGTH = 8192;
/** More v1 entries than any rotation needs; beyond this the header is malformed. */
const MAX_SIGNATURES = 16;
const HEX_SHA256 = /^[0-9a-f]{64}$/i;
const UNIX_SECONDS = /^\d{1,12}$/;

function hmac(secret: string, timestamp: string, rawBody: Buffer): Buffer {
  return createHmac("sha256", secret).update(`${timestamp}.`, "utf8").update(rawBody).digest();
}

interface ParsedHeader {
  timestamp: string;
  signatures: Buffer[];
}

function parseHeader(header: string): ParsedHeader | SignatureFailure {
  if (header.length > MAX_HEADER_LENGTH) return "malformed_header";
  let timestamp: string | undefined;
  const signatures: Buffer[] = [];
  let v1Entries = 0;
  for (const item of header.split(",")) {
    const eq = item.indexOf("=");
    if (eq <= 0) return "malformed_header";
    const key = item.slice(0, eq).trim();
    const value = item.slice(eq + 1).trim();
    if (key === "t") {
      // Two timestamps mean two headers were joined, or someone is probing: refuse to pick one.
      if (timestamp !== undefined || !UNIX_SECONDS.test(value)) return "malformed_header";
      timestamp = String(Number(value)); // as Stripe signs it: the parsed integer
    } else if (key === "v1") {
      if (++v1Entries > MAX_SIGNATURES) return "malformed_header";
      // A v1 that is not a hex SHA-256 can never match; it is skipped, not fatal (any v1 may match).
      if (HEX_SHA256.test(value)) signatures.push(Buffer.from(value, "hex"));
    }
    // Any other scheme (v0, future ones) is ignored, as Stripe's own libraries do.
  }
  if (timestamp === undefined) return "missing_timestamp";
  if (signatures.length === 0) return "missing_v1_signature";
  return { timestamp, signatures };
}

/**
 * Verifies a Stripe-style signature over the exact raw body. The signature is checked before the
 * timestamp so the reason in the logs separates forgeries (no_matching_signature) from genuine but
 * stale or clock-skewed deliveries (timestamp_outside_tolerance). `toleranceSeconds` applies in
 * both directions: |now - t| must not exceed it.
 */
export function verifyStripeSignature(
  rawBody: Buffer,
  header: string | undefined,
  secrets: string[],
  toleranceSeconds: number,
  nowSeconds: number,
): SignatureResult {
  const keys = secrets.filter((s) => s.length > 0);
  if (keys.length === 0) return { ok: false, reason: "no_secret_configured" };
  if (header === undefined || header.trim() === "") return { ok: false, reason: "missing_header" };
  const parsed = parseHeader(header);
  if (typeof parsed === "string") return { ok: false, reason: parsed };

  let matched = false;
  for (const key of keys) {
    const expected = hmac(key, parsed.timestamp, rawBody);
    for (const given of parsed.signatures) {
      // Both are 32 bytes (the header parser only keeps 64-hex-digit values); no early exit.
      if (timingSafeEqual(expected, given)) matched = true;
    }
  }
  if (!matched) return { ok: false, reason: "no_matching_signature" };

  const timestamp = Number(parsed.timestamp);
  if (!(Math.abs(Math.floor(nowSeconds) - timestamp) <= toleranceSeconds)) {
    return { ok: false, reason: "timestamp_outside_tolerance" };
  }
  return { ok: true, timestamp };
}

/**
 * What can be judged of a delivery before its body is read: a signing secret is configured, the
 * header is there and well formed, and its timestamp is within `toleranceSeconds` of now. A
 * request that fails here is refused without buffering its body; one that passes still needs
 * verifyStripeSignature over the body. (A stale timestamp is reported as stale here even when the
 * signature would not have matched either: the body is never read to tell.)
 */
export function precheckStripeHeader(
  header: string | undefined,
  secrets: string[],
  toleranceSeconds: number,
  nowSeconds: number,
): SignatureFailure | undefined {
  if (!secrets.some((s) => s.length > 0)) return "no_secret_configured";
  if (header === undefined || header.trim() === "") return "missing_header";
  const parsed = parseHeader(header);
  if (typeof parsed === "string") return parsed;
  if (!(Math.abs(Math.floor(nowSeconds) - Number(parsed.timestamp)) <= toleranceSeconds))
    return "timestamp_outside_tolerance";
  return undefined;
}

/** The `Stripe-Signature` header value for a body: `t=<ts>,v1=<hex>`. For tests, the CLI and the demo. */
export function signStripePayload(
  rawBody: string | Buffer,
  secret: string,
  timestampSeconds: number,
): string {
  const t = String(Math.floor(timestampSeconds));
  const body = typeof rawBody === "string" ? Buffer.from(rawBody, "utf8") : rawBody;
  return `t=${t},v1=${hmac(secret, t, body).toString("hex")}`;
}
