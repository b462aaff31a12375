// The controller's storage credentials, read when a request or URL is signed. `keys`: the access
// keys of the configuration, which the secret-file watch (src/config/secret-files.ts) updates in
// place when the mounted Secret changes, so a rotated key signs the next URL. `pod`: the pod's cloud
// identity through the container credentials endpoint that EKS Pod Identity (and ECS) provide: the
// variables AWS_CONTAINER_CREDENTIALS_FULL_URI and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, set by
// the Pod Identity webhook, name the endpoint and a token file; the answer holds temporary keys and
// their expiry (docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html). They are kept
// until five minutes before they expire. Nothing here logs or throws a key or a token.
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

/**
 * The pod's identity, from the container credentials endpoint. `source` is the process
 * environment (the variables the Pod Identity webhook injects); `now` is for tests.
 */
export function podCredentials(
  source: NodeJS.ProcessEnv = process.env,
  now: () => number = Date.now,
): CredentialSource {
  let cached: StorageCredentials | undefined;
  let pending: Promise<StorageCredentials> | undefined;
  const fetchOnce = async (): Promise<StorageCredentials> => {
    const full = source.AWS_CONTAINER_CREDENTIALS_FULL_URI;
    const relative = source.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI;
    const url = full ?? (relative !== undefined ? `http://169.254.170.2${relative}` : undefined);
    if (url === undefined)
      throw new StorageCredentialsError(
        "STORAGE_CREDENTIALS=pod: no pod identity (AWS_CONTAINER_CREDENTIALS_FULL_URI is not set: is EKS Pod Identity associated?)",
      );
    const headers: Record<string, string> = { accept: "application/json" };
    const tokenFile = source.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE;
    try {
      if (tokenFile !== undefined) headers.authorization = readFileSync(tokenFile, "utf8").trim();
      else if (source.AWS_CONTAINER_AUTHORIZATION_TOKEN !== undefined)
        headers.authorization = source.AWS_CONTAINER_AUTHORIZATION_TOKEN;
    } catch (err) {
      throw new StorageCredentialsError(
        `pod identity: cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (${(err as NodeJS.ErrnoException).code ?? "error"})`,
      );
    }
    let status: number;
    let body: string;
    try {
      const res = await send(url, { method: "GET", headers, signal: AbortSignal.timeout(5_000) });
      status = res.statusCode;
      body = await text(res.body);
    } catch (err) {
      throw new StorageCredentialsError(
        `pod identity: the credentials endpoint did not answer (${(err as { code?: string }).code ?? (err as Error).name})`,
      );
    }
    if (status !== 200)
      throw new StorageCredentialsError(`pod identity: the credentials endpoint answered ${status}`);
    let parsed: z.infer<typeof ContainerCredentials>;
    try {
      parsed = ContainerCredentials.parse(JSON.parse(body));
    } catch {
      throw new StorageCredentialsError("pod identity: the credentials endpoint's answer holds no keys");
    }
    const expiration = parsed.Expiration !== undefined ? new Date(parsed.Expiration) : undefined;
    return {
      accessKeyId: parsed.AccessKeyId,
      secretAccessKey: parsed.SecretAccessKey,
      ...(parsed.Token !== undefined && { sessionToken: parsed.Token }),
      ...(expiration !== undefined && !Number.isNaN(expiration.getTime()) && { expiration }),
    };
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
