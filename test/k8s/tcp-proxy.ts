// A TCP proxy in front of the apiserver: it counts the connections clients open, and can stall,
// holding back every byte in both directions as a black-holed network path does.
import { createServer, connect, type Server, type Socket } from "node:net";

export class TcpProxy {
  /** Connections accepted since start (or the last reset). */
  connections = 0;
  private stalled = false;
  private readonly open = new Set<{ client: Socket; upstream: Socket; silent: boolean }>();

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(target: string): Promise<TcpProxy> {
    const { protocol, hostname, port } = new URL(target);
    const server = createServer((client) => proxy.accept(client, hostname, Number(port)));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const proxy = new TcpProxy(
      server,
      `${protocol}//127.0.0.1:${(server.address() as { port: number }).port}`,
    );
    return proxy;
  }

  private accept(client: Socket, host: string, port: number): void {
    this.connections++;
    const upstream = connect(port, host);
    // A connection that saw a stall stays silent for good: its client has given up on it, and
    // bytes dropped mid-stream would corrupt it anyway.
    const conn = { client, upstream, silent: this.stalled };
    this.open.add(conn);
    client.on("data", (d) => conn.silent || upstream.write(d));
    upstream.on("data", (d) => conn.silent || client.write(d));
    const close = () => {
      this.open.delete(conn);
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on("error", close);
      s.on("close", close);
    }
  }

  /** From now on nothing passes, on open connections and new ones alike. */
  stall(): void {
    this.stalled = true;
    for (const conn of this.open) conn.silent = true;
  }

  /** New connections pass again (stalled ones stay silent). */
  resume(): void {
    this.stalled = false;
  }

  async close(): Promise<void> {
    for (const conn of this.open) {
      conn.client.destroy();
      conn.upstream.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
