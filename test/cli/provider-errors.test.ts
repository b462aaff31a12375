// The CLI never prints a provider's error body. A provider (or a proxy in front of it) may echo the
// request in its error, and with it the API key URL-encoded or cut short: masking the key's exact
// text misses both. So the CLI prints the HTTP status and what the error code means, and nothing of
// the body. Run in process against a stand-in provider that answers every call with such an echo.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";

// Characters URL encoding changes, so the encoded key differs from the key.
const GPU_KEY = "rp_GPU+key/with=padding_0123456789abcdef";
const PAY_KEY = "sk_test_PAY+key/with=padding_0123456789";
const LEAKS = [GPU_KEY, PAY_KEY].flatMap((k) => [k, encodeURIComponent(k), k.slice(0, 16)]);

let status = 400;
let server: Server;
let url = "";

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const auth = String(req.headers.authorization ?? "").replace(/^Bearer /, "");
      const echo = `bad request to ${req.url}?api_key=${encodeURIComponent(auth)} (key ${auth.slice(0, 16)}...)`;
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: echo, errors: [{ message: echo }] }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

async function cli(args: string[]): Promise<{ code: number; out: string }> {
  let out = "";
  const sink = { write: (t: string) => (out += t) };
  const code = await main(
    args,
    {
      PATH: process.env.PATH,
      GPU_PROVIDER_API_KEY: GPU_KEY,
      GPU_PROVIDER_API_URL: url,
      PAYMENT_PROVIDER_API_KEY: PAY_KEY,
      PAYMENT_PROVIDER_API_URL: url,
    },
    { stdout: sink, stderr: sink },
  );
  for (const leak of LEAKS) expect(out, `output of ${args.join(" ")}`).not.toContain(leak);
  expect(out).not.toContain("bad request to");
  return { code, out };
}

describe("provider error bodies never reach the output", () => {
  it("check-key: the status code and what it means", async () => {
    status = 400;
    const text = await cli(["check-key"]);
    expect(text.code).toBe(1);
    expect(text.out).toContain("could not check the key: the provider refused the request (");
    const json = await cli(["check-key", "-o", "json"]);
    expect(JSON.parse(json.out)).toMatchObject({ result: "unknown" });

    status = 402;
    const account = await cli(["check-key"]);
    expect(account.out).toContain("GPU provider API key: ACCOUNT PROBLEM");
    expect(account.out).toContain("cannot run work (billing, quota or suspension; HTTP 402)");
  });

  it("redeliver: the payment provider's status code only", async () => {
    status = 401;
    const denied = await cli(["redeliver", "whdel_1"]);
    expect(denied.code).toBe(1);
    expect(denied.out).toContain("the payment provider rejected PAYMENT_PROVIDER_API_KEY (HTTP 401)");
    status = 500;
    const failed = await cli(["redeliver", "whdel_1"]);
    expect(failed.out).toContain("the payment provider refused the redelivery (HTTP 500)");
  });
});
