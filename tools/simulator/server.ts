import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent } from "undici";
import type { ProviderJob } from "../../src/provider/schemas.js";
import { CallbackSender, type DeliveryRecord } from "./callbacks.js";
import { Clock } from "./clock.js";
import type { SimContext, SimulatorStats } from "./context.js";
import { configFromSpec } from "./endpoints.js";
import { Engine, type JobTimeline } from "./engine.js";
import { BadJson, BodyTooLarge, json, readJson, requestKey, writeReply, type Reply } from "./http.js";
import { applyEndpoint, countRequest, endpointView, handleInspection, jobView } from "./inspection.js";
import { handleJobApi } from "./jobapi.js";
import { HostedObjects } from "./hosted.js";
import { JobApiLimits } from "./limits.js";
import { GRAPHQL_RETIRED_MESSAGE, handleGraphQL } from "./management.js";
import {
  EndpointSpecSchema,
  FaultsSchema,
  MeterSpecSchema,
  type MeterSpec,
  resolveOptions,
  type EndpointPatch,
  type Faults,
  type PaymentWebhook,
  type SimulatorOptions,
} from "./options.js";
import type { PaymentDelivery, SimSubscription } from "./payment.js";
import { PaymentSender } from "./payment.js";
import { BillingApi, type BillingStats } from "./billing.js";
import { serverlessBilling } from "./provider-billing.js";
import type { WorkerRun } from "./worker-ledger.js";
import { MeterStore, type MeterErrorReport, type RecordedMeterEvent, type SimMeter } from "./meters.js";
import { Rng } from "./random.js";
import { handleRest, problem } from "./rest.js";

export type { SimulatorOptions } from "./options.js";

type SimEndpoint = ReturnType<typeof endpointView>;
export type SimJob = ProviderJob & {
  endpointId: string;
  key: string;
  executions: number;
  timeline: JobTimeline;
  input: Record<string, unknown>;
  lowPriority?: boolean;
};

/** One worker run as the provider bills it. */
type WorkerBill = WorkerRun & { billedSeconds: number; amountMicros: number };

export interface Simulator {
  /**
   * http://127.0.0.1:PORT: the job API /v2/{endpoint}/..., REST v2 management /v2/serverless/...,
   * /graphql, /v1/webhooks/..., and the inspection API under /_sim/.
   */
  url: string;
  port: number;
  close(): Promise<void>;
  /** How many times job `id` started executing (counted per client id; see docs/provider.md). */
  executions(id: string): number;
  allExecutions(): Map<string, number>;
  /** Callback attempts made, in completion order. */
  deliveries(): DeliveryRecord[];
  /** Job ids whose callback the dropCallback fault swallowed. */
  droppedCallbacks(): string[];
  faults(): Faults;
  /** Replaces the fault set (validated). */
  setFaults(f: Faults | undefined): void;
  /** Patches an existing endpoint (workers drift, ...) or creates one when `name` is given. */
  setEndpoint(spec: { id?: string } & EndpointPatch): SimEndpoint;
  removeEndpoint(id: string): boolean;
  getEndpoint(id: string): SimEndpoint | undefined;
  listEndpoints(): SimEndpoint[];
  /** By the provider's id, or by our job id (the newest job submitted for it). */
  getJob(id: string): SimJob | undefined;
  /** Every job the provider still holds. */
  jobs(): SimJob[];
  /** The provider loses the job: status 404 from now on, no callback. */
  forgetJob(id: string): boolean;
  /** Keeps the job IN_PROGRESS past its natural end (may be called before it is submitted). */
  holdJob(id: string): void;
  releaseJob(id: string): void;
  stats(): SimulatorStats;
  /**
   * The GPU provider's per-worker billing ledger: every worker run (spawn to stop; a running one
   * so far), its billed seconds rounded up per run and its amount in micro-USD.
   */
  workerLedger(endpointId?: string): WorkerBill[];
  /** The provider's wall clock at a simulated instant (its billing buckets are on this clock). */
  wallAt(simMs: number): number;
  setPaymentWebhook(w: PaymentWebhook): void;
  sendPaymentEvent(event: Record<string, unknown>): Promise<PaymentDelivery>;
  paymentDeliveries(): PaymentDelivery[];
  /** The payment provider's current state of a subscription (GET /v1/subscriptions/{id}). */
  setSubscription(sub: { id: string; customer: string; status: string } & Record<string, unknown>): void;
  subscription(id: string): SimSubscription | undefined;
  /** Creates a billing meter (as POST /v1/billing/meters would). */
  createMeter(spec: MeterSpec): SimMeter;
  meters(): SimMeter[];
  /** Every meter event the payment provider accepted, in order. */
  meterEvents(): RecordedMeterEvent[];
  /** Events accepted but not aggregated (no meter), and v2 stream events refused afterwards. */
  meterErrors(): MeterErrorReport[];
  billingStats(): BillingStats;
  /** Moves the payment provider's clock forward: identifiers leave the 24 h window, timestamps age. */
  advancePaymentClock(ms: number): void;
}

const GRAPHQL_BODY_LIMIT = 1024 * 1024;

type ApiKind = "job" | "rest" | "graphql";

/** A token bucket in real time: `requestsPerSecond` sustained, bursts up to one second's worth. */
class TokenBucket {
  #tokens = Number.NaN;
  #last = 0;

  /** Undefined when the request may pass, else the seconds to wait. */
  take(rps: number): number | undefined {
    const now = Date.now();
    const capacity = Math.max(1, rps);
    this.#tokens = Number.isNaN(this.#tokens)
      ? capacity
      : Math.min(capacity, this.#tokens + ((now - this.#last) / 1000) * rps);
    this.#last = now;
    if (this.#tokens >= 1) {
      this.#tokens -= 1;
      return undefined;
    }
    return Math.max(1, Math.ceil((1 - this.#tokens) / rps));
  }
}

export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const opts = resolveOptions(options);
  let faults: Faults = FaultsSchema.parse(options.faults ?? {});
  let bucket = new TokenBucket();
  // Requests hit so far by the counted faults (serverErrorsFirst, responseDelay.first), since the
  // faults were last set.
  let hit = { serverErrors: 0, delays: 0 };
  const clock = new Clock(opts.timeScale);
  const log = options.logger?.child({ component: "gpu-simulator" });
  // Its own connection pool for callbacks and payment events, so close() leaves no sockets.
  const agent = new Agent({ keepAliveTimeout: 1_000 });
  const callbacks = new CallbackSender({
    clock,
    opts,
    faults: () => faults,
    dispatcher: agent,
    ...(log && { log }),
  });
  const hosted = new HostedObjects();
  const engine = new Engine({
    hosted,
    clock,
    rng: new Rng(opts.seed),
    opts,
    faults: () => faults,
    onTerminal: (job) => callbacks.notify(job),
    onForget: (id) => callbacks.forget(id),
    ...(log && { log }),
  });
  const idRng = new Rng(opts.seed ^ 0x5bd1e995);
  const meters = new MeterStore(new Rng(opts.seed ^ 0x27d4eb2f));
  const createMeter = (spec: MeterSpec): SimMeter => {
    const m = MeterSpecSchema.parse(spec);
    return meters.createMeter({
      eventName: m.event_name,
      displayName: m.display_name ?? m.event_name,
      formula: m.formula ?? "sum",
      ...(m.id !== undefined && { id: m.id }),
      ...(m.customer_key !== undefined && { customerKey: m.customer_key }),
      ...(m.value_key !== undefined && { valueKey: m.value_key }),
      ...(m.event_time_window !== undefined && { eventTimeWindow: m.event_time_window }),
    });
  };
  for (const spec of options.meters ?? []) createMeter(spec);
  const ctx: SimContext = {
    opts,
    clock,
    engine,
    callbacks,
    payment: new PaymentSender(agent, idRng, options.paymentWebhook),
    meters,
    requestRng: new Rng(opts.seed ^ 0x9e3779b9),
    idRng,
    faults: () => faults,
    setFaults: (f) => {
      faults = FaultsSchema.parse(f);
      bucket = new TokenBucket();
      hit = { serverErrors: 0, delays: 0 };
    },
    stats: {
      requests: 0,
      restRequests: 0,
      graphqlRequests: 0,
      rateLimited: 0,
      serverErrors: 0,
      lostRunAnswers: 0,
      submissions: 0,
      duplicateSubmissions: 0,
    },
    ...(log && { log }),
  };
  const billingApi = new BillingApi(ctx, meters);
  const limits = new JobApiLimits(clock, engine);
  for (const spec of options.endpoints ?? [])
    engine.upsertEndpoint(configFromSpec(EndpointSpecSchema.parse(spec)));

  /** An error in the dialect of the API asked: RFC 9457 problems for REST v2, {error} otherwise. */
  const failure = (
    kind: ApiKind,
    status: number,
    message: string,
    headers: Record<string, string> = {},
  ): Reply =>
    kind === "rest"
      ? problem(status, message, undefined, headers)
      : json(status, { error: message }, headers);

  /** Faults shared by the job API, REST v2 and /graphql, in the order a real edge applies them. */
  const guarded = async (
    req: IncomingMessage,
    url: URL,
    kind: ApiKind,
    handler: (key: string) => Promise<Reply>,
  ): Promise<Reply> => {
    ctx.stats.requests++;
    countRequest(ctx, req.method, url.pathname);
    if (kind === "rest") ctx.stats.restRequests++;
    if (kind === "graphql") ctx.stats.graphqlRequests++;
    const f = faults;
    if (
      f.responseDelay !== undefined &&
      (f.responseDelay.first === undefined || hit.delays < f.responseDelay.first) &&
      ctx.requestRng.chance(f.responseDelay.rate ?? 1)
    ) {
      hit.delays++;
      await new Promise<void>((resolve) => clock.afterReal(f.responseDelay?.ms ?? 0, resolve));
    }
    const key = requestKey(req, url, kind === "graphql");
    if (key === undefined) return failure(kind, 401, "missing bearer token");
    if (!(opts.apiKeys.has(key) || opts.accountProblemKeys.has(key))) {
      return failure(kind, 401, "Unauthorized: check your API key");
    }
    if (kind !== "graphql" && opts.accountProblemKeys.has(key)) {
      return failure(kind, 403, "Account suspended: insufficient balance");
    }
    if (f.rateLimit !== undefined) {
      const wait = bucket.take(f.rateLimit.requestsPerSecond);
      if (wait !== undefined) {
        ctx.stats.rateLimited++;
        return failure(kind, 429, "rate limit exceeded", { "retry-after": String(wait) });
      }
    }
    if (kind === "job" && url.pathname.endsWith("/run") && ctx.requestRng.chance(f.lostRunAnswers)) {
      const accepted = await handler(key);
      if (accepted.status === 200) {
        ctx.stats.lostRunAnswers++;
        return { ...accepted, lost: true };
      }
      return accepted;
    }
    if (f.serverErrorsFirst !== undefined && hit.serverErrors < f.serverErrorsFirst) {
      hit.serverErrors++;
      ctx.stats.serverErrors++;
      return failure(kind, 503, "service unavailable");
    }
    if (ctx.requestRng.chance(f.serverErrors)) {
      ctx.stats.serverErrors++;
      // Half the failed submissions are accepted first and only the answer is lost: the case that
      // makes idempotent resubmission necessary.
      if (kind === "job" && url.pathname.endsWith("/run") && ctx.requestRng.chance(0.5)) {
        await handler(key);
        return json(500, { error: "internal server error" });
      }
      return failure(kind, 503, "service unavailable");
    }
    return handler(key);
  };

  const route = async (req: IncomingMessage, url: URL, parts: string[]): Promise<Reply> => {
    const [head, ...rest] = parts;
    if (head === "_sim") return handleInspection(ctx, req, rest);
    if (head === "graphql" && rest.length === 0) {
      if (faults.graphqlRetired === true) {
        ctx.stats.requests++;
        ctx.stats.graphqlRequests++;
        return json(410, { errors: [{ message: GRAPHQL_RETIRED_MESSAGE }] });
      }
      if (req.method !== "POST") return json(405, { error: "method not allowed" });
      return guarded(req, url, "graphql", async (key) =>
        handleGraphQL(ctx, key, await readJson(req, GRAPHQL_BODY_LIMIT)),
      );
    }
    // The payment provider's Billing Meters (its own host at Stripe; a path prefix here).
    if ((head === "v1" || head === "v2") && rest[0] === "billing") {
      const reply = await billingApi.handle(req, url, parts);
      if (reply !== undefined) return reply;
    }
    // RunPod's serverless billing history (REST v2, the management host).
    if (head === "v2" && rest[0] === "billing" && rest[1] === "serverless" && rest.length === 2)
      return guarded(req, url, "rest", () =>
        Promise.resolve(serverlessBilling(ctx, url, req.method ?? "GET")),
      );
    // RunPod serves REST v2 on its management host and the job API on another, so an endpoint id
    // "serverless" cannot clash there; on the simulator's single port REST v2 takes the path.
    if (head === "v2" && rest[0] === "serverless") {
      const jobApiBase = `http://${req.headers.host ?? `127.0.0.1:${port}`}`;
      return guarded(req, url, "rest", () => handleRest(ctx, req, rest.slice(1), jobApiBase));
    }
    if (head === "v2" && rest.length >= 2)
      return guarded(req, url, "job", async (key) => {
        // Only for live endpoints: ids a client makes up must not grow the limiter's state.
        if (engine.endpoint(rest[0] ?? "") === undefined) return handleJobApi(ctx, req, rest);
        const entered = limits.enter(key, rest[0] ?? "", rest[1] ?? "");
        if (typeof entered !== "function") {
          ctx.stats.rateLimited++;
          return entered;
        }
        try {
          const limited = limits.check(key, rest[0] ?? "", rest[1] ?? "");
          if (limited !== undefined) {
            ctx.stats.rateLimited++;
            return limited;
          }
          return await handleJobApi(ctx, req, rest);
        } finally {
          entered();
        }
      });
    if (
      head === "v1" &&
      rest[0] === "webhooks" &&
      rest[1] === "deliveries" &&
      rest[3] === "redeliver" &&
      rest.length === 4
    ) {
      return redeliver(req, url, rest[2] ?? "");
    }
    if (head === "v1" && rest[0] === "subscriptions" && rest.length === 2)
      return retrieveSubscription(req, url, rest[1] ?? "");
    return json(404, { error: "not found" });
  };

  const redeliver = async (req: IncomingMessage, url: URL, id: string): Promise<Reply> => {
    if (req.method !== "POST") return json(405, { error: "method not allowed" });
    const key = requestKey(req, url, false);
    if (key === undefined || !opts.paymentApiKeys.has(key))
      return json(401, { error: "Invalid API key provided" });
    try {
      const delivery = await ctx.payment.redeliver(id);
      if (delivery === undefined) return json(404, { error: "delivery not found" });
      return json(200, {
        id: delivery.id,
        eventId: delivery.eventId,
        redelivered: true,
        attempt: delivery.attempts.at(-1),
      });
    } catch (err) {
      return json(409, { error: err instanceof Error ? err.message : String(err) });
    }
  };

  /** Stripe's retrieve: https://docs.stripe.com/api/subscriptions/retrieve */
  const retrieveSubscription = (req: IncomingMessage, url: URL, id: string): Reply => {
    if (req.method !== "GET") return json(405, { error: "method not allowed" });
    const key = requestKey(req, url, false);
    if (key === undefined || !opts.paymentApiKeys.has(key))
      return json(401, { error: { type: "invalid_request_error", message: "Invalid API Key provided" } });
    const sub = ctx.payment.subscription(id);
    if (sub === undefined)
      return json(404, {
        error: {
          type: "invalid_request_error",
          code: "resource_missing",
          param: "id",
          message: `No such subscription: '${id}'`,
        },
      });
    return json(200, sub);
  };

  const onRequest = async (req: IncomingMessage, res: ServerResponse) => {
    const hostedPath = /^\/hosted\/([0-9a-f]{32})(\?|$)/.exec(req.url ?? "");
    if (hostedPath && req.method === "GET") return hosted.serve(hostedPath[1]!, res);
    let reply: Reply;
    try {
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      const parts = url.pathname
        .split("/")
        .filter((p) => p !== "")
        .map(decodeURIComponent);
      reply = await route(req, url, parts);
    } catch (err) {
      const rest = (req.url ?? "").startsWith("/v2/serverless");
      if (err instanceof BodyTooLarge) reply = json(413, { error: "payload too large" });
      else if (err instanceof BadJson)
        reply = rest
          ? problem(400, "request body is not valid JSON")
          : json(400, { error: "body is not valid JSON" });
      else if (err instanceof URIError) reply = json(400, { error: "malformed path" });
      else {
        log?.error({ err }, "simulator request failed");
        reply = json(500, { error: "simulator error" });
      }
    }
    if (!res.headersSent && !res.destroyed) writeReply(res, reply);
  };

  const server = createServer((req, res) => void onRequest(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  hosted.base = url;
  log?.info({ url, endpoints: engine.endpoints().map((e) => e.id) }, "GPU provider simulator listening");

  const view = (id: string) => {
    const config = engine.endpoint(id);
    return config === undefined ? undefined : endpointView(ctx, config);
  };
  let closing: Promise<void> | undefined;

  return {
    url,
    port,
    close: () =>
      (closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        clock.close();
        await callbacks.close();
        engine.close();
        await closed;
        await agent.destroy();
      })()),
    executions: (id) => engine.executions(id),
    allExecutions: () => engine.allExecutions(),
    deliveries: () => callbacks.deliveries(),
    droppedCallbacks: () => callbacks.dropped(),
    faults: () => ({ ...faults }),
    setFaults: (f) => ctx.setFaults(f ?? {}),
    setEndpoint: (spec) => endpointView(ctx, applyEndpoint(ctx, spec)),
    removeEndpoint: (id) => engine.removeEndpoint(id),
    getEndpoint: view,
    listEndpoints: () => engine.endpoints().map((c) => endpointView(ctx, c)),
    getJob: (id) => jobView(ctx, id),
    jobs: () => engine.jobs().flatMap((j) => jobView(ctx, j.id) ?? []),
    forgetJob: (id) => engine.forget(id),
    holdJob: (id) => engine.hold(id),
    releaseJob: (id) => engine.release(id),
    stats: () => ({ ...ctx.stats }),
    workerLedger: (endpointId) => engine.workerRuns(endpointId),
    wallAt: (simMs) => clock.wallAt(simMs),
    setPaymentWebhook: (w) => ctx.payment.setWebhook(w),
    sendPaymentEvent: (event) => ctx.payment.send(event),
    paymentDeliveries: () => ctx.payment.deliveries(),
    setSubscription: (sub) => ctx.payment.setSubscription(sub),
    subscription: (id) => ctx.payment.subscription(id),
    createMeter,
    meters: () => meters.meters(),
    meterEvents: () => meters.events(),
    meterErrors: () => meters.errors(),
    billingStats: () => ({ ...billingApi.stats }),
    advancePaymentClock: (ms) => meters.advance(ms),
  };
}
