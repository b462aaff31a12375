// The webhooks sidecar: a Fastify server beside the controller in every replica. It writes state only
// through the Kubernetes API, so replicas need no coordination beyond what the apiserver gives
// (create is atomic, status writes carry a resourceVersion). docs/webhooks.md has the decisions.
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { BlockList, isIPv6, type Socket } from "node:net";
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { Registry } from "prom-client";
import { stateNamespace, webhookSecrets, type Env } from "../config/env.js";
import { usageSettings } from "../config/usage.js";
import { DEFAULT_RATE_LIMITS, parseRateLimits, type RateLimitSettings } from "../config/rate-limits.js";
import type { KubeApi } from "../k8s/api.js";
import type { GpuProviderClient } from "../provider/index.js";
import { describeError } from "../k8s/errors.js";
import { EventRecorder } from "../k8s/events.js";
import { registerCallbackRoute } from "./callbacks.js";
import { redactUrl, webhookLogger } from "./logging.js";
import { WebhookMetrics } from "./metrics.js";
import { FinishedEvents, watchFinishedEvents } from "./finished.js";
import { PaymentApi } from "./paymentapi.js";
import { PaymentEvents, registerPaymentRoute } from "./payments.js";
import { InFlight, TokenBuckets, VerifyThenLimit, sourceKey } from "./ratelimit.js";
import { KubeReadiness } from "./readiness.js";
import { genericBody, outcomeOf, refuse, send, setOutcome } from "./replies.js";

export interface WebhookServerOptions {
  /** The Kubernetes client of every route, with its deadline (KUBE_API_TIMEOUT_SECONDS). */
  api: KubeApi;
  /** Secrets come from here: webhookSecrets(env) and env.CALLBACK_SECRET. */
  env: Env;
  log: Logger;
  /** Clock for signature tolerance and the timestamps written (tests). */
  now?: () => Date;
  /** Default: a new one. */
  registry?: Registry;
  /** Where PaymentEvents and BillingAccounts live. Default: webhookNamespace(env). */
  namespace?: string;
  /** The payment route's body limit in bytes (413 above it). Default WEBHOOKS_PAYMENT_BODY_LIMIT_KIB. */
  bodyLimit?: number;
  /** Connection limits and timeouts, over the environment's (WEBHOOKS_MAX_CONNECTIONS...). */
  connections?: Partial<ConnectionSettings>;
  /** Over WEBHOOKS_RATE_LIMITS, over the defaults. */
  rateLimits?: Partial<RateLimitSettings>;
  /** How long a concurrent duplicate of a payment event waits for the attempt in flight. Default 5 s. */
  duplicateWaitMs?: number;
  /** After this long, a Processing PaymentEvent counts as a crashed attempt and is claimed again. Default 60 s. */
  staleClaimMs?: number;
  /** The GPU callback route's body limit (413 above it). Default CALLBACK_BODY_LIMIT (24 MiB). */
  callbackBodyLimit?: number;
  /** The GPU provider's status API, which confirms every callback. Without it callbacks answer 503. */
  provider?: Pick<GpuProviderClient, "status">;
  /** Keep the finished-events memory current from a watch (default true). */
  watchFinished?: boolean;
  /** The finished-events memory. Default: WEBHOOKS_REPLAY_MEMORY ids. */
  finished?: FinishedEvents;
}

/** Routes without a limit of their own (none take a body today). */
const DEFAULT_BODY_LIMIT = 1024 * 1024;

/** What bounds the connections and the requests whose sender is not verified yet. */
interface ConnectionSettings {
  maxConnections: number;
  maxConnectionsPerSource: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  unverifiedInFlightPerSource: number;
  unverifiedInFlight: number;
}

function connectionSettings(env: Env): ConnectionSettings {
  return {
    maxConnections: env.WEBHOOKS_MAX_CONNECTIONS,
    maxConnectionsPerSource: env.WEBHOOKS_MAX_CONNECTIONS_PER_SOURCE,
    headersTimeoutMs: env.WEBHOOKS_HEADERS_TIMEOUT_SECONDS * 1000,
    requestTimeoutMs: env.WEBHOOKS_REQUEST_TIMEOUT_SECONDS * 1000,
    unverifiedInFlightPerSource: env.WEBHOOKS_UNVERIFIED_IN_FLIGHT_PER_SOURCE,
    unverifiedInFlight: env.WEBHOOKS_UNVERIFIED_IN_FLIGHT,
  };
}
const PROBES = new Set(["/healthz", "/readyz", "/metrics"]);

/** The sidecar's own namespace: WATCH_NAMESPACE, else the pod's (downward API), else "default". */
export function webhookNamespace(env: Env): string {
  return stateNamespace(env);
}

/** The server with every route registered, not listening. */
async function buildWebhookServer(opts: WebhookServerOptions): Promise<FastifyInstance> {
  const log = webhookLogger(opts.log);
  const now = opts.now ?? (() => new Date());
  const namespace = opts.namespace ?? webhookNamespace(opts.env);
  const metrics = new WebhookMetrics(opts.registry ?? new Registry());
  const paymentBodyLimit = opts.bodyLimit ?? opts.env.WEBHOOKS_PAYMENT_BODY_LIMIT_KIB * 1024;
  const conn = { ...connectionSettings(opts.env), ...opts.connections };
  const trustedProxies = opts.env.WEBHOOKS_TRUSTED_PROXIES?.split(",").map((p) => p.trim()) ?? [];
  const limits = {
    ...DEFAULT_RATE_LIMITS,
    ...parseRateLimits(opts.env.WEBHOOKS_RATE_LIMITS),
    ...opts.rateLimits,
  };
  const secrets = webhookSecrets(opts.env);
  const readiness = new KubeReadiness(opts.api, namespace);

  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    // Fastify's per-request lines would log the URL (callback tokens); ours, below, redacts it.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: DEFAULT_BODY_LIMIT,
    return503OnClosing: true,
    forceCloseConnections: "idle",
    // Slow senders are cut off: headers must arrive within headersTimeout of the first byte, the
    // whole request within requestTimeout (Node answers 408 and closes). Node checks both every
    // connectionsCheckingInterval (30 s by default, which let a trickle of headers hold a socket
    // 60 + 30 s): every second here.
    requestTimeout: conn.requestTimeoutMs,
    http: {
      headersTimeout: conn.headersTimeoutMs,
      requestTimeout: conn.requestTimeoutMs,
      connectionsCheckingInterval: 1000,
    },
    // req.ip, the key of the per-source limits, is the client named by these proxies' X-Forwarded-For.
    trustProxy: trustedProxies.length > 0 ? trustedProxies : false,
  });
  limitConnections(app.server, conn, trustedProxies);
  // JSON only: text/plain (Fastify's other default) would reach the handlers as a string.
  app.removeContentTypeParser("text/plain");

  // Graceful shutdown: server.close() reaps only the keep-alive connections idle at that moment;
  // a connection whose request is in flight would stay open after its answer and hold close()
  // up until the client's keep-alive ends. Answers sent while closing therefore end the connection.
  let closing = false;
  app.addHook("preClose", async () => {
    closing = true;
  });
  app.addHook("onSend", async (_req, reply, payload) => {
    if (closing) void reply.header("connection", "close");
    return payload;
  });

  app.addHook("onResponse", async (req, reply) => {
    const route = req.routeOptions.url ?? "unmatched";
    const code = reply.statusCode;
    const outcome = outcomeOf(req, code);
    metrics.requests.inc({ route, outcome, code: String(code) });
    metrics.duration.observe({ route }, reply.elapsedTime / 1000);
    const line = {
      method: req.method,
      url: redactUrl(req.url),
      route,
      statusCode: code,
      outcome,
      ms: Math.round(reply.elapsedTime),
    };
    if (PROBES.has(route)) req.log.debug(line, "request");
    else req.log.info(line, "request");
  });

  app.setErrorHandler((err, req, reply) => {
    const status = (err as { statusCode?: unknown }).statusCode;
    if (typeof status === "number" && status >= 400 && status < 500) {
      // Parser errors can quote the body (a JSON SyntaxError does): log the code, never the message.
      const code = (err as { code?: unknown }).code;
      req.log.info(
        { code: typeof code === "string" ? code : undefined, statusCode: status },
        "request refused",
      );
      setOutcome(req, outcomeOf(req, status));
      return reply.code(status).send(genericBody(status));
    }
    // Anything else is ours or our dependency's (the Kubernetes API): retryable, never a 500.
    req.log.error({ error: describeError(err).slice(0, 1000) }, "request failed: answering 503");
    return send(req, reply, refuse(503, "unavailable", { "retry-after": "5" }));
  });
  app.setNotFoundHandler((req, reply) => send(req, reply, refuse(404, "not_found")));

  app.get("/healthz", async (_req, reply) => reply.type("text/plain").send("ok\n"));
  let wasReady: boolean | undefined;
  app.get("/readyz", async (req, reply) => {
    const r = await readiness.check();
    if (r.ready !== wasReady) {
      if (r.ready) req.log.info("ready: the Kubernetes API answers");
      else req.log.warn({ reason: r.reason }, "not ready: the Kubernetes API does not answer");
      wasReady = r.ready;
    }
    return reply
      .code(r.ready ? 200 : 503)
      .type("text/plain")
      .send(r.ready ? "ok\n" : "kubernetes api unreachable\n");
  });
  app.get("/metrics", async (_req, reply) =>
    reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );

  const finished = opts.finished ?? new FinishedEvents(opts.env.WEBHOOKS_REPLAY_MEMORY);
  const watch =
    opts.watchFinished === false || opts.env.WEBHOOKS_REPLAY_MEMORY === 0
      ? undefined
      : watchFinishedEvents(opts.api, namespace, finished, log);
  app.addHook("onClose", async () => {
    await watch?.stop();
  });
  const apiKey = opts.env.PAYMENT_PROVIDER_API_KEY;
  const events = new PaymentEvents({
    api: opts.api,
    namespace,
    metrics,
    now,
    log,
    finished,
    ...(apiKey && {
      subscriptions: new PaymentApi({
        baseUrl: opts.env.PAYMENT_PROVIDER_API_URL,
        // Read per call: a rotated key file takes effect without a restart (secret-files.ts).
        get apiKey() {
          return opts.env.PAYMENT_PROVIDER_API_KEY ?? apiKey;
        },
      }),
    }),
    duplicateWaitMs: opts.duplicateWaitMs ?? 5_000,
  });
  await registerPaymentRoute(app, {
    events,
    // Read per request: a rotated signing secret file takes effect without a restart.
    get secrets() {
      return webhookSecrets(opts.env);
    },
    toleranceSeconds: opts.env.WEBHOOK_TOLERANCE_SECONDS,
    now,
    metrics,
    guard: new VerifyThenLimit(limits.failuresPerSource, limits.payment),
    inFlight: new InFlight({ perSource: conn.unverifiedInFlightPerSource, total: conn.unverifiedInFlight }),
    bodyLimit: paymentBodyLimit,
  });
  registerCallbackRoute(app, {
    api: opts.api,
    get secret() {
      return opts.env.CALLBACK_SECRET;
    },
    get previousSecret() {
      return opts.env.CALLBACK_SECRET_PREVIOUS;
    },
    events: new EventRecorder(opts.api, "webhooks", log),
    watchNamespace: opts.env.WATCH_NAMESPACE,
    billing: usageSettings(opts.env, { sidecar: true }),
    provider: opts.provider,
    now,
    metrics,
    guard: new VerifyThenLimit(limits.failuresPerSource, limits.callbackGlobal),
    perJobLimiter: new TokenBuckets(limits.callbackPerJob),
    ...(opts.callbackBodyLimit !== undefined && { bodyLimit: opts.callbackBodyLimit }),
  });

  if (secrets.length === 0)
    log.error("PAYMENT_PROVIDER_WEBHOOK_SECRET is not set: every payment webhook is refused (400)");
  if (!opts.env.CALLBACK_SECRET) log.error("CALLBACK_SECRET is not set: every GPU callback is refused (401)");
  if (!apiKey)
    log.warn(
      "PAYMENT_PROVIDER_API_KEY is not set: subscription events of the same second are ordered by event id, not by the provider's current state",
    );
  return app;
}

/**
 * maxConnections for all, and at most maxConnectionsPerSource open connections per peer (IPv6: per
 * /64): a single host cannot hold every socket (a trickle of headers holds one until the headers
 * timeout), and one over its share is closed at once, before anything is read. The trusted
 * proxies are not counted: every sender behind them shares their addresses, and their own limits
 * apply there.
 */
function limitConnections(server: Server, conn: ConnectionSettings, trustedProxies: string[]): void {
  server.maxConnections = conn.maxConnections;
  const trusted = new BlockList();
  for (const p of trustedProxies) {
    const [addr = "", bits] = p.split("/");
    const type = isIPv6(addr) ? "ipv6" : "ipv4";
    if (bits === undefined) trusted.addAddress(addr, type);
    else trusted.addSubnet(addr, Number(bits), type);
  }
  // A source's connections, oldest first, and the requests each has in flight. At its cap, a new
  // connection takes the place of the source's oldest one that has no request in flight (a
  // keep-alive connection left idle, or one still trickling its headers), so a sender that opens a
  // new connection per delivery and leaves the old ones open is never locked out by its own idle
  // sockets; only connections with requests in flight hold the cap.
  const bySource = new Map<string, Set<Socket>>();
  const inFlight = new WeakMap<Socket, number>();
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1);
    res.once("close", () => inFlight.set(socket, (inFlight.get(socket) ?? 1) - 1));
  });
  server.on("connection", (socket: Socket) => {
    const remote = socket.remoteAddress;
    if (!remote) return;
    // A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d.
    const peer = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(remote)?.[1] ?? remote;
    if (trusted.check(peer, isIPv6(peer) ? "ipv6" : "ipv4")) return;
    const key = sourceKey(peer);
    const sockets = bySource.get(key) ?? new Set<Socket>();
    if (sockets.size >= conn.maxConnectionsPerSource) {
      const idle = [...sockets].find((s) => (inFlight.get(s) ?? 0) === 0);
      if (!idle) {
        socket.destroy();
        return;
      }
      sockets.delete(idle);
      idle.destroy();
    }
    sockets.add(socket);
    bySource.set(key, sockets);
    socket.once("close", () => {
      sockets.delete(socket);
      if (sockets.size === 0 && bySource.get(key) === sockets) bySource.delete(key);
    });
  });
}

export interface RunningWebhookServer {
  url: string;
  app: FastifyInstance;
  /** Stops accepting, finishes the requests in flight, then resolves. */
  close(): Promise<void>;
}

export async function startWebhookServer(
  opts: WebhookServerOptions & { host?: string; port?: number },
): Promise<RunningWebhookServer> {
  const app = await buildWebhookServer(opts);
  const host = opts.host ?? opts.env.WEBHOOKS_HOST;
  await app.listen({ host, port: opts.port ?? opts.env.WEBHOOKS_PORT });
  const addr = app.server.address();
  const port = typeof addr === "object" && addr ? addr.port : (opts.port ?? opts.env.WEBHOOKS_PORT);
  const shownHost =
    host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  return { url: `http://${shownHost}:${port}`, app, close: () => app.close() };
}
