// A real S3-compatible server on 127.0.0.1 for the tests: the Versity S3 Gateway (versitygw,
// Apache-2.0) over its posix backend, built once from its Go module (`go install
// github.com/versity/versitygw/cmd/versitygw@<version>`, nothing downloaded but Go modules) as
// test/support/helm.ts builds helm, and cached in .local/bin. Chosen over s3rver (npm) because it
// verifies SigV4: a tampered signature, a URL signed for another key or method and a wrong secret
// are refused (403 SignatureDoesNotMatch), and an expired presigned URL too (403 AccessDenied,
// "Request has expired"). s3rver 3.7.1 checks only the expiry and takes any V4 signature
// (docs/design.md, "Media and storage"). Each server gets its own directory, random root
// credentials and a free port; stop() ends the process and removes the directory.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../scripts/devstack-lib.js";
import { REPO_ROOT } from "./controlplane.js";
import { goInstalledBinary } from "./go-install.js";

export const VERSITYGW_MODULE_VERSION = "v1.8.0";

export function s3ServerBinaryPath(): string {
  return join(REPO_ROOT, ".local/bin", `versitygw-${VERSITYGW_MODULE_VERSION}`);
}

/** Builds versitygw once (about 90 s on a cold Go cache) and returns its path; test files share a lock. */
export function s3ServerBinary(log?: (line: string) => void): string {
  return goInstalledBinary(
    {
      name: "versitygw",
      version: VERSITYGW_MODULE_VERSION,
      bin: s3ServerBinaryPath(),
      pkg: `github.com/versity/versitygw/cmd/versitygw@${VERSITYGW_MODULE_VERSION}`,
      ldflags: ["-s -w"],
    },
    log,
  );
}

export interface S3Server {
  /** http://127.0.0.1:<port> */
  endpoint: string;
  region: string;
  /** The root user's keys: what a Secret would hold for the controller. */
  accessKeyId: string;
  secretAccessKey: string;
  /** The posix backend's root: each bucket is a directory under it. */
  dir: string;
  pid: number;
  stop(): Promise<void>;
}

/**
 * Spawns versitygw on 127.0.0.1:`port` over `dir`, the root keys in its environment (not argv:
 * `ps` shows a process's arguments). `detached` with a log file: a process that outlives this one
 * (make dev-up).
 */
export function spawnS3Server(opts: {
  dir: string;
  port: number;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  detached?: boolean;
  logFile?: string;
}): ChildProcess {
  const out = opts.logFile !== undefined ? openSync(opts.logFile, "a") : "pipe";
  const child = spawn(s3ServerBinary(), ["--port", `127.0.0.1:${opts.port}`, "--quiet", "posix", opts.dir], {
    env: {
      PATH: process.env.PATH ?? "",
      ROOT_ACCESS_KEY_ID: opts.accessKeyId,
      ROOT_SECRET_ACCESS_KEY: opts.secretAccessKey,
      VGW_REGION: opts.region,
    },
    stdio: ["ignore", out === "pipe" ? "ignore" : out, out],
    detached: opts.detached === true,
  });
  if (opts.detached === true) child.unref();
  return child;
}

/** Starts a server on 127.0.0.1 and resolves once it answers HTTP. */
export async function startS3Server(opts: { region?: string } = {}): Promise<S3Server> {
  const dir = mkdtempSync(join(tmpdir(), "media-s3-"));
  const port = await freePort();
  const region = opts.region ?? "us-east-1";
  const accessKeyId = `test${randomBytes(6).toString("hex")}`;
  const secretAccessKey = randomBytes(24).toString("base64url");
  const child = spawnS3Server({ dir, port, region, accessKeyId, secretAccessKey });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const endpoint = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`versitygw exited (${child.exitCode}): ${stderr}`);
    }
    try {
      await fetch(`${endpoint}/`, { signal: AbortSignal.timeout(1_000) });
      break;
    } catch {
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`versitygw did not answer on ${endpoint} within 20 s: ${stderr}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return { endpoint, region, accessKeyId, secretAccessKey, dir, pid: child.pid ?? 0, stop };
}
