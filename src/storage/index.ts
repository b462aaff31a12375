// The object store as the controller uses it, built from the environment: undefined when storage
// is off (no STORAGE_BUCKET). The signer's package is loaded here, on first use, so a controller
// without storage does not pay its memory (docs/design.md, "Media and storage").
import type { StorageClient } from "./client.js";
import { storageConfig, type KeepEnv, type StorageConfig, type StorageEnv } from "./config.js";
import { credentialSource, type CredentialSource } from "./credentials.js";
import type { StoreSigner } from "./signer.js";
import { parseAllowedHosts, type KeepPolicy } from "./foreign-url.js";

export interface Store {
  config: StorageConfig;
  signer: StoreSigner;
  client: StorageClient;
  /** How outputs a worker left behind a URL of its own are copied in (foreign-url.ts). */
  keep: KeepPolicy;
}

/** The store of `env`, or undefined when storage is off; `credentials` replaces the configured source (tests). */
export async function openStore(
  env: StorageEnv & KeepEnv,
  credentials?: CredentialSource,
): Promise<Store | undefined> {
  const config = storageConfig(env);
  if (config === undefined) return undefined;
  const [{ StoreSigner }, { StorageClient }] = await Promise.all([
    import("./signer.js"),
    import("./client.js"),
  ]);
  const signer = new StoreSigner(config, credentials ?? credentialSource(config.credentials, env));
  const keep: KeepPolicy = {
    allowedHosts: parseAllowedHosts(env.STORAGE_KEEP_ALLOWED_HOSTS),
    allowPrivate: env.STORAGE_KEEP_ALLOW_PRIVATE ?? false,
    maxBytes: env.STORAGE_KEEP_MAX_BYTES ?? 5 * 1024 ** 3,
    timeoutMs: (env.STORAGE_KEEP_TIMEOUT_SECONDS ?? 900) * 1000,
  };
  return { config, signer, client: new StorageClient(config, signer), keep };
}
