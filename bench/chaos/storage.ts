// Media through the object store under chaos: a share of the run's jobs name a tenant's input and
// declare an output, against the real S3-compatible server (test/support/s3server.ts); the
// simulator's workers GET the input and PUT the output through the presigned URLs, and some leave
// their output at the provider for the controller to keep (docs/design.md, "Outputs kept before
// the provider forgets them"). Everyone reaches the store through storeFront, which injects the
// store's faults: 5xx answers (S3's SlowDown), slow PUTs, presigned requests refused as expired
// (403 "Request has expired"), and outages during which every connection is reset. The checks
// read the store itself, past the front:
// - outputsMissing: a Completed job's declared output absent from status.outputs, or not in the
//   store with the recorded size and SHA-256;
// - crossTenantCacheHits: a Completed job's status.outputs key outside its own namespace's prefix
//   (whatever a stage cache serves, a job's outputs are its tenant's own);
// - orphanObjects: an attempt object (`<ns>/<uid>/<attempt>/<name>`) of a job that is gone, once
//   the media jobs were deleted (the store down meanwhile, so the deletion's own cleanup fails for
//   some and the sweep must find them) and the sweep ran; the objects a live stage cache entry
//   keeps are not orphans, and the run's short cache TTL makes every entry expire before the end.
import { createHash } from "node:crypto";
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import type { MediaJob } from "../../src/crds/mediajob.js";
import type { KubeApi } from "../../src/k8s/api.js";
import type { StorageClient } from "../../src/storage/client.js";
import { attemptObjectOwner, cacheKeeps, objectDir, type StoredObject } from "../../src/storage/retention.js";
import type { Rng } from "./rng.js";

export interface StorageFaults {
  /** Share of requests answered 503 SlowDown without reaching the store. */
  serverErrors: number;
  /** Share of presigned requests (a worker's GET or PUT) refused as expired. */
  expiredUrls: number;
  /** Share of PUTs held this long before they reach the store. */
  slowPuts: number;
  slowPutMs: number;
}

export interface StoreFront {
  url: string;
  stats: { requests: number; serverErrors: number; expiredUrls: number; slowPuts: number; refused: number };
  /** The store unreachable for `ms`: every connection reset meanwhile. */
  outage(ms: number): Promise<void>;
  outages: number;
  close(): Promise<void>;
}

const xml = (code: string, message: string) =>
  `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`;

function drainThen(req: IncomingMessage, then: () => void): void {
  req.on("error", () => undefined);
  req.resume();
  req.once("end", then);
}

function answer(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, {
    "content-type": "application/xml",
    "content-length": String(Buffer.byteLength(body)),
  });
  res.end(body);
}

/** A faulty front of the store at `target` (http://127.0.0.1:PORT); the Host header is kept, so signatures hold. */
export async function storeFront(target: string, rng: Rng, faults: StorageFaults): Promise<StoreFront> {
  const upstreamUrl = new URL(target);
  let down = false;
  const stats = { requests: 0, serverErrors: 0, expiredUrls: 0, slowPuts: 0, refused: 0 };
  const forward = (req: IncomingMessage, res: ServerResponse) => {
    const up = httpRequest(
      {
        host: upstreamUrl.hostname,
        port: upstreamUrl.port,
        path: req.url,
        method: req.method,
        headers: req.headers,
      },
      (answerUp) => {
        res.writeHead(answerUp.statusCode ?? 502, answerUp.headers);
        answerUp.pipe(res);
        answerUp.once("error", () => res.destroy());
      },
    );
    up.once("error", () => (res.headersSent ? res.destroy() : req.socket.destroy()));
    res.once("close", () => up.destroy());
    req.pipe(up);
  };
  const server = createServer((req, res) => {
    stats.requests++;
    if (down) {
      stats.refused++;
      req.socket.destroy();
      return;
    }
    const presigned = (req.url ?? "").includes("X-Amz-Signature=");
    const r = rng.next();
    if (r < faults.serverErrors) {
      stats.serverErrors++;
      return drainThen(req, () => answer(res, 503, xml("SlowDown", "Please reduce your request rate.")));
    }
    if (presigned && r < faults.serverErrors + faults.expiredUrls) {
      stats.expiredUrls++;
      return drainThen(req, () => answer(res, 403, xml("AccessDenied", "Request has expired")));
    }
    if (req.method === "PUT" && rng.next() < faults.slowPuts) {
      stats.slowPuts++;
      req.pause();
      setTimeout(() => forward(req, res), faults.slowPutMs);
      return;
    }
    forward(req, res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const front: StoreFront = {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    stats,
    outages: 0,
    async outage(ms) {
      down = true;
      front.outages++;
      server.closeIdleConnections();
      await new Promise((r) => setTimeout(r, ms));
      down = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return front;
}

/** The tenant's input every media job reads: its key under the namespace, bytes and digest. */
export function chaosInput(namespace: string): { key: string; bytes: Buffer; sha256: string } {
  const bytes = Buffer.from("RIFF chaos clip ".repeat(256));
  return {
    key: `${namespace}/chaos-inputs/clip.wav`,
    bytes,
    sha256: createHash("sha256").update(bytes).digest("hex"),
  };
}

/**
 * A share of the planned single-step jobs become media jobs: the tenant's input and one declared
 * output; half of those leave the output at the provider (simulate.hostOutputs) to be kept.
 */
export function withMedia(
  rng: Rng,
  planned: ReadonlyArray<{ pipeline: boolean; body: Record<string, unknown> }>,
  share: number,
  input: { uri: string; sha256: string; size: number },
): { media: number; hosted: number } {
  let media = 0;
  let hosted = 0;
  for (const j of planned) {
    if (j.pipeline || rng.next() >= share) continue;
    const host = rng.next() < 0.5;
    const spec = j.body.spec as Record<string, unknown>;
    spec.media = {
      inputs: [{ name: "clip", ...input }],
      outputs: [{ name: "out.bin" }],
    };
    // The URLs last until the attempt's deadlines: the execution timeout bounds them.
    spec.executionTimeoutSeconds = 120;
    if (host) spec.input = { ...(spec.input as object), simulate: { hostOutputs: "ok" } };
    media++;
    if (host) hosted++;
  }
  return { media, hosted };
}

export interface StorageCheck {
  mediaCompleted: number;
  hostedCompleted: number;
  outputsMissing: unknown[];
  crossTenantCacheHits: unknown[];
}

/** Every Completed media job's outputs, read from the store itself (HEAD and the bytes' SHA-256). */
export async function checkStorage(jobs: MediaJob[], client: StorageClient): Promise<StorageCheck> {
  const check: StorageCheck = {
    mediaCompleted: 0,
    hostedCompleted: 0,
    outputsMissing: [],
    crossTenantCacheHits: [],
  };
  for (const job of jobs) {
    if (job.status?.phase !== "Completed") continue;
    const ns = job.metadata.namespace ?? "";
    for (const o of job.status.outputs ?? [])
      if (!o.key.startsWith(`${ns}/`))
        check.crossTenantCacheHits.push({ job: job.metadata.name, key: o.key });
    const declared = job.spec.media?.outputs ?? [];
    if (declared.length === 0) continue;
    check.mediaCompleted++;
    if ((job.spec.input as { simulate?: { hostOutputs?: string } } | undefined)?.simulate?.hostOutputs)
      check.hostedCompleted++;
    for (const { name } of declared) {
      const recorded = job.status.outputs?.find((o) => o.name === name);
      const miss = (why: string) => check.outputsMissing.push({ job: job.metadata.name, output: name, why });
      if (!recorded) {
        miss("not in status.outputs");
        continue;
      }
      const head = await client.head(recorded.key);
      if (!head) miss("not in the store");
      else if (head.size !== recorded.size) miss(`${head.size} bytes stored, ${recorded.size} recorded`);
      else if (recorded.sha256 !== undefined && (await client.sha256(recorded.key)) !== recorded.sha256)
        miss("the stored bytes' SHA-256 differs from the recorded one");
    }
  }
  return check;
}

/**
 * Deletes the media jobs, waits for them to be gone and for the store to hold no attempt object
 * of a job that is gone (the deletion's own cleanup, else the sweep); the orphans left at the end.
 */
export async function checkOrphans(req: {
  api: KubeApi;
  namespace: string;
  client: StorageClient;
  jobs: MediaJob[];
  waitMs: number;
  listJobs: () => Promise<MediaJob[]>;
  /** STORAGE_CACHE_TTL_SECONDS of the run, ms: a younger stage cache entry keeps its attempt's objects. */
  cacheTtlMs: number;
  /** Runs while the jobs are deleted (the store's outage: the deletion's cleanup fails, the sweep must act). */
  meanwhile?: () => Promise<void>;
}): Promise<{ deleted: number; orphans: string[]; mostSeen: number }> {
  const media = req.jobs.filter((j) => (j.spec.media?.outputs?.length ?? 0) > 0);
  const meanwhile = req.meanwhile?.();
  for (const j of media)
    await req.api.delete("mediajobs", req.namespace, j.metadata.name!).catch(() => false);
  await meanwhile;
  const end = Date.now() + req.waitMs;
  let orphans: string[] = [];
  let mostSeen = 0;
  for (;;) {
    const live = await req.listJobs().catch(() => undefined);
    if (live !== undefined) {
      const uids = new Set(live.map((j) => `${j.metadata.namespace}/${j.metadata.uid}`));
      const objects: StoredObject[] = [];
      let next: string | undefined;
      do {
        const page = await req.client.list(next, `${req.namespace}/`);
        objects.push(...page.objects);
        next = page.next;
      } while (next !== undefined);
      // A live stage cache entry keeps its attempt's objects past their job, as the product's rule says.
      const { kept } = cacheKeeps(objects, Date.now(), req.cacheTtlMs);
      orphans = objects
        .map((o) => o.key)
        .filter((k) => {
          const owner = attemptObjectOwner(k);
          return (
            owner !== undefined && !uids.has(`${owner.namespace}/${owner.jobUid}`) && !kept.has(objectDir(k))
          );
        });
      mostSeen = Math.max(mostSeen, orphans.length);
      const gone = media.every((m) => !live.some((l) => l.metadata.uid === m.metadata.uid));
      if (gone && orphans.length === 0) break;
    }
    if (Date.now() > end) break;
    await new Promise((r) => setTimeout(r, 2_000));
  }
  return { deleted: media.length, orphans, mostSeen };
}
