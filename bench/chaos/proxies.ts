// Two small fronts the stack needs when its parts are restarted under it.
//
// apiserverFront: in a cluster, a client's credentials outlive an apiserver restart; the local
// control plane binary makes a new admin token every time it starts. The processes therefore talk
// plain HTTP on loopback to this front, which adds the current token and forwards over TLS. While
// the control plane is down, connections are reset, as they would be by a dead apiserver.
//
// serviceFront: the sidecars' Service. The provider posts callbacks to one URL; it reaches one of
// the running sidecar replicas, and a replica that is down gets no new connections.
import { createServer, request as httpRequest, type IncomingMessage, type Server } from "node:http";
import { Agent, request as httpsRequest } from "node:https";
import type { ControlPlaneAddress } from "./processes.js";

function listen(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve(`http://127.0.0.1:${(server.address() as { port: number }).port}`),
    ),
  );
}

export interface Front {
  url: string;
  close(): Promise<void>;
}

function closer(server: Server): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
}

export async function apiserverFront(current: () => ControlPlaneAddress | undefined): Promise<Front> {
  const agent = new Agent({ keepAlive: true, maxSockets: 256, rejectUnauthorized: false });
  const server = createServer((req, res) => {
    const target = current();
    if (target === undefined) {
      req.socket.destroy();
      return;
    }
    const url = new URL(target.url);
    const headers = { ...req.headers, host: url.host, authorization: `Bearer ${target.token}` };
    const upstream = httpsRequest(
      { host: url.hostname, port: url.port, path: req.url, method: req.method, headers, agent },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
        up.once("error", () => res.destroy());
        up.once("aborted", () => res.destroy());
      },
    );
    upstream.once("error", () => (res.headersSent ? res.destroy() : req.socket.destroy()));
    res.once("close", () => upstream.destroy());
    req.pipe(upstream);
  });
  server.keepAliveTimeout = 30_000;
  return { url: await listen(server), close: closer(server) };
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.once("end", () => resolve(Buffer.concat(chunks)));
    req.once("error", reject);
  });
}

/** Round-robin over the replicas that are up; a refused connection is tried on the next one. */
export async function serviceFront(backends: () => string[]): Promise<Front> {
  let next = 0;
  const server = createServer((req, res) => {
    void readBody(req).then(
      (body) => {
        const targets = backends();
        const forward = (tries: number) => {
          if (tries >= targets.length) {
            req.socket.destroy();
            return;
          }
          const base = new URL(targets[next++ % targets.length]!);
          const upstream = httpRequest(
            {
              host: base.hostname,
              port: base.port,
              path: req.url,
              method: req.method,
              headers: { ...req.headers, host: base.host },
            },
            (up) => {
              res.writeHead(up.statusCode ?? 502, up.headers);
              up.pipe(res);
              up.once("error", () => res.destroy());
            },
          );
          upstream.once("error", () => (res.headersSent ? res.destroy() : forward(tries + 1)));
          upstream.end(body);
        };
        forward(0);
      },
      () => req.socket.destroy(),
    );
  });
  return { url: await listen(server), close: closer(server) };
}
