import type { Clock } from "./clock.js";
import type { Engine } from "./engine.js";
import { json, type Reply } from "./http.js";

// RunPod's documented limits on the job API, per key, endpoint and operation
// (https://docs.runpod.io/serverless/endpoints/send-requests#rate-limits): requests per 10 seconds.
// Over a limit the answer is 429. The window is 10 simulated seconds, so a simulator running 100x
// faster also takes 100x the requests, as every other duration it models.
const RATE_LIMITS: Readonly<Record<string, number>> = {
  runsync: 2000,
  run: 1000,
  status: 2000,
  "status-sync": 2000,
  stream: 2000,
  cancel: 100,
  "purge-queue": 2,
  requests: 10,
};
const WINDOW_SIM_MS = 10_000;
// And requests under way at once, per key, endpoint and operation (the same table's "Concurrent"
// column). A request counts from its arrival to its answer, body upload and /runsync wait included.
const CONCURRENCY_LIMITS: Readonly<Record<string, number>> = {
  runsync: 400,
  run: 200,
  status: 400,
  "status-sync": 400,
  stream: 400,
  cancel: 20,
  requests: 2,
};

// The queue-size rule (RunPod's send-requests page until late 2025): a submission gets 429 while
// more than 50 jobs are queued and more than workersMax x 500.
const QUEUE_FLOOR = 50;
const QUEUED_PER_WORKER = 500;

export class JobApiLimits {
  /** Arrival times (real ms) in the current window, oldest first, per key|endpoint|operation. */
  readonly #windows = new Map<string, number[]>();
  /** Requests under way, per key|endpoint|operation (entries removed at zero). */
  readonly #underWay = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly engine: Engine,
  ) {}

  /** A 429 when the request is over a limit, else undefined (and the request is counted). */
  check(apiKey: string, endpointId: string, op: string): Reply | undefined {
    const limit = RATE_LIMITS[op];
    if (limit !== undefined) {
      const over = this.#take(`${apiKey}|${endpointId}|${op}`, limit);
      if (over !== undefined) {
        return json(
          429,
          { error: `rate limit exceeded: /${op} allows ${limit} requests per 10 seconds` },
          { "retry-after": String(over) },
        );
      }
    }
    if (op === "run" || op === "runsync") {
      const config = this.engine.endpoint(endpointId);
      const queued = this.engine.health(endpointId)?.jobs.inQueue ?? 0;
      if (config !== undefined && queued > QUEUE_FLOOR && queued > config.workersMax * QUEUED_PER_WORKER) {
        return json(429, {
          error: `queue full: ${queued} jobs queued with at most ${config.workersMax} workers`,
        });
      }
    }
    return undefined;
  }

  /**
   * Admits a request against the concurrency limit of its operation: a 429 when as many are
   * already under way, else a function to call once it has been answered.
   */
  enter(apiKey: string, endpointId: string, op: string): Reply | (() => void) {
    const limit = CONCURRENCY_LIMITS[op];
    if (limit === undefined) return () => undefined;
    const key = `${apiKey}|${endpointId}|${op}`;
    const current = this.#underWay.get(key) ?? 0;
    if (current >= limit) {
      return json(
        429,
        { error: `concurrency limit exceeded: /${op} allows ${limit} requests at once` },
        { "retry-after": "1" },
      );
    }
    this.#underWay.set(key, current + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const n = (this.#underWay.get(key) ?? 1) - 1;
      if (n <= 0) this.#underWay.delete(key);
      else this.#underWay.set(key, n);
    };
  }

  /** Sliding window: undefined when under the limit, else whole seconds until a slot frees. */
  #take(key: string, limit: number): number | undefined {
    const now = this.clock.now();
    const windowMs = WINDOW_SIM_MS * this.clock.timeScale;
    const arrivals = this.#windows.get(key) ?? [];
    let expired = 0;
    while (expired < arrivals.length && (arrivals[expired] as number) <= now - windowMs) expired++;
    if (expired > 0) arrivals.splice(0, expired);
    if (arrivals.length >= limit) {
      const freeAt = (arrivals[0] as number) + windowMs;
      return Math.max(1, Math.ceil((freeAt - now) / 1000));
    }
    arrivals.push(now);
    this.#windows.set(key, arrivals);
    return undefined;
  }
}
