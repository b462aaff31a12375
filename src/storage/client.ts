// The controller's own calls to the object store (HEAD to check an output, PUT of a small object,
// DELETE, the bucket's creation for a dev store), each signed with SigV4 (signer.ts) and sent on
// Node's http client (src/http/client.ts: no undici in the containers). A failure is a StorageError
// that names the operation, the key, the HTTP status and S3's error code, and nothing else: never
// the URL's query, the Authorization header, the credentials, or S3's error body (which echoes the
// string signed and, for a bad signature, the signature provided).
import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import {
  dump,
  failureKind,
  keepAlivePools,
  poolFor,
  send,
  text,
  type HttpMethod,
  type HttpPools,
} from "../http/client.js";
import { objectUrl, type StorageConfig } from "./config.js";
import { StorageCredentialsError } from "./credentials.js";
import type { StoredObject } from "./retention.js";
import type { StoreSigner } from "./signer.js";

export class StorageError extends Error {
  constructor(
    readonly operation: string,
    readonly key: string,
    /** The HTTP status, 0 when no answer came. */
    readonly status: number,
    /** S3's error code (NoSuchKey, SignatureDoesNotMatch, AccessDenied, ...) or the network failure's kind. */
    readonly code: string,
    /** Only an error whose message is known to hold no secret (StorageCredentialsError). */
    cause?: StorageCredentialsError,
  ) {
    super(`storage ${operation} ${key}: ${status === 0 ? code : `${status} ${code}`}`, { cause });
    this.name = "StorageError";
  }

  /** 5xx, 429, a network failure: the same call may succeed later. */
  get retryable(): boolean {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }
}

export interface ObjectHead {
  size: number;
  etag?: string;
  /** The object's SHA-256 (base64) when the uploader sent one (x-amz-checksum-sha256). */
  checksumSha256?: string;
  /** The length a kept output's copy announced (keep.ts's x-amz-meta-kept-bytes), when it is one. */
  keptBytes?: number;
}

const EMPTY_SHA256 = createHash("sha256").digest("hex");

/** S3's error code from an error body (`<Code>NoSuchKey</Code>`); the rest of the body is dropped. */
function errorCode(body: string, status: number): string {
  const m = /<Code>([A-Za-z0-9.]{1,64})<\/Code>/.exec(body);
  return m?.[1] ?? (status === 404 ? "NotFound" : `HTTP${status}`);
}

const XML_ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };
const unescapeXml = (v: string): string =>
  v.replace(/&(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);/g, (_m, e: string) =>
    e.startsWith("#x")
      ? String.fromCodePoint(parseInt(e.slice(2), 16))
      : e.startsWith("#")
        ? String.fromCodePoint(Number(e.slice(1)))
        : XML_ENTITIES[e]!,
  );
const tag = (xml: string, name: string): string | undefined =>
  new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml)?.[1];

/** A ListObjectsV2 answer's objects and next continuation token (S3's XML, read by its few tags). */
export function parseListing(xml: string): { objects: StoredObject[]; next?: string } {
  const objects: StoredObject[] = [];
  for (const m of xml.matchAll(/<Contents>([\s\S]*?)<\/Contents>/g)) {
    const entry = m[1]!;
    const key = tag(entry, "Key");
    if (key === undefined) continue;
    objects.push({
      key: unescapeXml(key),
      size: Number(tag(entry, "Size") ?? 0),
      lastModifiedMs: Date.parse(tag(entry, "LastModified") ?? ""),
    });
  }
  const next = tag(xml, "IsTruncated") === "true" ? tag(xml, "NextContinuationToken") : undefined;
  return { objects, ...(next !== undefined && { next: unescapeXml(next) }) };
}

export class StorageClient {
  private readonly pools: HttpPools = keepAlivePools();

  constructor(
    readonly config: StorageConfig,
    private readonly signer: StoreSigner,
    private readonly timeoutMs = 30_000,
    /** A whole object read through (sha256): media can be gigabytes. */
    private readonly readTimeoutMs = 600_000,
  ) {}

  private async call(
    operation: string,
    method: HttpMethod,
    key: string,
    url: URL,
    body?: Buffer,
    headers: Record<string, string> = {},
    read?: (answer: IncomingMessage) => Promise<string>,
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; read?: string }> {
    const payload = body === undefined ? EMPTY_SHA256 : createHash("sha256").update(body).digest("hex");
    let signed: Record<string, string>;
    try {
      signed = await this.signer.signHeaders(method, url, payload, headers);
    } catch (err) {
      if (err instanceof StorageCredentialsError) throw new StorageError(operation, key, 0, err.name, err);
      throw new StorageError(operation, key, 0, "SigningFailed");
    }
    let res;
    try {
      res = await send(url, {
        method,
        headers: signed,
        ...(body !== undefined && { body }),
        signal: AbortSignal.timeout(read === undefined ? this.timeoutMs : this.readTimeoutMs),
        agent: poolFor(this.pools, url.href),
      });
    } catch (err) {
      throw new StorageError(operation, key, 0, failureKind(err));
    }
    if (res.statusCode >= 300) {
      const code =
        method === "HEAD"
          ? (await dump(res.body), errorCode("", res.statusCode))
          : errorCode(await text(res.body), res.statusCode);
      throw new StorageError(operation, key, res.statusCode, code);
    }
    if (read === undefined) {
      await dump(res.body);
      return { status: res.statusCode, headers: res.headers };
    }
    try {
      return { status: res.statusCode, headers: res.headers, read: await read(res.body) };
    } catch (err) {
      res.body.destroy();
      throw new StorageError(operation, key, 0, failureKind(err));
    }
  }

  /** The object's size and digests, or undefined when there is no such object. */
  async head(key: string): Promise<ObjectHead | undefined> {
    try {
      const { headers } = await this.call("head", "HEAD", key, objectUrl(this.config, key), undefined, {
        "x-amz-checksum-mode": "ENABLED",
      });
      const size = Number(headers["content-length"]);
      const etag = headers.etag;
      const sum = headers["x-amz-checksum-sha256"];
      const kept = Number(headers["x-amz-meta-kept-bytes"]);
      return {
        ...(Number.isSafeInteger(kept) &&
          headers["x-amz-meta-kept-bytes"] !== undefined && { keptBytes: kept }),
        size: Number.isFinite(size) ? size : 0,
        ...(typeof etag === "string" && { etag }),
        ...(typeof sum === "string" && { checksumSha256: sum }),
      };
    } catch (err) {
      if (err instanceof StorageError && err.status === 404) return undefined;
      throw err;
    }
  }

  /** The object's SHA-256 (hex), read from the store as a stream (constant memory, any size). */
  async sha256(key: string): Promise<string> {
    const { read } = await this.call(
      "read",
      "GET",
      key,
      objectUrl(this.config, key),
      undefined,
      {},
      async (body) => {
        const hash = createHash("sha256");
        for await (const chunk of body) hash.update(chunk as Buffer);
        return hash.digest("hex");
      },
    );
    return read!;
  }

  /** A small object's text (at most `maxBytes`), or undefined when there is no such object. */
  async getText(key: string, maxBytes = 1 << 20): Promise<string | undefined> {
    try {
      const { read } = await this.call(
        "read",
        "GET",
        key,
        objectUrl(this.config, key),
        undefined,
        {},
        async (body) => {
          let size = 0;
          const chunks: Buffer[] = [];
          for await (const chunk of body) {
            size += (chunk as Buffer).length;
            if (size > maxBytes) throw new Error(`over ${maxBytes} bytes`);
            chunks.push(chunk as Buffer);
          }
          return Buffer.concat(chunks).toString("utf8");
        },
      );
      return read!;
    } catch (err) {
      if (err instanceof StorageError && err.status === 404) return undefined;
      throw err;
    }
  }

  /** Writes a small object in one request (the body's SHA-256 is signed: the store checks it). */
  async put(key: string, body: Buffer, contentType = "application/octet-stream"): Promise<void> {
    await this.call("put", "PUT", key, objectUrl(this.config, key), body, { "content-type": contentType });
  }

  /** The signed headers of a PUT of `key` whose body is streamed by the caller (unsigned payload). */
  async signedPut(
    key: string,
    headers: Record<string, string>,
  ): Promise<{ url: URL; headers: Record<string, string> }> {
    const url = objectUrl(this.config, key);
    return { url, headers: await this.signer.signHeaders("PUT", url, "UNSIGNED-PAYLOAD", headers) };
  }

  /** Deletes an object; an absent one is no error (S3 answers 204 either way). */
  async delete(key: string): Promise<void> {
    await this.call("delete", "DELETE", key, objectUrl(this.config, key));
  }

  /**
   * One page of the bucket's objects (ListObjectsV2, at most 1,000; under `prefix` when given), from
   * `continuationToken`:
   * https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html
   */
  async list(
    continuationToken?: string,
    prefix?: string,
  ): Promise<{ objects: StoredObject[]; next?: string }> {
    const url = objectUrl(this.config, "");
    url.searchParams.set("list-type", "2");
    if (prefix !== undefined) url.searchParams.set("prefix", prefix);
    if (continuationToken !== undefined) url.searchParams.set("continuation-token", continuationToken);
    const { read } = await this.call("list", "GET", "", url, undefined, {}, (body) => text(body));
    return parseListing(read!);
  }

  /** Creates the bucket (a dev or test store); one that already belongs to these credentials is fine. */
  async createBucket(): Promise<void> {
    const url = objectUrl(this.config, "");
    url.pathname = url.pathname.replace(/\/$/, "");
    try {
      await this.call("create-bucket", "PUT", "", url);
    } catch (err) {
      if (err instanceof StorageError && err.code === "BucketAlreadyOwnedByYou") return;
      throw err;
    }
  }

  close(): void {
    this.pools.http.destroy();
    this.pools.https.destroy();
  }
}
