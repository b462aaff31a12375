// AWS Signature Version 4 for the object store, through @smithy/signature-v4: the signer the AWS
// SDK for JavaScript v3 itself uses (its S3 client and @aws-sdk/s3-request-presigner sign with it),
// without the rest of the SDK. Measured in docs/design.md ("Media and storage"): the full S3 client
// and presigner cost a container about twice its memory. SHA-256 and HMAC come from node:crypto,
// which the controller loads anyway. Presigned URLs sign the method, the key and the host, and
// carry UNSIGNED-PAYLOAD as the body's hash, as the SDK's presigner does: a worker can upload any
// bytes, the controller checks them afterwards (size, digest).
import { createHash, createHmac, type Hash, type Hmac } from "node:crypto";
import { SignatureV4 } from "@smithy/signature-v4";
import { MAX_PRESIGNED_SECONDS } from "./attempt-io.js";
import { objectUrl, type StorageConfig } from "./config.js";
import type { CredentialSource } from "./credentials.js";

/** The hash constructor @smithy/signature-v4 expects (new Hash(secret?), update, digest), on node:crypto. */
class Sha256 {
  private readonly h: Hash | Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.h =
      secret === undefined
        ? createHash("sha256")
        : createHmac("sha256", typeof secret === "string" ? secret : toBuffer(secret));
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.h.update(typeof data === "string" ? data : toBuffer(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.h.digest()));
  }
}

function toBuffer(data: ArrayBuffer | ArrayBufferView): Buffer {
  return ArrayBuffer.isView(data)
    ? Buffer.from(data.buffer, data.byteOffset, data.byteLength)
    : Buffer.from(data);
}

type SignableRequest = Parameters<SignatureV4["sign"]>[0];

function requestFor(url: URL, method: string, headers: Record<string, string>): SignableRequest {
  const query: Record<string, string> = {};
  for (const [k, v] of url.searchParams) query[k] = v;
  return {
    method,
    protocol: url.protocol,
    hostname: url.hostname,
    ...(url.port !== "" && { port: Number(url.port) }),
    path: url.pathname,
    query,
    headers: { ...headers, host: url.host },
  };
}

function urlOf(req: SignableRequest): string {
  const url = new URL(`${req.protocol}//${req.hostname}${req.port !== undefined ? `:${req.port}` : ""}`);
  url.pathname = req.path;
  // The signer's query values are what it signed; URLSearchParams would encode a space as '+',
  // which S3 reads as a plus sign: encode as RFC 3986, as the canonical query does.
  const enc = (s: string) =>
    encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  url.search = Object.entries(req.query ?? {})
    .flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : v == null ? [] : [[k, v]]))
    .map(([k, v]) => `${enc(k!)}=${enc(v!)}`)
    .join("&");
  return url.toString();
}

export class StoreSigner {
  private readonly signer: SignatureV4;

  constructor(
    readonly config: StorageConfig,
    credentials: CredentialSource,
  ) {
    this.signer = new SignatureV4({
      service: "s3",
      region: config.region,
      credentials,
      sha256: Sha256,
      // S3 signs the path as sent (each segment escaped once), not escaped a second time.
      uriEscapePath: false,
      applyChecksum: false,
    });
  }

  /**
   * A URL that lets its holder `method` the object `key` until `signedAt` plus `expiresInSeconds`
   * (at most 7 days), and nothing else: another key, method or host breaks the signature.
   */
  async presign(
    method: "GET" | "PUT" | "HEAD",
    key: string,
    expiresInSeconds: number,
    signedAt: Date,
  ): Promise<string> {
    if (
      !Number.isInteger(expiresInSeconds) ||
      expiresInSeconds < 1 ||
      expiresInSeconds > MAX_PRESIGNED_SECONDS
    )
      throw new RangeError(`a presigned URL lasts 1 s to ${MAX_PRESIGNED_SECONDS} s`);
    const req = requestFor(objectUrl(this.config, key), method, {
      "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
    });
    const signed = await this.signer.presign(req, { expiresIn: expiresInSeconds, signingDate: signedAt });
    return urlOf(signed);
  }

  /**
   * The headers of a request the controller makes itself, signed (Authorization, x-amz-date,
   * x-amz-content-sha256 and, with temporary keys, x-amz-security-token). `payloadSha256` is the
   * body's hex digest, or UNSIGNED-PAYLOAD.
   */
  async signHeaders(
    method: string,
    url: URL,
    payloadSha256: string,
    headers: Record<string, string> = {},
  ): Promise<Record<string, string>> {
    const req = requestFor(url, method, { ...headers, "x-amz-content-sha256": payloadSha256 });
    const signed = await this.signer.sign(req);
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(signed.headers)) out[k] = v;
    return out;
  }
}
