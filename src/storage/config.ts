// The object store as the environment configures it (STORAGE_* in src/config/env.ts): off when no
// bucket is named, else one S3-compatible bucket, its endpoint, region, addressing style and where
// the credentials come from. Pure: the credentials themselves are read when a request is signed
// (credentials.ts), so a rotated Secret file takes effect without a restart.
import { ConfigError, type Env } from "../config/env.js";

export type StorageEnv = Pick<
  Env,
  | "STORAGE_BUCKET"
  | "STORAGE_ENDPOINT"
  | "STORAGE_REGION"
  | "STORAGE_ADDRESSING"
  | "STORAGE_CREDENTIALS"
  | "STORAGE_ACCESS_KEY_ID"
  | "STORAGE_SECRET_ACCESS_KEY"
  | "STORAGE_SESSION_TOKEN"
>;

/** The copy of hosted outputs (foreign-url.ts), defaulted when a caller (a CLI, a test) leaves them out. */
export type KeepEnv = Partial<
  Pick<
    Env,
    | "STORAGE_KEEP_ALLOWED_HOSTS"
    | "STORAGE_KEEP_ALLOW_PRIVATE"
    | "STORAGE_KEEP_MAX_BYTES"
    | "STORAGE_KEEP_TIMEOUT_SECONDS"
  >
>;

export interface StorageConfig {
  bucket: string;
  /** Without a trailing slash, e.g. https://s3.eu-west-1.amazonaws.com or http://127.0.0.1:7070. */
  endpoint: string;
  region: string;
  addressing: "path" | "virtual";
  credentials: "keys" | "pod";
}

/** AWS S3 serves buckets created since 2020 only by virtual-hosted names; other stores take paths. */
function isAwsEndpoint(endpoint: string): boolean {
  return /(^|\.)amazonaws\.com(\.cn)?$/.test(new URL(endpoint).hostname);
}

/**
 * The store's configuration, or undefined when storage is off (no STORAGE_BUCKET). Inconsistent
 * settings throw a ConfigError naming the variables, never their values.
 */
export function storageConfig(env: StorageEnv): StorageConfig | undefined {
  const bucket = env.STORAGE_BUCKET;
  if (bucket === undefined) {
    const stray = (
      ["STORAGE_ENDPOINT", "STORAGE_ACCESS_KEY_ID", "STORAGE_SECRET_ACCESS_KEY"] as const
    ).filter((n) => env[n] !== undefined);
    // A store half configured would silently keep media inline: say what is missing instead.
    if (stray.length) throw new ConfigError([`STORAGE_BUCKET: required with ${stray.join(", ")}`]);
    return undefined;
  }
  const endpoint = env.STORAGE_ENDPOINT ?? `https://s3.${env.STORAGE_REGION}.amazonaws.com`;
  const hasKeys = env.STORAGE_ACCESS_KEY_ID !== undefined || env.STORAGE_SECRET_ACCESS_KEY !== undefined;
  const credentials = env.STORAGE_CREDENTIALS ?? (hasKeys ? "keys" : "pod");
  const problems: string[] = [];
  if (credentials === "keys") {
    if (env.STORAGE_ACCESS_KEY_ID === undefined)
      problems.push("STORAGE_ACCESS_KEY_ID: required with STORAGE_CREDENTIALS=keys");
    if (env.STORAGE_SECRET_ACCESS_KEY === undefined)
      problems.push("STORAGE_SECRET_ACCESS_KEY: required with STORAGE_CREDENTIALS=keys");
  } else if (hasKeys) {
    problems.push(
      "STORAGE_ACCESS_KEY_ID: set, but STORAGE_CREDENTIALS=pod takes the pod's identity: set one",
    );
  }
  const addressing = env.STORAGE_ADDRESSING ?? (isAwsEndpoint(endpoint) ? "virtual" : "path");
  if (addressing === "virtual" && bucket.includes("."))
    // A dotted bucket name as a host name breaks the store's TLS certificate (*.s3.amazonaws.com).
    problems.push("STORAGE_ADDRESSING: a bucket name with '.' needs path addressing");
  if (problems.length) throw new ConfigError(problems);
  return { bucket, endpoint, region: env.STORAGE_REGION, addressing, credentials };
}

/** The URL of an object (unsigned): the bucket in the path or in the host name, the key's segments escaped. */
export function objectUrl(config: StorageConfig, key: string): URL {
  const path = key.split("/").map(escapeSegment).join("/");
  const base = new URL(config.endpoint);
  if (config.addressing === "virtual") {
    base.hostname = `${config.bucket}.${base.hostname}`;
    base.pathname = `/${path}`;
  } else {
    base.pathname = `${base.pathname.replace(/\/+$/, "")}/${config.bucket}/${path}`;
  }
  return base;
}

/** S3's URI encoding of a path segment: RFC 3986 unreserved characters stay, everything else is %XX. */
function escapeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}
