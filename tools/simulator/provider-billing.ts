import type { SimContext } from "./context.js";
import type { Reply } from "./http.js";
import { json } from "./http.js";
import { problem } from "./rest.js";

// The GPU provider's serverless billing history, as RunPod's REST API v2 serves it:
// GET /v2/billing/serverless (https://docs.runpod.io/api-reference-v2/billing/get-serverless-billing-history).
// Query: bucketSize (hour|day|week|month|year, default day); startTime/endTime (RFC 3339, default
// 30 days ago and now; the start snapped down and the end snapped up to bucket edges) or lastN
// (the last N buckets, the current one included; not with startTime/endTime); serverlessId (one
// endpoint). Answer: { records: [{ startTime, endTime, serverlessId, totalAmount, gpuAmount,
// cpuAmount, diskAmount, feeAmount }], metadata: { query, recordCount, uniqueServerlessCount,
// totals } }, amounts in USD. Records are one per endpoint per bucket, for the endpoints that had
// a worker in the window. Amounts come from the worker ledger (worker-ledger.ts): GPU worker time
// only; the simulator bills no CPU, disk or platform fee (those amounts are 0). Buckets are on
// the provider's wall clock (Clock.wallAt), in UTC; a week starts on Monday (UNVERIFIED: RunPod's
// reference does not say).

const BUCKETS = ["hour", "day", "week", "month", "year"] as const;
type BucketSize = (typeof BUCKETS)[number];
const DEFAULT_WINDOW_MS = 30 * 24 * 3_600_000;
/** More buckets than this in one answer is refused (an hour bucket over a year is 8,760). */
const MAX_BUCKETS = 10_000;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** The start of the bucket holding `t` (ms since the epoch, UTC). */
function bucketStart(size: BucketSize, t: number): number {
  const d = new Date(t);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  switch (size) {
    case "hour":
      return Math.floor(t / 3_600_000) * 3_600_000;
    case "day":
      return Date.UTC(y, m, d.getUTCDate());
    case "week": {
      const day = Date.UTC(y, m, d.getUTCDate());
      const sinceMonday = (new Date(day).getUTCDay() + 6) % 7;
      return day - sinceMonday * 86_400_000;
    }
    case "month":
      return Date.UTC(y, m, 1);
    case "year":
      return Date.UTC(y, 0, 1);
  }
}

/** The start of the bucket after the one starting at `start`. */
function nextBucket(size: BucketSize, start: number): number {
  const d = new Date(start);
  switch (size) {
    case "hour":
      return start + 3_600_000;
    case "day":
      return start + 86_400_000;
    case "week":
      return start + 7 * 86_400_000;
    case "month":
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
    case "year":
      return Date.UTC(d.getUTCFullYear() + 1, 0, 1);
  }
}

/** An end snapped up to a bucket edge (unchanged when it is one). */
function snapUp(size: BucketSize, t: number): number {
  const s = bucketStart(size, t);
  return s === t ? t : nextBucket(size, s);
}

interface BillingWindow {
  bucketSize: BucketSize;
  startMs: number;
  endMs: number;
  serverlessId: string | null;
}

/** Reads and resolves the query; a list of problems when it is not one RunPod would take. */
function resolveWindow(q: URLSearchParams, nowMs: number): BillingWindow | { errors: string[] } {
  const errors: string[] = [];
  const rawSize = q.get("bucketSize") ?? "day";
  const bucketSize = (BUCKETS as readonly string[]).includes(rawSize) ? (rawSize as BucketSize) : undefined;
  if (bucketSize === undefined) errors.push(`$.bucketSize: must be one of ${BUCKETS.join(", ")}`);
  const time = (name: "startTime" | "endTime"): number | undefined => {
    const v = q.get(name);
    if (v === null) return undefined;
    const ms = RFC3339.test(v) ? Date.parse(v) : Number.NaN;
    if (Number.isNaN(ms)) errors.push(`$.${name}: must be an RFC 3339 date-time`);
    return ms;
  };
  const start = time("startTime");
  const end = time("endTime");
  const rawLastN = q.get("lastN");
  let lastN: number | undefined;
  if (rawLastN !== null) {
    lastN = /^\d{1,6}$/.test(rawLastN) ? Number(rawLastN) : Number.NaN;
    if (!(lastN >= 1)) errors.push("$.lastN: must be an integer of at least 1");
    if (start !== undefined || end !== undefined)
      errors.push("$.lastN: mutually exclusive with startTime/endTime");
  }
  const serverlessId = q.get("serverlessId");
  if (errors.length > 0 || bucketSize === undefined) return { errors };
  let startMs: number;
  let endMs: number;
  if (lastN !== undefined) {
    if (lastN > MAX_BUCKETS) return { errors: [`$.lastN: at most ${MAX_BUCKETS} buckets`] };
    endMs = nextBucket(bucketSize, bucketStart(bucketSize, nowMs));
    startMs = bucketStart(bucketSize, nowMs);
    for (let i = 1; i < lastN; i++) startMs = bucketStart(bucketSize, startMs - 1);
  } else {
    startMs = bucketStart(bucketSize, start ?? nowMs - DEFAULT_WINDOW_MS);
    endMs = snapUp(bucketSize, end ?? nowMs);
    if (endMs <= startMs) return { errors: ["$.endTime: must be after startTime"] };
  }
  let count = 0;
  for (let t = startMs; t < endMs && count <= MAX_BUCKETS; t = nextBucket(bucketSize, t)) count++;
  if (count > MAX_BUCKETS) return { errors: [`$: the window spans more than ${MAX_BUCKETS} buckets`] };
  return { bucketSize, startMs, endMs, serverlessId: serverlessId === "" ? null : serverlessId };
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.000Z$/, "Z");
/** Micro-USD as the USD number RunPod answers (exact to the micro-unit for any realistic sum). */
const usd = (micros: number) => micros / 1_000_000;

function amounts(micros: number) {
  return { totalAmount: usd(micros), gpuAmount: usd(micros), cpuAmount: 0, diskAmount: 0, feeAmount: 0 };
}

export function serverlessBilling(ctx: SimContext, url: URL, method: string): Reply {
  if (method !== "GET") return problem(405, "The requested method is not allowed for this path.");
  const { clock, engine } = ctx;
  const simNow = clock.simNow();
  const w = resolveWindow(url.searchParams, clock.wallAt(simNow));
  if ("errors" in w) return problem(400, "request validation failed", w.errors);
  const from = clock.simAt(w.startMs);
  const to = clock.simAt(w.endMs);
  const ids =
    w.serverlessId === null
      ? engine.ledger.endpointsIn(from, to, simNow)
      : engine.ledger.endpointsIn(from, to, simNow).filter((id) => id === w.serverlessId);
  const records: Array<Record<string, unknown>> = [];
  let totalMicros = 0;
  for (let b = w.startMs; b < w.endMs; b = nextBucket(w.bucketSize, b)) {
    const e = nextBucket(w.bucketSize, b);
    for (const id of ids) {
      const { micros } = engine.ledger.billedIn(id, clock.simAt(b), clock.simAt(e), simNow);
      totalMicros += micros;
      records.push({ startTime: iso(b), endTime: iso(e), serverlessId: id, ...amounts(micros) });
    }
  }
  return json(200, {
    records,
    metadata: {
      query: {
        startTime: iso(w.startMs),
        endTime: iso(w.endMs),
        bucketSize: w.bucketSize,
        serverlessId: w.serverlessId,
      },
      recordCount: records.length,
      uniqueServerlessCount: ids.length,
      totals: amounts(totalMicros),
    },
  });
}
