// The controller's storage settings (STORAGE_* as src/config/env.ts parses them) for a test S3
// server (s3server.ts): path addressing, the server's root keys.
import type { StorageEnv } from "../../src/storage/config.js";
import type { S3Server } from "./s3server.js";

export function storeEnv(server: S3Server, bucket: string): StorageEnv {
  return {
    STORAGE_BUCKET: bucket,
    STORAGE_ENDPOINT: server.endpoint,
    STORAGE_REGION: server.region,
    STORAGE_ADDRESSING: "path",
    STORAGE_CREDENTIALS: "keys",
    STORAGE_ACCESS_KEY_ID: server.accessKeyId,
    STORAGE_SECRET_ACCESS_KEY: server.secretAccessKey,
    STORAGE_SESSION_TOKEN: undefined,
  };
}
