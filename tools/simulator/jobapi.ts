import type { IncomingMessage } from "node:http";
import type { SimContext } from "./context.js";
import type { EndpointHealthReport } from "../../src/provider/schemas.js";
import { statusView } from "./engine.js";
import { isRecord, json, readJson, type Reply } from "./http.js";

// The job API under /v2/{endpointId}/...: run, runsync, status, status-sync, cancel, purge-queue,
// health, as https://docs.runpod.io/serverless/endpoints/operation-reference describes them. A 404
// body names what was not found ({"error":"endpoint not found"} or {"error":"job not found"}) so
// clients can tell an unknown endpoint from an expired job; RunPod's own 404 body is undocumented.

const RUN_BODY_LIMIT = 10 * 1024 * 1024; // RunPod: /run payloads up to 10 MB
const RUNSYNC_BODY_LIMIT = 20 * 1024 * 1024; // and /runsync up to 20 MB
const SEVEN_DAYS_MS = 7 * 24 * 3_600_000;
// ?wait= of /runsync: 1000 to 300000 ms, default 90 s. RunPod's JavaScript SDK sends the same
// parameter to /status-sync, which the current pages no longer list.
const WAIT = { min: 1_000, max: 300_000, default: 90_000 };
const NOT_SIMULATED = new Set(["stream", "retry"]);

const endpointNotFound = (): Reply => json(404, { error: "endpoint not found" });
const jobNotFound = (): Reply => json(404, { error: "job not found" });

export async function handleJobApi(ctx: SimContext, req: IncomingMessage, parts: string[]): Promise<Reply> {
  const [endpointId = "", op = "", jobId, ...rest] = parts;
  if (ctx.engine.endpoint(endpointId) === undefined) return endpointNotFound();
  const method = req.method ?? "GET";
  if (rest.length > 0) return json(404, { error: "not found" });

  if (op === "run" && jobId === undefined) {
    if (method !== "POST") return json(405, { error: "method not allowed" });
    return submit(ctx, endpointId, await readJson(req, RUN_BODY_LIMIT));
  }
  if (op === "runsync" && jobId === undefined) {
    if (method !== "POST") return json(405, { error: "method not allowed" });
    const wait = waitOf(req);
    if (wait === undefined) return badWait();
    const accepted = submit(ctx, endpointId, await readJson(req, RUNSYNC_BODY_LIMIT), { sync: true });
    const job = accepted.status === 200 ? ctx.engine.job((accepted.body as { id: string }).id) : undefined;
    if (job === undefined) return accepted;
    await ctx.engine.settled(job, wait);
    // Done: the whole status object. Still queued or running after the wait: its id and status.
    return json(200, statusView(job));
  }
  if (op === "status-sync" && jobId !== undefined) {
    if (method !== "GET" && method !== "POST") return json(405, { error: "method not allowed" });
    const wait = waitOf(req);
    if (wait === undefined) return badWait();
    const job = ctx.engine.job(jobId);
    if (job === undefined || job.endpointId !== endpointId) return jobNotFound();
    await ctx.engine.settled(job, wait);
    return ctx.engine.job(jobId) === job ? json(200, statusView(job)) : jobNotFound();
  }
  if (op === "purge-queue" && jobId === undefined) {
    if (method !== "POST") return json(405, { error: "method not allowed" });
    return json(200, { removed: ctx.engine.purgeQueue(endpointId), status: "completed" });
  }
  if ((op === "status" || op === "cancel") && jobId !== undefined) {
    if (op === "cancel" ? method !== "POST" : method !== "GET" && method !== "POST") {
      return json(405, { error: "method not allowed" });
    }
    const job = ctx.engine.job(jobId);
    if (job === undefined || job.endpointId !== endpointId) return jobNotFound();
    if (op === "cancel" && !(ctx.faults().ignoreCancel && job.status === "IN_PROGRESS"))
      ctx.engine.cancel(job);
    return json(200, statusView(job));
  }
  if (op === "health" && jobId === undefined) {
    if (method !== "GET") return json(405, { error: "method not allowed" });
    return json(200, documentedHealth(ctx.engine.health(endpointId)));
  }
  if (NOT_SIMULATED.has(op)) return json(501, { error: `${op} is not simulated` });
  return json(404, { error: "not found" });
}

/** /health exactly as RunPod documents it: five job counters, idle and running workers. */
function documentedHealth(h: EndpointHealthReport | undefined) {
  const jobs = h?.jobs ?? { completed: 0, failed: 0, inProgress: 0, inQueue: 0, retried: 0 };
  return {
    jobs: {
      completed: jobs.completed,
      failed: jobs.failed,
      inProgress: jobs.inProgress,
      inQueue: jobs.inQueue,
      retried: jobs.retried,
    },
    workers: { idle: h?.workers.idle ?? 0, running: h?.workers.running ?? 0 },
  };
}

function waitOf(req: IncomingMessage): number | undefined {
  const raw = new URL(req.url ?? "/", "http://127.0.0.1").searchParams.get("wait");
  if (raw === null || raw === "") return WAIT.default;
  const wait = Number(raw);
  return Number.isInteger(wait) && wait >= WAIT.min && wait <= WAIT.max ? wait : undefined;
}

const badWait = (): Reply => json(400, { error: `wait must be ${WAIT.min} to ${WAIT.max} ms` });

function submit(ctx: SimContext, endpointId: string, body: unknown, opts: { sync?: boolean } = {}): Reply {
  if (!isRecord(body)) return json(400, { error: "body must be a JSON object" });
  const { id, input, webhook, policy } = body;
  if (!isRecord(input)) return json(400, { error: "input is required and must be an object" });
  if (id !== undefined && (typeof id !== "string" || id.length === 0 || id.length > 256)) {
    return json(400, { error: "id must be a string of 1 to 256 characters" });
  }
  if (webhook !== undefined && (typeof webhook !== "string" || !isHttpUrl(webhook))) {
    return json(400, { error: "webhook must be an http(s) URL" });
  }
  if (policy !== undefined && !isRecord(policy)) return json(400, { error: "policy must be an object" });
  const executionTimeout = policy?.executionTimeout;
  const ttl = policy?.ttl;
  if (executionTimeout !== undefined && !inRange(executionTimeout, 5_000, SEVEN_DAYS_MS)) {
    return json(400, { error: "policy.executionTimeout must be between 5000 and 604800000 ms" });
  }
  if (ttl !== undefined && !inRange(ttl, 10_000, SEVEN_DAYS_MS)) {
    return json(400, { error: "policy.ttl must be between 10000 and 604800000 ms" });
  }
  const lowPriority = policy?.lowPriority;
  if (lowPriority !== undefined && typeof lowPriority !== "boolean") {
    return json(400, { error: "policy.lowPriority must be a boolean" });
  }
  ctx.stats.submissions++;
  const executionKey = ownJobId(webhook) ?? (typeof id === "string" ? id : undefined);
  const result = ctx.engine.submit(endpointId, {
    ...(typeof id === "string" && { clientId: id }),
    ...(executionKey !== undefined && { executionKey }),
    input,
    ...(typeof webhook === "string" && { webhook }),
    ...(typeof executionTimeout === "number" && { executionTimeoutMs: executionTimeout }),
    ...(typeof ttl === "number" && { ttlMs: ttl }),
    ...(opts.sync === true && { sync: true }),
    ...(lowPriority === true && { lowPriority: true }),
  });
  if ("conflict" in result) return json(409, { error: result.conflict });
  if (!result.created) ctx.stats.duplicateSubmissions++;
  return json(200, { id: result.job.id, status: result.job.status });
}

/**
 * The client's own job id, as its webhook URL carries it (`?job=`): RunPod ignores `id`, so this is
 * the only place a submission names the job it belongs to. Executions are counted per this key.
 */
function ownJobId(webhook: unknown): string | undefined {
  if (typeof webhook !== "string") return undefined;
  try {
    return new URL(webhook).searchParams.get("job") ?? undefined;
  } catch {
    return undefined;
  }
}

function inRange(v: unknown, min: number, max: number): boolean {
  return typeof v === "number" && Number.isFinite(v) && v >= min && v <= max;
}

function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:";
  } catch {
    return false;
  }
}
