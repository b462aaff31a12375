// The provider's own storage for worker outputs, as RunPod's `rp_upload` gives it: a worker that
// does not write an output through the controller's presigned PUT uploads it to the provider's
// bucket and returns a presigned GET URL for it in its output
// (https://github.com/runpod/runpod-python/blob/main/runpod/serverless/utils/rp_upload.py). Here
// the objects live in the simulator's memory and are served at /hosted/<token>?X-Sim-Signature=...
// (the token and the signature make the URL a secret, as a presigned URL is). A worker asks for it
// with `simulate.hostOutputs` in its input: "ok", "missing" (the URL answers 404: the provider's
// object is gone) or "wrongDigest" (the worker reports a SHA-256 the bytes do not have).
import { randomBytes } from "node:crypto";
import type { ServerResponse } from "node:http";

export type HostMode = "ok" | "missing" | "wrongDigest";

export function hostMode(input: Record<string, unknown>): HostMode | undefined {
  const m = (input.simulate as { hostOutputs?: unknown } | undefined)?.hostOutputs;
  return m === "ok" || m === "missing" || m === "wrongDigest" ? m : undefined;
}

export class HostedObjects {
  /** The simulator's own URL, set once it listens. */
  base = "";
  readonly #objects = new Map<string, Buffer>();
  /** GETs served, by token (tests check an object was fetched, or not). */
  readonly fetches = new Map<string, number>();

  /** Stores `bytes` (unless `missing`) and returns the URL that serves them. */
  host(bytes: Buffer, missing = false): string {
    const token = randomBytes(16).toString("hex");
    if (!missing) this.#objects.set(token, bytes);
    return `${this.base}/hosted/${token}?X-Sim-Signature=${randomBytes(16).toString("hex")}`;
  }

  /** Answers GET /hosted/<token>: the bytes, or 404. */
  serve(token: string, res: ServerResponse): void {
    this.fetches.set(token, (this.fetches.get(token) ?? 0) + 1);
    const bytes = this.#objects.get(token);
    if (bytes === undefined) {
      res.writeHead(404, { "content-type": "application/xml", "content-length": "0" }).end();
      return;
    }
    res.writeHead(200, {
      "content-type": "application/octet-stream",
      "content-length": String(bytes.length),
    });
    res.end(bytes);
  }

  get size(): number {
    return this.#objects.size;
  }
}
