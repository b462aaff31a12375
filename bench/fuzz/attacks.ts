// The attacks of `make fuzz`, each against a fresh sidecar process with the chart's settings:
// what an attacker who holds one callback URL, or none, can make the sidecar hold, and whether
// genuine deliveries (a signed payment event, a tokened callback) are still answered 2xx during
// and after. Attackers send from 127.0.0.2 and 127.0.0.3, genuine senders from 127.0.0.1, except
// in the forged flood, where everyone shares 127.0.0.1 (as behind an ingress).
import { randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import { connect, type Socket } from "node:net";
import type { MediaJob } from "../../src/crds/index.js";
import type { KubeApi } from "../../src/k8s/api.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { signStripePayload } from "../../src/webhooks/signature.js";
import { CallbackJobs } from "../../test/support/callbacks.js";
import { SIM_KEY } from "../../test/support/stack.js";
import { round, stopChild } from "../lib.js";
import { chartMemoryLimitMiB, rssPeak, startSidecar, type Sidecar } from "./sidecar.js";

const PAY = "/webhooks/payment_provider";
const ATTACKER = "127.0.0.2";
const ATTACKER2 = "127.0.0.3";
const GENUINE = "127.0.0.1";

export interface AttackScale {
  /** Concurrent large bodies on a finished job's callback URL, and their size. */
  largeBodies: number;
  largeBodyMiB: number;
  /** Sockets slowly sending 1 MiB payment bodies (unsigned, then with a forged fresh header). */
  slowBodies: number;
  /** Sockets trickling headers. */
  slowHeaders: number;
  /** Forged requests of the flood, per route. */
  flood: number;
  /** How long a slow attack is kept up at most. */
  seconds: number;
}

export interface AttackResult {
  name: string;
  what: string;
  seconds: number;
  sidecar: "dist" | "tsx";
  /** RSS once the sidecar answered /readyz, before the attack. */
  startRssMiB: number;
  peakRssMiB: number;
  limitMiB: number;
  withinLimit: boolean;
  /** The attacker's answers by status code (0: closed without an answer). */
  attackerAnswers: Record<string, number>;
  /** The longest an attacker's connection was held open, in seconds. */
  attackerHeldSeconds: number;
  genuine: Array<{ delivery: string; status: number; outcome?: string }>;
  allGenuine2xx: boolean;
  notes?: Record<string, unknown>;
}

export interface AttackStack {
  api: KubeApi;
  sim: Simulator;
  kubeconfig: string;
  namespace: string;
  /** Another tenant's namespace (the adoption attempt). */
  otherNamespace: string;
  paymentSecret: string;
  callbackSecret: string;
}

const count = (xs: number[]) => {
  const out: Record<string, number> = {};
  for (const x of xs) out[String(x)] = (out[String(x)] ?? 0) + 1;
  return out;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const nowS = () => Math.floor(Date.now() / 1000);

/** One POST from `localAddress`; the status (0: the connection failed) and the JSON answer. */
function post(
  url: string,
  headers: Record<string, string>,
  body: string | Buffer,
  localAddress: string,
): Promise<{ status: number; json?: Record<string, unknown> }> {
  return new Promise((resolve) => {
    const req = httpRequest(url, { method: "POST", headers, localAddress, agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => {
        let json: Record<string, unknown> | undefined;
        try {
          json = JSON.parse(text) as Record<string, unknown>;
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode ?? 0, ...(json && { json }) });
      });
    });
    req.on("error", () => resolve({ status: 0 }));
    req.end(body);
  });
}

/** A raw socket: `head` written at once, then `more()` called every `everyMs` until it is closed. */
function slowSocket(
  base: string,
  localAddress: string,
  head: string,
  more: (socket: Socket) => void,
  everyMs: number,
): Promise<{ status: number; heldMs: number }> {
  const u = new URL(base);
  return new Promise((resolve) => {
    const started = Date.now();
    let text = "";
    let timer: NodeJS.Timeout | undefined;
    const socket = connect({ host: u.hostname, port: Number(u.port), localAddress }, () => {
      socket.write(head);
      timer = setInterval(() => socket.writable && more(socket), everyMs);
    });
    socket.on("data", (d: Buffer) => (text += d.toString("latin1")));
    socket.on("error", () => {});
    socket.on("close", () => {
      clearInterval(timer);
      const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
      resolve({ status: m ? Number(m[1]) : 0, heldMs: Date.now() - started });
    });
    slowSockets.add(socket);
  });
}
const slowSockets = new Set<Socket>();

export async function runAttacks(stack: AttackStack, scale: AttackScale): Promise<AttackResult[]> {
  const limitMiB = chartMemoryLimitMiB();
  const jobs = new CallbackJobs({
    api: stack.api,
    namespace: stack.namespace,
    secret: stack.callbackSecret,
    sim: stack.sim,
  });
  const tenantB = new CallbackJobs({
    api: stack.api,
    namespace: stack.otherNamespace,
    secret: stack.callbackSecret,
    sim: stack.sim,
  });
  const env = {
    KUBECONFIG: stack.kubeconfig,
    CALLBACK_SECRET: stack.callbackSecret,
    GPU_PROVIDER_API_URL: stack.sim.url,
    GPU_PROVIDER_API_KEY: SIM_KEY,
    PAYMENT_PROVIDER_WEBHOOK_SECRET: stack.paymentSecret,
    // One operator for every tenant's namespace (watchAllNamespaces): tenant B's jobs are in its
    // scope. The sidecar's own state (PaymentEvents) lives in its pod's namespace.
    POD_NAMESPACE: stack.namespace,
  };

  const signed = () => {
    const body = JSON.stringify({
      id: `evt_${randomBytes(6).toString("hex")}`,
      type: "invoice.paid",
      created: nowS(),
      data: { object: {} },
    });
    return {
      body,
      headers: {
        "content-type": "application/json",
        "stripe-signature": signStripePayload(body, stack.paymentSecret, nowS()),
      },
    };
  };
  const forgedHeader = () => `t=${nowS()},v1=${randomBytes(32).toString("hex")}`;

  /** A job the provider has finished, whose callback has not come yet. */
  const finishedJob = async () => {
    const { job, providerJobId } = await jobs.submitted(`genuine-${randomBytes(4).toString("hex")}`, {
      webhook: false,
    });
    await jobs.finished(job);
    return { job, providerJobId };
  };

  /** One genuine payment delivery and one genuine callback, from `from`; their answers. */
  const genuine = async (s: Sidecar, label: string, from = GENUINE) => {
    const ev = signed();
    const pay = await post(`${s.base}${PAY}`, ev.headers, ev.body, from);
    const { job, providerJobId } = await finishedJob();
    const cb = await post(
      jobs.url(job, s.base),
      { "content-type": "application/json" },
      JSON.stringify({ id: providerJobId, status: "COMPLETED" }),
      from,
    );
    return [
      { delivery: `${label}: signed payment event`, status: pay.status },
      {
        delivery: `${label}: callback of a finished job`,
        status: cb.status,
        ...(cb.json && { outcome: JSON.stringify(cb.json) }),
      },
    ];
  };

  const results: AttackResult[] = [];
  const attack = async (
    name: string,
    what: string,
    run: (s: Sidecar) => Promise<{
      attacker: number[];
      heldMs?: number[];
      genuine: AttackResult["genuine"];
      notes?: Record<string, unknown>;
    }>,
  ) => {
    process.stderr.write(`  attack ${name}...\n`);
    const s = await startSidecar(`fuzz-attack-${name}`, env);
    const rss = rssPeak(s.child.pid!);
    const startRssMiB = round(rss.now());
    const started = Date.now();
    try {
      const r = await run(s);
      const peak = round(rss.stop());
      results.push({
        name,
        what,
        seconds: round((Date.now() - started) / 1000),
        sidecar: s.how,
        startRssMiB,
        peakRssMiB: peak,
        limitMiB,
        withinLimit: peak <= limitMiB,
        attackerAnswers: count(r.attacker),
        attackerHeldSeconds: round(Math.max(0, ...(r.heldMs ?? [])) / 1000),
        genuine: r.genuine,
        allGenuine2xx: r.genuine.every((g) => g.status >= 200 && g.status < 300),
        ...(r.notes && { notes: r.notes }),
      });
      const last = results.at(-1)!;
      process.stderr.write(
        `    RSS ${last.startRssMiB} -> peak ${last.peakRssMiB} MiB (limit ${limitMiB}), genuine ${last.genuine.map((g) => g.status).join(",")}\n`,
      );
    } finally {
      rss.stop();
      for (const sock of slowSockets) sock.destroy();
      slowSockets.clear();
      await stopChild(s.child);
    }
  };

  await attack(
    "large-callback-bodies",
    `${scale.largeBodies} x ${scale.largeBodyMiB} MiB bodies [{},{},...] at once on the callback URL of a Completed job`,
    async (s) => {
      const { job, providerJobId } = await finishedJob();
      const url = jobs.url(job, s.base);
      const done = await post(
        url,
        { "content-type": "application/json" },
        JSON.stringify({ id: providerJobId, status: "COMPLETED" }),
        GENUINE,
      );
      const completed = (await stack.api.get<MediaJob>("mediajobs", stack.namespace, job.metadata.name))
        ?.status?.phase;
      const n = Math.floor((scale.largeBodyMiB * 2 ** 20 - 2) / 3);
      const big = Buffer.from(`[${"{},".repeat(n)}{}]`);
      const attacker = await Promise.all(
        Array.from({ length: scale.largeBodies }, () =>
          post(url, { "content-type": "application/json" }, big, ATTACKER).then((r) => r.status),
        ),
      );
      return {
        attacker,
        genuine: [
          { delivery: "the job's own callback, before", status: done.status },
          ...(await genuine(s, "after")),
        ],
        notes: { jobPhaseBefore: completed },
      };
    },
  );

  // Genuine deliveries while the attacker's sockets are held and after they were let go, and
  // what became of each attacking socket.
  const whileHeld = async (s: Sidecar, sockets: Array<Promise<{ status: number; heldMs: number }>>) => {
    await sleep(1000);
    const during = await genuine(s, "during");
    const answers = await Promise.all(sockets);
    return {
      attacker: answers.map((a) => a.status),
      heldMs: answers.map((a) => a.heldMs),
      genuine: [...during, ...(await genuine(s, "after"))],
    };
  };

  const slowBodies = (signedHeader: boolean, bytes: number) => async (s: Sidecar) => {
    const head = (extra: string) =>
      `POST ${PAY} HTTP/1.1\r\nhost: sidecar\r\ncontent-type: application/json\r\ncontent-length: ${bytes}\r\n${extra}\r\n`;
    // The whole body would take 64 s: longer than the request timeout.
    const chunk = Buffer.alloc(Math.ceil(bytes / 256), "a");
    const deadline = Date.now() + scale.seconds * 1000;
    const sockets = Array.from({ length: scale.slowBodies }, () => {
      let sent = 0;
      return slowSocket(
        s.base,
        ATTACKER,
        head(signedHeader ? `stripe-signature: ${forgedHeader()}\r\n` : ""),
        (socket) => {
          if (Date.now() > deadline) return void socket.destroy();
          if (sent + chunk.length < bytes) {
            socket.write(chunk);
            sent += chunk.length;
          }
        },
        250,
      );
    });
    return whileHeld(s, sockets);
  };
  await attack(
    "slow-unsigned-bodies",
    `${scale.slowBodies} sockets from one address slowly sending unsigned 1 MiB payment bodies (4 KiB every 250 ms)`,
    slowBodies(false, 2 ** 20),
  );
  await attack(
    "slow-forged-bodies",
    `${scale.slowBodies} sockets from one address slowly sending 200 KiB payment bodies (under the body limit, 800 bytes every 250 ms) under a well-formed, fresh, forged signature header`,
    slowBodies(true, 200 * 1024),
  );

  await attack(
    "slow-headers",
    `${scale.slowHeaders} sockets from one address trickling header lines (one a second)`,
    async (s) => {
      const deadline = Date.now() + scale.seconds * 1000;
      const sockets = Array.from({ length: scale.slowHeaders }, () =>
        slowSocket(
          s.base,
          ATTACKER2,
          `POST ${PAY} HTTP/1.1\r\nhost: sidecar\r\n`,
          (socket) => (Date.now() > deadline ? socket.destroy() : void socket.write("x-pad: a\r\n")),
          1000,
        ),
      );
      return whileHeld(s, sockets);
    },
  );

  await attack(
    "forged-flood-then-genuine",
    `${scale.flood} forged payment deliveries and ${scale.flood} forged callbacks from the address the genuine senders share (as behind an ingress), then genuine deliveries from it`,
    async (s) => {
      const attacker: number[] = [];
      for (let i = 0; i < scale.flood; i++) {
        const ev = signed();
        attacker.push(
          (
            await post(
              `${s.base}${PAY}`,
              { ...ev.headers, "stripe-signature": forgedHeader() },
              ev.body,
              GENUINE,
            )
          ).status,
        );
      }
      const { job, providerJobId } = await finishedJob();
      const forged = new URL(jobs.url(job, s.base));
      forged.searchParams.set("token", randomBytes(32).toString("base64url"));
      for (let i = 0; i < scale.flood; i++)
        attacker.push(
          (
            await post(
              forged.toString(),
              { "content-type": "application/json" },
              JSON.stringify({ id: providerJobId, status: "COMPLETED" }),
              GENUINE,
            )
          ).status,
        );
      return { attacker, genuine: await genuine(s, "after, same address") };
    },
  );

  await attack(
    "adoption",
    "a callback on an unconfirmed submission's URL naming another tenant's finished provider job on the same endpoint, one naming `..`, and one on another unconfirmed submission's URL naming a provider job no MediaJob holds",
    async (s) => {
      const unconfirmed = await jobs.submitted(`unconfirmed-${randomBytes(4).toString("hex")}`, {
        webhook: false,
        record: false,
        hold: true,
      });
      const other = await tenantB.submitted(`tenant-b-${randomBytes(4).toString("hex")}`, { webhook: false });
      await tenantB.finished(other.job);
      const url = jobs.url(unconfirmed.job, s.base);
      const steal = await post(
        url,
        { "content-type": "application/json" },
        JSON.stringify({ id: other.providerJobId, status: "COMPLETED" }),
        ATTACKER,
      );
      const dots = await post(
        url,
        { "content-type": "application/json" },
        JSON.stringify({ id: "..", status: "COMPLETED" }),
        ATTACKER,
      );
      const after = await stack.api.get<MediaJob>(
        "mediajobs",
        stack.namespace,
        unconfirmed.job.metadata.name,
      );
      const adoptedOther = after?.status?.providerJobId === other.providerJobId;
      // A provider job no MediaJob records (its submitter's /run answer was lost too, or it is
      // another installation's): nothing refuses it, so its adoption must be marked and held.
      const orphan = await tenantB.intent(`orphan-${randomBytes(4).toString("hex")}`);
      const orphanProviderJobId = await tenantB.submit(orphan, { webhook: false });
      await tenantB.finished(orphan);
      const second = await jobs.submitted(`unconfirmed-${randomBytes(4).toString("hex")}`, {
        webhook: false,
        record: false,
        hold: true,
      });
      const unheld = await post(
        jobs.url(second.job, s.base),
        { "content-type": "application/json" },
        JSON.stringify({ id: orphanProviderJobId, status: "COMPLETED" }),
        ATTACKER,
      );
      const secondAfter = await stack.api.get<MediaJob>(
        "mediajobs",
        stack.namespace,
        second.job.metadata.name,
      );
      const orphanAdopted = secondAfter?.status?.providerJobId === orphanProviderJobId;
      const orphanMarked =
        secondAfter?.status?.conditions?.find((c) => c.type === "Submitted")?.reason === "AdoptedByCallback";
      // Held by the id each was sent with (no webhook): release() lets either key go.
      jobs.release(second.job);
      jobs.release(unconfirmed.job);
      await jobs.finished(unconfirmed.job);
      const own = await post(
        url,
        { "content-type": "application/json" },
        JSON.stringify({ id: unconfirmed.providerJobId, status: "COMPLETED" }),
        GENUINE,
      );
      const final = await stack.api.get<MediaJob>(
        "mediajobs",
        stack.namespace,
        unconfirmed.job.metadata.name,
      );
      return {
        attacker: [steal.status, dots.status, unheld.status],
        genuine: [
          {
            delivery: "the unconfirmed job's own callback, after",
            status: own.status,
            ...(own.json && { outcome: JSON.stringify(own.json) }),
          },
          ...(await genuine(s, "after")),
        ],
        notes: {
          otherTenantsJobAdopted: adoptedOther,
          otherTenantsJobRefused: !adoptedOther && steal.json?.applied === false,
          unrecordedJobAdoptedUnmarked: orphanAdopted && !orphanMarked,
          answerToTheUnrecorded: unheld.json,
          unrecordedJobAdoptedMarked: orphanAdopted && orphanMarked,
          answerToTheSteal: steal.json,
          answerToDots: dots.json,
          finalProviderJobIdIsOwn: final?.status?.providerJobId === unconfirmed.providerJobId,
          finalReason: final?.status?.conditions?.find((c) => c.type === "Ready")?.reason,
        },
      };
    },
  );
  return results;
}
