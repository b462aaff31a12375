// The controller's own /healthz, /readyz and /metrics (the sidecar has its own on another port).
import type { Server } from "node:http";
import type { Registry } from "prom-client";
import { nodeHttp } from "../http/node-http.js";

/** What the health server reads of a manager: its caches' progress, their sync, its metrics. */
export interface HealthSource {
  /** The caches whose stalled watch makes the process unhealthy. */
  readonly watched: ReadonlyArray<{ readonly hasSynced: boolean; readonly lastActivityAt: number }>;
  readonly synced: boolean;
  readonly metrics: { readonly registry: Registry };
}

export function startControllerHealthServer(
  manager: HealthSource,
  host: string,
  port: number,
): Promise<{ server: Server; url: string }> {
  const server = nodeHttp.createServer((req, res) => {
    const send = (code: number, body: string, type = "text/plain") => {
      res.writeHead(code, { "Content-Type": type });
      res.end(body);
    };
    if (req.url === "/healthz") {
      // A watch that stalls is restarted by its watchdog; a process whose informers stopped
      // making progress for long is not healthy and should be restarted.
      const stalled = manager.watched.some((i) => i.hasSynced && Date.now() - i.lastActivityAt > 5 * 60_000);
      return stalled ? send(500, "informer stalled\n") : send(200, "ok\n");
    }
    if (req.url === "/readyz") return manager.synced ? send(200, "ok\n") : send(503, "caches not synced\n");
    if (req.url === "/metrics") {
      manager.metrics.registry
        .metrics()
        .then((m) => send(200, m, manager.metrics.registry.contentType))
        .catch(() => send(500, "metrics unavailable\n"));
      return;
    }
    send(404, "not found\n");
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      const addr = server.address();
      const p = typeof addr === "object" && addr ? addr.port : port;
      resolve({ server, url: `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${p}` });
    });
  });
}
