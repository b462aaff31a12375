// HTTP/1.1 requests on Node's own http/https modules, for the product's three outbound clients (the
// apiserver, the GPU provider, the payment provider). Node's client parses with the llhttp built
// into the binary; undici carries its own llhttp compiled to WebAssembly, and importing it cost
// each container about 10 MiB of its idle RSS (the Wasm engine's pages and undici's modules,
// measured in docs/benchmarks.md, "Import costs"). Everything these clients need is here: pooled
// keep-alive connections, a caller's AbortSignal, the answer's body as a stream or as text.
import type { Agent as HttpAgent, IncomingHttpHeaders, IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest, type AgentOptions } from "node:https";
import { nodeHttp } from "./node-http.js";

export type HttpMethod = "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE";

/** An answer whose headers have arrived; its body is a stream that must be read or dumped. */
export interface HttpAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: IncomingMessage;
}

export interface HttpRequest {
  method: HttpMethod;
  headers?: Record<string, string>;
  body?: string | Buffer;
  signal?: AbortSignal;
  /** The pool to take a connection from (keepAlivePools); absent: one connection per request. */
  agent?: HttpAgent;
}

/**
 * A request failed. `sent` tells whether any of it may have reached the server: false only when it
 * failed before its connection was open (refused, unresolvable, aborted while connecting), so the
 * server cannot have acted on it. A caller that must not do a thing twice reads this.
 */
export class HttpRequestError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
    readonly sent: boolean,
    cause?: unknown,
  ) {
    super(message, { cause });
    this.name = "HttpRequestError";
  }
}

/** A client's keep-alive pools, one per scheme (keepAlivePools). */
export interface HttpPools {
  http: HttpAgent;
  https: HttpsAgent;
}

/** The pool of `pools` for a URL's scheme. */
export function poolFor(pools: HttpPools, url: string): HttpAgent {
  return url.startsWith("https:") ? pools.https : pools.http;
}

/** Keep-alive pools for both schemes, with the TLS options given for https. */
export function keepAlivePools(
  tls: AgentOptions = {},
  idleMs = 30_000,
): { http: HttpAgent; https: HttpsAgent } {
  return {
    http: new nodeHttp.Agent({ keepAlive: true, timeout: idleMs }),
    https: new HttpsAgent({ ...tls, keepAlive: true, timeout: idleMs }),
  };
}

/** Sends one request; resolves when the answer's headers arrive. Rejects with HttpRequestError. */
export function send(url: string | URL, req: HttpRequest): Promise<HttpAnswer> {
  const target = typeof url === "string" ? new URL(url) : url;
  const secure = target.protocol === "https:";
  if (!secure && target.protocol !== "http:")
    return Promise.reject(new HttpRequestError(`unsupported protocol ${target.protocol}`, undefined, false));
  return new Promise<HttpAnswer>((resolve, reject) => {
    let connected = false;
    const fail = (err: unknown) => {
      const e = err as { code?: unknown; message?: unknown };
      const code = typeof e.code === "string" ? e.code : undefined;
      const aborted = req.signal?.aborted === true;
      const reason = req.signal?.reason as { message?: unknown } | undefined;
      const message = aborted ? reason?.message : e.message;
      reject(
        new HttpRequestError(
          typeof message === "string" ? message : aborted ? "aborted" : (code ?? String(err)),
          aborted ? "ABORT_ERR" : code,
          connected,
          aborted ? req.signal?.reason : err,
        ),
      );
    };
    if (req.signal?.aborted) {
      fail(req.signal.reason);
      return;
    }
    const options = {
      method: req.method,
      headers: {
        ...req.headers,
        ...(req.body !== undefined && { "content-length": String(Buffer.byteLength(req.body)) }),
      },
      ...(req.agent !== undefined && { agent: req.agent }),
    };
    const out = secure ? httpsRequest(target, options) : nodeHttp.request(target, options);
    // The caller's signal ends the exchange while it lasts, not after: Node's own `signal` option
    // stays armed once the answer has ended, and an abort then destroys the connection the pool
    // took back, whose error nothing listens to any more (an uncaught exception). An answer read in
    // full is already off its connection, though its last 'data' may still be on the way (a watch
    // aborted from its final event): then only the body stops, and the pooled connection is left
    // alone. Destroyed without an error, a connection has no 'error' to emit; `fail` names the abort.
    const signal = req.signal;
    let answer: IncomingMessage | undefined;
    const onAbort = () => (answer?.complete ? answer.destroy() : out.destroy());
    const disarm = () => signal?.removeEventListener("abort", onAbort);
    signal?.addEventListener("abort", onAbort, { once: true });
    out.once("close", disarm);
    out.on("socket", (socket) => {
      // A pooled connection is already open; a new one is open once connected (TLS: once secure).
      if (!socket.connecting) connected = true;
      else socket.once(secure ? "secureConnect" : "connect", () => (connected = true));
    });
    out.on("response", (res) => {
      answer = res;
      res.once("end", disarm).once("close", disarm);
      resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, body: res });
    });
    out.on("error", fail);
    out.end(req.body);
  });
}

/** The whole body as text (UTF-8). */
export async function text(res: IncomingMessage): Promise<string> {
  res.setEncoding("utf8");
  let all = "";
  for await (const chunk of res) all += chunk as string;
  return all;
}

/** Reads and drops the body, so its connection goes back to the pool. */
export function dump(res: IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    if (res.complete || res.destroyed) return resolve();
    res
      .on("end", resolve)
      .on("close", resolve)
      .on("error", () => resolve());
    res.resume();
  });
}

/** A failed request's kind (a timeout, a refused connection), never its URL or headers. */
export function failureKind(err: unknown): string {
  const cause = err instanceof Error ? (err.cause as { name?: unknown } | undefined) : undefined;
  if (cause?.name === "TimeoutError") return "TimeoutError";
  if (err instanceof HttpRequestError && err.code !== undefined) return err.code;
  return err instanceof Error ? err.name : "error";
}
