// The outbound HTTP client every product client uses (src/http/client.ts), against real sockets:
// whether a failed request may have reached the server is what the GPU provider's client reads to
// decide that a /run cannot have been accepted, so it must never say "not sent" for a request that
// was.
import { execFileSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { HttpRequestError, keepAlivePools, send, text } from "../../src/http/client.js";
import { REPO_ROOT } from "../support/controlplane.js";

const servers: (Server | TcpServer)[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

async function listen<S extends Server | TcpServer>(server: S): Promise<string> {
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function failure(p: Promise<unknown>): Promise<HttpRequestError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HttpRequestError);
  return err as HttpRequestError;
}

/**
 * Runs `fn`, then waits 50 ms for what it set off, and fails on any uncaught exception meanwhile
 * (in a product process, a crash).
 */
async function withoutUncaught(fn: () => Promise<void>): Promise<void> {
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);
  process.on("uncaughtException", onUncaught);
  try {
    await fn();
    await new Promise((r) => setTimeout(r, 50));
  } finally {
    process.off("uncaughtException", onUncaught);
  }
  expect(uncaught).toEqual([]);
}

describe("send", () => {
  it("a refused connection was not sent", async () => {
    const origin = await listen(createTcpServer());
    const closed = servers.pop()!;
    await new Promise((r) => closed.close(r));
    const err = await failure(send(`${origin}/run`, { method: "POST", body: "{}" }));
    expect(err).toMatchObject({ code: "ECONNREFUSED", sent: false });
  });

  it("a request aborted after its connection opened may have been sent", async () => {
    let received = 0;
    const origin = await listen(
      createTcpServer((socket) => socket.on("data", (b) => (received += b.length))),
    );
    const err = await failure(
      send(`${origin}/run`, { method: "POST", body: "{}", signal: AbortSignal.timeout(300) }),
    );
    expect(received).toBeGreaterThan(0);
    expect(err).toMatchObject({ code: "ABORT_ERR", sent: true });
  });

  it("a connection reset mid-answer may have been sent", async () => {
    const origin = await listen(createTcpServer((socket) => socket.once("data", () => socket.destroy())));
    const err = await failure(send(`${origin}/run`, { method: "POST", body: "{}" }));
    expect(err.sent).toBe(true);
  });

  it("an abort after the answer has ended leaves its pooled connection alone (no uncaught error)", async () => {
    const origin = await listen(createServer((_req, res) => res.end("done")));
    const pools = keepAlivePools();
    try {
      await withoutUncaught(async () => {
        // A watch's end: the caller aborts its signal once the answer is over, as the informer does.
        const ac = new AbortController();
        const res = await send(`${origin}/watch`, { method: "GET", agent: pools.http, signal: ac.signal });
        // Aborted from the body's own end, as the informer's watch does when the stream ends.
        await new Promise<void>((resolve) => {
          res.body.on("end", () => (ac.abort(), resolve()));
          res.body.resume();
        });
      });
      // The pooled connection still serves the next request.
      const again = await send(`${origin}/x`, { method: "GET", agent: pools.http });
      expect(await text(again.body)).toBe("done");
    } finally {
      pools.http.destroy();
    }
  });

  it("an abort before anyone reads the body does not crash the process; the body then fails", async () => {
    const origin = await listen(
      createServer((req, res) => {
        res.writeHead(200).write("first\n");
        const t = setInterval(() => res.write("more\n"), 50);
        req.on("close", () => clearInterval(t));
      }),
    );
    const ac = new AbortController();
    const res = await send(`${origin}/watch`, { method: "GET", signal: ac.signal });
    // A deadline that fires between the answer's headers and its reader.
    await withoutUncaught(async () => ac.abort());
    await expect(text(res.body)).rejects.toThrow(/aborted/);
  });

  it("an abort from the answer's last event, read after the answer is complete, does not crash the process", async () => {
    // A watch's ERROR event (410 Gone after the control plane restarts) as the answer's last line:
    // the informer aborts its watch while handling it, when the whole answer may already be in and
    // its pooled connection taken back.
    const origin = await listen(
      createServer((_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end('{"type":"ERROR","object":{"code":410}}\n');
      }),
    );
    const pools = keepAlivePools();
    try {
      await withoutUncaught(async () => {
        for (let i = 0; i < 20; i++) {
          const ac = new AbortController();
          const res = await send(`${origin}/watch`, { method: "GET", agent: pools.http, signal: ac.signal });
          res.body.setEncoding("utf8");
          await new Promise<void>((resolve) => {
            res.body.on("data", () => ac.abort());
            res.body
              .on("error", () => resolve())
              .on("end", () => resolve())
              .on("close", () => resolve());
          });
        }
      });
      // The pool still serves.
      const again = await send(`${origin}/x`, { method: "GET", agent: pools.http });
      expect(again.statusCode).toBe(200);
      await text(again.body);
    } finally {
      pools.http.destroy();
    }
  });

  it("an abort while the answer streams ends its body with an error", async () => {
    const origin = await listen(
      createServer((req, res) => {
        res.writeHead(200).write("first\n");
        const t = setInterval(() => res.write("more\n"), 50);
        req.on("close", () => clearInterval(t));
      }),
    );
    const ac = new AbortController();
    const res = await send(`${origin}/watch`, { method: "GET", signal: ac.signal });
    const ended = new Promise<string>((resolve) => {
      res.body.on("error", (e) => resolve(String(e))).on("end", () => resolve("end"));
      res.body.resume();
    });
    setTimeout(() => ac.abort(), 120);
    expect(await ended).toMatch(/aborted/);
  });

  it("answers with status, headers and the body as text, reusing one pooled connection", async () => {
    const peers = new Set<number>();
    const origin = await listen(
      createServer((req, res) => {
        peers.add(req.socket.remotePort!);
        let body = "";
        req.setEncoding("utf8").on("data", (c: string) => (body += c));
        req.on("end", () => res.writeHead(201, { "retry-after": "3" }).end(`é${body}`));
      }),
    );
    const pools = keepAlivePools();
    for (const n of [1, 2, 3]) {
      const res = await send(`${origin}/x`, { method: "POST", body: `n${n}`, agent: pools.http });
      expect(res.statusCode).toBe(201);
      expect(res.headers["retry-after"]).toBe("3");
      expect(await text(res.body)).toBe(`én${n}`);
    }
    expect(peers.size).toBe(1);
    pools.http.destroy();
  });
});

describe("the containers' code", () => {
  it("loads neither undici nor Node's bundled copy of it (fetch's), 10 MiB of RSS each", () => {
    const code = `await import("./src/webhooks/run.ts"); await import("./src/controller/run.ts");
process.stdout.write(JSON.stringify(process.moduleLoadList.filter((m) => m.includes("undici"))));`;
    const out = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
      cwd: REPO_ROOT,
      encoding: "utf8",
    });
    expect(JSON.parse(out)).toEqual([]);
  });
});
