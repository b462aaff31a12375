// The controller's storage credentials, read when a request or URL is signed. `keys`: the access
// keys of the configuration, which the secret-file watch (src/config/secret-files.ts) updates in
// place when the mounted Secret changes, so a rotated key signs the next URL. `pod`: the pod's cloud
// identity, EKS Pod Identity's container credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI
// and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html)
// or IRSA's projected web identity token (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN,
// docs.aws.amazon.com/eks/latest/userguide/iam-roles-for-service-accounts.html) exchanged at STS.
// Temporary keys are kept until five minutes before they expire. Nothing here logs or throws a key
// or a token.
import { readFileSync } from "node:fs";
import { z } from "zod";
import { send, text } from "../http/client.js";
import type { StorageEnv } from "./config.js";

interface StorageCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  /** When temporary keys stop working. */
  expiration?: Date;
}

export type CredentialSource = () => Promise<StorageCredentials>;

export class StorageCredentialsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StorageCredentialsError";
  }
}

/** The configured keys, read at each call (a rotated Secret file has replaced them in `env`). */
function keyCredentials(env: StorageEnv): CredentialSource {
  return () => {
    const accessKeyId = env.STORAGE_ACCESS_KEY_ID;
    const secretAccessKey = env.STORAGE_SECRET_ACCESS_KEY;
    if (accessKeyId === undefined || secretAccessKey === undefined)
      return Promise.reject(
        new StorageCredentialsError("STORAGE_ACCESS_KEY_ID and STORAGE_SECRET_ACCESS_KEY: not set"),
      );
    return Promise.resolve({
      accessKeyId,
      secretAccessKey,
      ...(env.STORAGE_SESSION_TOKEN !== undefined && { sessionToken: env.STORAGE_SESSION_TOKEN }),
    });
  };
}

const ContainerCredentials = z.object({
  AccessKeyId: z.string().min(1),
  SecretAccessKey: z.string().min(1),
  Token: z.string().min(1).optional(),
  Expiration: z.string().optional(),
});

/** Temporary keys are renewed this long before they expire (a URL signed with them dies with them). */
const RENEW_BEFORE_MS = 5 * 60_000;

/** A file's text, or a StorageCredentialsError naming the variable (never the content). */
function readTokenFile(variable: string, path: string): string {
  try {
    return readFileSync(path, "utf8").trim();
  } catch (err) {
    throw new StorageCredentialsError(
      `pod identity: cannot read ${variable} (${(err as NodeJS.ErrnoException).code ?? "error"})`,
    );
  }
}

/** One request to a credentials service: its status and body, or an error naming the service only. */
async function ask(
  what: string,
  url: string,
  req: { method: "GET" | "POST"; headers: Record<string, string>; body?: string },
): Promise<{ status: number; body: string }> {
  try {
    const res = await send(url, { ...req, signal: AbortSignal.timeout(5_000) });
    return { status: res.statusCode, body: await text(res.body) };
  } catch (err) {
    throw new StorageCredentialsError(
      `pod identity: ${what} did not answer (${(err as { code?: string }).code ?? (err as Error).name})`,
    );
  }
}

/** EKS Pod Identity (and ECS): the container credentials endpoint, JSON keys. */
async function containerCredentials(source: NodeJS.ProcessEnv, url: string): Promise<StorageCredentials> {
  const headers: Record<string, string> = { accept: "application/json" };
  const tokenFile = source.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE;
  if (tokenFile !== undefined)
    headers.authorization = readTokenFile("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", tokenFile);
  else if (source.AWS_CONTAINER_AUTHORIZATION_TOKEN !== undefined)
    headers.authorization = source.AWS_CONTAINER_AUTHORIZATION_TOKEN;
  const { status, body } = await ask("the credentials endpoint", url, { method: "GET", headers });
  if (status !== 200)
    throw new StorageCredentialsError(`pod identity: the credentials endpoint answered ${status}`);
  let parsed: z.infer<typeof ContainerCredentials>;
  try {
    parsed = ContainerCredentials.parse(JSON.parse(body));
  } catch {
    throw new StorageCredentialsError("pod identity: the credentials endpoint's answer holds no keys");
  }
  return keysOf(parsed.AccessKeyId, parsed.SecretAccessKey, parsed.Token, parsed.Expiration);
}

function keysOf(
  accessKeyId: string,
  secretAccessKey: string,
  token?: string,
  expires?: string,
): StorageCredentials {
  const expiration = expires !== undefined ? new Date(expires) : undefined;
  return {
    accessKeyId,
    secretAccessKey,
    ...(token !== undefined && { sessionToken: token }),
    ...(expiration !== undefined && !Number.isNaN(expiration.getTime()) && { expiration }),
  };
}

/** One element's text in STS's XML answer (the values are base64 or ARN-like: no entities). */
function xmlText(xml: string, tag: string): string | undefined {
  return new RegExp(`<${tag}>([^<]+)</${tag}>`).exec(xml)?.[1];
}

/**
 * IRSA: the web identity token the EKS webhook projects, exchanged at STS with
 * AssumeRoleWithWebIdentity, an unsigned call
 * (https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html), at the
 * regional endpoint, or AWS_ENDPOINT_URL_STS where set.
 */
async function webIdentityCredentials(
  source: NodeJS.ProcessEnv,
  tokenFile: string,
  roleArn: string,
): Promise<StorageCredentials> {
  const token = readTokenFile("AWS_WEB_IDENTITY_TOKEN_FILE", tokenFile);
  const region = source.AWS_REGION ?? source.AWS_DEFAULT_REGION ?? "us-east-1";
  const url = source.AWS_ENDPOINT_URL_STS ?? `https://sts.${region}.amazonaws.com/`;
  const form = new URLSearchParams({
    Action: "AssumeRoleWithWebIdentity",
    Version: "2011-06-15",
    RoleArn: roleArn,
    RoleSessionName: source.AWS_ROLE_SESSION_NAME ?? `media-orchestrator-${process.pid}`,
    WebIdentityToken: token,
    DurationSeconds: "3600",
  });
  const { status, body } = await ask("STS", url, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/xml" },
    body: form.toString(),
  });
  if (status !== 200)
    throw new StorageCredentialsError(
      `pod identity: STS answered ${status} ${xmlText(body, "Code") ?? ""}`.trim(),
    );
  const accessKeyId = xmlText(body, "AccessKeyId");
  const secretAccessKey = xmlText(body, "SecretAccessKey");
  if (accessKeyId === undefined || secretAccessKey === undefined)
    throw new StorageCredentialsError("pod identity: STS's answer holds no keys");
  return keysOf(accessKeyId, secretAccessKey, xmlText(body, "SessionToken"), xmlText(body, "Expiration"));
}

/**
 * The pod's identity: EKS Pod Identity's container credentials endpoint when its variables are
 * set, else IRSA's web identity token exchanged at STS. `source` is the process environment (the
 * variables the EKS webhooks inject); `now` is for tests.
 */
export function podCredentials(
  source: NodeJS.ProcessEnv = process.env,
  now: () => number = Date.now,
): CredentialSource {
  let cached: StorageCredentials | undefined;
  let pending: Promise<StorageCredentials> | undefined;
  const fetchOnce = (): Promise<StorageCredentials> => {
    const full = source.AWS_CONTAINER_CREDENTIALS_FULL_URI;
    const relative = source.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI;
    const url = full ?? (relative !== undefined ? `http://169.254.170.2${relative}` : undefined);
    if (url !== undefined) return containerCredentials(source, url);
    const tokenFile = source.AWS_WEB_IDENTITY_TOKEN_FILE;
    const roleArn = source.AWS_ROLE_ARN;
    if (tokenFile !== undefined && roleArn !== undefined)
      return webIdentityCredentials(source, tokenFile, roleArn);
    return Promise.reject(
      new StorageCredentialsError(
        "STORAGE_CREDENTIALS=pod: no pod identity (neither EKS Pod Identity's AWS_CONTAINER_CREDENTIALS_FULL_URI nor IRSA's AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN are set)",
      ),
    );
  };
  return async () => {
    if (cached && (cached.expiration === undefined || cached.expiration.getTime() - RENEW_BEFORE_MS > now()))
      return cached;
    // One request for every signer waiting on renewed keys.
    pending ??= fetchOnce().finally(() => (pending = undefined));
    cached = await pending;
    return cached;
  };
}

/** The source STORAGE_CREDENTIALS names. */
export function credentialSource(mode: "keys" | "pod", env: StorageEnv): CredentialSource {
  return mode === "keys" ? keyCredentials(env) : podCredentials();
}
