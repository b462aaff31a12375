// The sidecar's front door under attack, over real HTTP: forged floods from the address genuine
// senders share (behind an ingress every sender has the ingress pod's address), unsigned or stale
// payment deliveries with a body still to come, slow headers and slow bodies, many sockets from
// one host, and IPv6 sources budgeted per /64. Each case is one the sidecar once failed.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import type { MediaJob } from "../../src/crds/index.js";
import { KubeApi } from "../../src/k8s/api.js";
import { signStripePayload } from "../../src/webhooks/signature.js";
import { testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import { paymentEvent, signedDelivery } from "../support/payments.js";
import { sidecarTestBed } from "../support/sidecar.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const bed = sidecarTestBed(kc, "webhooks-attacks");
const PAY = "/webhooks/payment_provider";
const opened = new Set<Socket>();
const uid = () => randomBytes(4).toString("hex");
const nowS = () => Math.floor(Date.now() / 1000);
const json = { "content-type": "application/json" };

afterAll(async () => {
  for (const s of opened) s.destroy();
});

/** One POST with node:http (so that the local address can be chosen); its status code. */
function post(
  url: string,
  headers: Record<string, string>,
  body: string,
  localAddress = "127.0.0.1",
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: "POST", headers, localAddress, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** A delivery of an event, signed with the sidecar's secret. */
const signedEvent = () =>
  signedDelivery(paymentEvent("invoice.paid"), bed.env.PAYMENT_PROVIDER_WEBHOOK_SECRET!);

/** A delivery whose header is well formed and fresh but whose signature is not the provider's. */
function forgedEvent() {
  const ev = signedEvent();
  return {
    body: ev.body,
    headers: { ...ev.headers, "stripe-signature": `t=${nowS()},v1=${"ab".repeat(32)}` },
  };
}

/** A socket that sends `head` (the request line and headers, maybe incomplete) and then waits. */
function openSocket(
  url: string,
  head: string,
  localAddress = "127.0.0.1",
): Promise<{ socket: Socket; answer: Promise<{ text: string; closedAfterMs: number }> }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect({ host: u.hostname, port: Number(u.port), localAddress }, () => {
      socket.write(head);
      resolve({ socket, answer });
    });
    opened.add(socket);
    let text = "";
    socket.on("data", (d: Buffer) => (text += d.toString()));
    const answer = new Promise<{ text: string; closedAfterMs: number }>((done) => {
      socket.on("close", () => done({ text, closedAfterMs: Date.now() - started }));
    });
    socket.on("error", () => {});
    socket.once("error", reject);
  });
}

function postHead(path: string, headers: Record<string, string>, contentLength: number): string {
  const lines = Object.entries({
    host: "sidecar",
    ...json,
    ...headers,
    "content-length": String(contentLength),
  })
    .map(([k, v]) => `${k}: ${v}`)
    .join("\r\n");
  return `POST ${path} HTTP/1.1\r\n${lines}\r\n\r\n`;
}

describe("a forged flood from the address genuine senders share", () => {
  const limits = { failuresPerSource: { capacity: 50, refillPerSecond: 0.01 } };

  it("payment route: 60 forged deliveries, then a genuine one is answered 200", async () => {
    const s = await bed.start({ rateLimits: limits });
    const forged: number[] = [];
    for (let i = 0; i < 60; i++) {
      const f = forgedEvent();
      forged.push(await post(`${s.url}${PAY}`, f.headers, f.body));
    }
    expect(forged.slice(0, 50)).toEqual(Array(50).fill(400));
    // The forger's further failures are refused as such; nobody else's delivery is.
    expect(forged.slice(50)).toEqual(Array(10).fill(429));
    const ev = signedEvent();
    expect(await post(`${s.url}${PAY}`, ev.headers, ev.body)).toBe(200);
  });

  it("callback route: 60 forged callbacks, then a genuine one is answered 200 and applied", async () => {
    const s = await bed.start({ rateLimits: limits });
    const name = `flood-${uid()}`;
    const { job, providerJobId } = await bed.jobs.submitted(name, { webhook: false });
    await bed.jobs.finished(job);
    const forgedUrl = new URL(bed.jobs.url(job, s.url));
    forgedUrl.searchParams.set("token", "forged");
    for (let i = 0; i < 60; i++)
      expect(
        await post(forgedUrl.toString(), json, JSON.stringify({ id: providerJobId, status: "COMPLETED" })),
      ).not.toBe(200);
    const genuine = await post(
      bed.jobs.url(job, s.url),
      json,
      JSON.stringify({ id: providerJobId, status: "COMPLETED" }),
    );
    expect(genuine).toBe(200);
    expect((await api.get<MediaJob>("mediajobs", bed.ns, name))?.status?.phase).toBe("Completed");
  });

  it("behind a trusted proxy naming the same client for all: both routes still answer genuine ones 200", async () => {
    const s = await bed.start({
      rateLimits: limits,
      env: { ...bed.env, WEBHOOKS_TRUSTED_PROXIES: "127.0.0.1" },
    });
    const via = { "x-forwarded-for": "203.0.113.7" };
    for (let i = 0; i < 60; i++) {
      const f = forgedEvent();
      await post(`${s.url}${PAY}`, { ...f.headers, ...via }, f.body);
    }
    const ev = signedEvent();
    expect(await post(`${s.url}${PAY}`, { ...ev.headers, ...via }, ev.body)).toBe(200);
    const name = `proxied-${uid()}`;
    const { job, providerJobId } = await bed.jobs.submitted(name, { webhook: false });
    await bed.jobs.finished(job);
    const body = JSON.stringify({ id: providerJobId, status: "COMPLETED" });
    expect(await post(bed.jobs.url(job, s.url), { ...json, ...via }, body)).toBe(200);
  });
});

describe("IPv6 sources", () => {
  it("are budgeted per /64: spending it from one address counts for every address of the /64", async () => {
    const s = await bed.start({
      rateLimits: { failuresPerSource: { capacity: 5, refillPerSecond: 0.01 } },
      env: { ...bed.env, WEBHOOKS_TRUSTED_PROXIES: "127.0.0.1" },
    });
    const from = (ip: string) => {
      const f = forgedEvent();
      return post(`${s.url}${PAY}`, { ...f.headers, "x-forwarded-for": ip }, f.body);
    };
    for (let i = 1; i <= 5; i++) expect(await from(`2001:db8:1:2::${i.toString(16)}`)).toBe(400);
    // Another address of the same /64: its budget is spent.
    expect(await from("2001:db8:1:2:ffff:ffff:ffff:ffff")).toBe(429);
    // Another /64 has its own.
    expect(await from("2001:db8:1:3::1")).toBe(400);
  });
});

describe("payment deliveries judged before their body is read", () => {
  // 200 KiB announced, nothing sent: an answer can only come before the body.
  const BODY = 200 * 1024;

  it("an unsigned delivery is refused (400) and its connection closed without waiting for its body", async () => {
    const s = await bed.start();
    const { answer } = await openSocket(s.url, postHead(PAY, {}, BODY));
    const { text, closedAfterMs } = await answer;
    expect(text).toMatch(/^HTTP\/1\.1 400/);
    expect(closedAfterMs).toBeLessThan(3000);
  });

  it("a delivery whose signature timestamp is stale is refused before its body", async () => {
    const s = await bed.start();
    const stale = `t=${nowS() - 3600},v1=${"ab".repeat(32)}`;
    const { answer } = await openSocket(s.url, postHead(PAY, { "stripe-signature": stale }, BODY));
    const { text, closedAfterMs } = await answer;
    expect(text).toMatch(/^HTTP\/1\.1 400/);
    expect(closedAfterMs).toBeLessThan(3000);
  });

  it("a body above 256 KiB is refused (413) even when signed", async () => {
    const s = await bed.start();
    const body = JSON.stringify({
      id: `evt_${uid()}`,
      type: "invoice.paid",
      created: nowS(),
      pad: "x".repeat(300 * 1024),
    });
    const headers = {
      ...json,
      "stripe-signature": signStripePayload(body, bed.env.PAYMENT_PROVIDER_WEBHOOK_SECRET!, nowS()),
    };
    expect(await post(`${s.url}${PAY}`, headers, body)).toBe(413);
  });

  it("caps the deliveries of one source in flight before their signature is checked; others still pass", async () => {
    const s = await bed.start({ connections: { unverifiedInFlightPerSource: 2, unverifiedInFlight: 10 } });
    const held = await Promise.all(
      [0, 1].map(() =>
        openSocket(
          s.url,
          postHead(PAY, { "stripe-signature": `t=${nowS()},v1=${"ab".repeat(32)}` }, BODY),
          "127.0.0.2",
        ),
      ),
    );
    await new Promise((r) => setTimeout(r, 200));
    const third = await openSocket(
      s.url,
      postHead(PAY, { "stripe-signature": `t=${nowS()},v1=${"ab".repeat(32)}` }, BODY),
      "127.0.0.2",
    );
    const refused = await third.answer;
    expect(refused.text).toMatch(/^HTTP\/1\.1 429/);
    expect(refused.closedAfterMs).toBeLessThan(3000);
    const ev = signedEvent();
    expect(await post(`${s.url}${PAY}`, ev.headers, ev.body, "127.0.0.1")).toBe(200);
    // Once the held ones are gone, the source has its places back.
    for (const h of held) h.socket.destroy();
    await new Promise((r) => setTimeout(r, 200));
    const f = forgedEvent();
    expect(await post(`${s.url}${PAY}`, f.headers, f.body, "127.0.0.2")).toBe(400);
  });
});

describe("slow senders", () => {
  it("a request whose body trickles is cut off at the request timeout (408)", async () => {
    const s = await bed.start({ connections: { requestTimeoutMs: 1500, headersTimeoutMs: 1000 } });
    const { socket, answer } = await openSocket(
      s.url,
      postHead(PAY, { "stripe-signature": `t=${nowS()},v1=${"ab".repeat(32)}` }, 1000),
    );
    const trickle = setInterval(() => socket.writable && socket.write("x"), 100);
    const { text, closedAfterMs } = await answer;
    clearInterval(trickle);
    expect(text).toMatch(/^HTTP\/1\.1 408/);
    expect(closedAfterMs).toBeLessThan(4000);
  });

  it("a sender's idle keep-alive connections never lock out its next delivery", async () => {
    // A sender that opens a connection per delivery and leaves each open (keep-alive) fills its
    // share with idle sockets; the next connection takes the place of the oldest idle one.
    const s = await bed.start({ connections: { maxConnectionsPerSource: 4 } });
    const idle = await Promise.all(
      Array.from({ length: 4 }, () =>
        openSocket(s.url, "GET /healthz HTTP/1.1\r\nhost: sidecar\r\n\r\n", "127.0.0.3"),
      ),
    );
    // Each was answered and stays open.
    await new Promise((r) => setTimeout(r, 300));
    for (const i of idle) expect(i.socket.destroyed).toBe(false);
    const ev = signedEvent();
    expect(await post(`${s.url}${PAY}`, ev.headers, ev.body, "127.0.0.3")).toBe(200);
    // The oldest idle one made room.
    expect((await idle[0]!.answer).text).toMatch(/^HTTP\/1\.1 200/);
  });

  it("sockets trickling headers are cut off at the headers timeout, and one host cannot hold more than its share", async () => {
    const s = await bed.start({
      connections: { headersTimeoutMs: 1000, requestTimeoutMs: 5000, maxConnectionsPerSource: 10 },
    });
    const trickling = await Promise.all(
      Array.from({ length: 30 }, () =>
        openSocket(s.url, `POST ${PAY} HTTP/1.1\r\nhost: sidecar\r\n`, "127.0.0.2"),
      ),
    );
    const trickle = setInterval(() => {
      for (const t of trickling) if (t.socket.writable) t.socket.write("x-a: b\r\n");
    }, 100);
    try {
      // Meanwhile, another sender is served.
      const ev = signedEvent();
      expect(await post(`${s.url}${PAY}`, ev.headers, ev.body, "127.0.0.1")).toBe(200);
      const closed = await Promise.all(trickling.map((t) => t.answer));
      const atOnce = closed.filter((c) => c.text === "");
      // 20 over the share were closed at once, without an answer; the 10 others at the timeout.
      expect(atOnce.length).toBeGreaterThanOrEqual(20);
      expect(Math.max(...closed.map((c) => c.closedAfterMs))).toBeLessThan(4000);
    } finally {
      clearInterval(trickle);
    }
  });
});

describe("the sidecar process", () => {
  it("refuses to start when WEBHOOKS_TRUSTED_PROXIES trusts every address, naming the variable", async () => {
    for (const every of ["0.0.0.0/0", "::/0"]) {
      const child = spawn("node_modules/.bin/tsx", ["src/main.ts", "webhooks"], {
        cwd: process.cwd(),
        env: {
          PATH: process.env.PATH ?? "",
          HOME: process.env.HOME ?? "",
          KUBECONFIG: testKubeconfigPath(),
          CALLBACK_SECRET: `callback-secret-${randomBytes(16).toString("hex")}`,
          GPU_PROVIDER_API_KEY: "sim-key",
          PAYMENT_PROVIDER_WEBHOOK_SECRET: "whsec_test",
          WEBHOOKS_HOST: "127.0.0.1",
          WEBHOOKS_PORT: "0",
          WEBHOOKS_TRUSTED_PROXIES: `10.0.0.0/8,${every}`,
        },
        stdio: ["ignore", "ignore", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
      // A sidecar that starts (the old behaviour) is stopped, and the test fails on its code.
      const started = setTimeout(() => child.kill("SIGTERM"), 15_000);
      const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
      clearTimeout(started);
      expect(code, every).toBe(1);
      expect(stderr, every).toContain("WEBHOOKS_TRUSTED_PROXIES: must not trust every address");
    }
  });
});
