// A self-hosted endpoint (GpuEndpoint spec.baseUrl) through the provider client, against a server on
// loopback that records what it receives: the job API's paths under the base URL (status by POST,
// as runpod-python's local API server serves it), no webhook, and the API key sent only when the
// base URL is at the provider's own origin (docs/design.md, "Self-hosted endpoints").
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GpuProviderClient } from "../../src/provider/index.js";

interface Seen {
  method: string;
  url: string;
  authorization?: string;
  body: Record<string, unknown>;
}

let server: Server;
let base: string;
const seen: Seen[] = [];

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    req.on("data", (c: Buffer) => (text += c.toString()));
    req.on("end", () => resolve(text));
  });
}

beforeAll(async () => {
  server = createServer((req, res) => {
    void readBody(req).then((text) => {
      seen.push({
        method: req.method!,
        url: req.url!,
        ...(req.headers.authorization !== undefined && { authorization: req.headers.authorization }),
        body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      });
      res.setHeader("content-type", "application/json");
      const id = "test-0d9c6f6e-5e55-4f6a-9b8e-1f2a3b4c5d6e";
      res.end(
        JSON.stringify(
          req.url === "/worker/run"
            ? { id, status: "IN_PROGRESS" }
            : { id, status: "COMPLETED", output: { words: 3 } },
        ),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

const KEY = "rpa_self_hosted_test_key";
const client = (apiUrl: string, endpointBaseUrl: string) =>
  new GpuProviderClient({
    apiUrl,
    apiKey: KEY,
    maxAttempts: 1,
    endpointBaseUrl: (id) => (id === "local-tts" ? endpointBaseUrl : undefined),
  });

describe("a self-hosted endpoint", () => {
  it("gets /run and POST /status under its base URL, no webhook, and never the API key", async () => {
    seen.length = 0;
    // The provider's own URL is elsewhere (nothing listens there: no call may go to it).
    const c = client("http://127.0.0.1:1", `${base}/worker/`);
    const submitted = await c.submit("local-tts", {
      id: "job-1",
      input: { text: "one two three" },
      webhook: "https://callbacks.example/runpod/job-1?token=secret",
    });
    expect(submitted.status).toBe("IN_PROGRESS");
    const done = await c.status("local-tts", submitted.id);
    expect(done).toMatchObject({ status: "COMPLETED", output: { words: 3 } });
    expect(seen.map((s) => [s.method, s.url])).toEqual([
      ["POST", "/worker/run"],
      ["POST", `/worker/status/${submitted.id}`],
    ]);
    expect(seen[0]!.body).toEqual({ id: "job-1", input: { text: "one two three" } });
    expect(seen.every((s) => s.authorization === undefined)).toBe(true);
  });

  it("gets the API key when its base URL is at the provider's own origin", async () => {
    seen.length = 0;
    const c = client(base, `${base}/worker`);
    await c.submit("local-tts", { id: "job-2", input: {} });
    expect(seen).toMatchObject([{ method: "POST", url: "/worker/run", authorization: `Bearer ${KEY}` }]);
  });

  it("leaves every other endpoint at the provider's /v2/<endpoint> with the key", async () => {
    seen.length = 0;
    const c = client(base, "http://127.0.0.1:1/worker");
    await c.status("ep-provider", "test-0d9c6f6e-5e55-4f6a-9b8e-1f2a3b4c5d6e");
    expect(seen).toMatchObject([
      {
        method: "GET",
        url: "/v2/ep-provider/status/test-0d9c6f6e-5e55-4f6a-9b8e-1f2a3b4c5d6e",
        authorization: `Bearer ${KEY}`,
      },
    ]);
  });
});
