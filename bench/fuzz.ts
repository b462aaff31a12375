// make fuzz: the sidecar as a process (bench/fuzz/sidecar.ts: as the image runs it), on a local
// control plane, under generated requests and then under attacks.
//   tsx bench/fuzz.ts [--requests 100000] [--seed N] [--concurrency 32] [--attacks all|none]
//                     [--large-bodies 4] [--large-body-mib 16] [--slow-bodies 200] [--slow-headers 300]
//                     [--flood 60] [--attack-seconds 40]
// Generated requests (--requests 0 skips them): two sidecars with the rate limits out of the way,
// "open" gets only unauthenticated traffic (its namespace must stay untouched), "signed" gets
// validly signed or tokened requests with fuzzed bodies (any answer but a 5xx). Invariants: no 5xx,
// nothing changes in Kubernetes without a valid signature or token, memory stays flat.
// Attacks (bench/fuzz/attacks.ts), each on a fresh sidecar with the chart's settings: its peak RSS
// against the chart's memory limit, and whether genuine deliveries were answered 2xx.
// Results: bench/results/fuzz.json; docs/reliability.md says what a run reports.
import { randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { Pool } from "undici";
import { callbackToken, type CallbackTarget } from "../src/callback/token.js";
import { withPhaseConditions } from "../src/mediajob/conditions.js";
import { GpuProviderClient } from "../src/provider/index.js";
import { startSimulator } from "../tools/simulator/server.js";
import { API_VERSION, type MediaJob } from "../src/crds/index.js";
import { KubeApi } from "../src/k8s/api.js";
import { signStripePayload } from "../src/webhooks/signature.js";
import { REPO_ROOT, startControlPlane } from "../test/support/controlplane.js";
import { installCrds } from "../test/support/crds.js";
import { waitForServed } from "../test/support/kube.js";
import { startTestSimulator } from "../test/support/stack.js";
import { runAttacks, type AttackResult, type AttackScale } from "./fuzz/attacks.js";
import { startSidecar } from "./fuzz/sidecar.js";
import { round, rssMiB, stopChild } from "./lib.js";

const { values: args } = parseArgs({
  options: {
    requests: { type: "string", default: "100000" },
    seed: { type: "string" },
    concurrency: { type: "string", default: "32" },
    attacks: { type: "string", default: "all" },
    "large-bodies": { type: "string", default: "4" },
    "large-body-mib": { type: "string", default: "16" },
    "slow-bodies": { type: "string", default: "200" },
    "slow-headers": { type: "string", default: "300" },
    flood: { type: "string", default: "60" },
    "attack-seconds": { type: "string", default: "40" },
  },
});
const SCALE: AttackScale = {
  largeBodies: Number(args["large-bodies"]),
  largeBodyMiB: Number(args["large-body-mib"]),
  slowBodies: Number(args["slow-bodies"]),
  slowHeaders: Number(args["slow-headers"]),
  flood: Number(args.flood),
  seconds: Number(args["attack-seconds"]),
};
const TOTAL = Number(args.requests);
const SEED = args.seed !== undefined ? Number(args.seed) : randomBytes(4).readUInt32BE(0);
const CONCURRENCY = Number(args.concurrency);
const log = (s: string) => process.stderr.write(`${s}\n`);

/** mulberry32: small, seedable, good enough to pick cases. */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!,
    chance: (p: number) => next() < p,
    text: (n: number) => {
      let s = "";
      for (let i = 0; i < n; i++) s += String.fromCharCode(32 + Math.floor(next() * 95));
      return s;
    },
  };
}
type Rng = ReturnType<typeof rng>;

const PAY = "/webhooks/payment_provider";
const CB = "/reports/gpu_provider";
const SECRET = `whsec_fuzz_${randomBytes(8).toString("hex")}`;
const CALLBACK_SECRET = `cb_fuzz_${randomBytes(16).toString("hex")}`;
const BODY_LIMIT = 1024 * 1024;
const HUGE = Buffer.alloc(BODY_LIMIT + 4096, "a");

const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "APPLICATION/JSON",
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/jsonx",
  "",
  "application/json; charset=utf-16",
  "*/*",
];

function deeplyNested(depth: number, open: string, close: string): string {
  return open.repeat(depth) + close.repeat(depth);
}

/** A body: malformed, odd, huge, deeply nested, or plausible. */
function fuzzBody(r: Rng): Buffer {
  switch (r.int(12)) {
    case 0:
      return Buffer.from(r.text(r.int(200)));
    case 1:
      return Buffer.from('{"id": "evt_1", "type": ');
    case 2:
      return Buffer.from(deeplyNested(1 + r.int(20_000), "[", "]"));
    case 3:
      return Buffer.from(deeplyNested(1 + r.int(5_000), '{"a":', "}").replace(/}$/, "1}"));
    case 4:
      return r.chance(0.05) ? HUGE : Buffer.from(`{"pad":"${"x".repeat(r.int(64 * 1024))}"}`);
    case 5:
      return Buffer.from('{"__proto__":{"polluted":true},"id":"evt_p","type":"invoice.paid","created":1}');
    case 6:
      return Buffer.from(JSON.stringify({ id: r.int(1000), type: null, created: "yesterday" }));
    case 7:
      return Buffer.from([0xff, 0xfe, 0x00, 0x7b, 0x22, 0xc3, 0x28]);
    case 8:
      return Buffer.alloc(0);
    case 9:
      return Buffer.from(
        JSON.stringify({
          id: `evt_${r.text(8)}`,
          object: "event",
          type: r.pick(["customer.subscription.updated", "invoice.paid", "customer.subscription.deleted"]),
          created: r.int(2_000_000_000),
          data: {
            object: {
              id: `sub_${r.int(50)}`,
              customer: r.pick([`cus_${r.int(50)}`, { id: `cus_${r.int(50)}` }, 7, null]),
              status: r.pick(["active", "unpaid", "exploded", "", 3]),
            },
          },
        }),
      );
    case 10:
      return Buffer.from(
        JSON.stringify({ id: `job-${r.int(5)}`, status: r.pick(["COMPLETED", "FAILED", "BOGUS", 1]) }),
      );
    default:
      return Buffer.from(JSON.stringify({ nested: Array.from({ length: r.int(2000) }, (_, i) => ({ i })) }));
  }
}

/** A Stripe-Signature header that is not a valid signature of this body now. */
function badSignature(r: Rng, body: Buffer): string | undefined {
  const t = Math.floor(Date.now() / 1000);
  const hex = () => randomBytes(32).toString("hex");
  switch (r.int(10)) {
    case 0:
      return undefined;
    case 1:
      return "";
    case 2:
      return `t=${t},${Array.from({ length: 1 + r.int(400) }, () => `v1=${hex()}`).join(",")}`;
    case 3:
      return signStripePayload(body, "whsec_wrong", t);
    case 4:
      return signStripePayload(body, SECRET, t - 3600); // stale
    case 5:
      return signStripePayload(body, SECRET, t).slice(0, 20 + r.int(40)); // truncated
    case 6:
      return encodeURIComponent(signStripePayload(body, SECRET, t)); // percent-encoded
    case 7:
      return `t=${t},t=${t},v1=${hex()}`;
    case 8:
      return r.text(r.int(300));
    default:
      // Signed over different bytes.
      return signStripePayload(Buffer.concat([body, Buffer.from(" ")]), SECRET, t);
  }
}

/** What a callback URL names for the fuzz's target job in a namespace (its uid is known once created). */
const targets = new Map<string, CallbackTarget>();
const SUBMISSION = "fuzz-submission";

function callbackQuery(t: CallbackTarget): URLSearchParams {
  return new URLSearchParams({
    ns: t.namespace,
    name: t.name,
    uid: t.uid,
    job: t.jobId,
    attempt: String(t.attempt),
    sub: t.submission,
  });
}

/** A callback query whose token is not valid for the job it names. */
function badCallbackQuery(r: Rng, ns: string): string {
  const t = targets.get(ns)!;
  const good = callbackToken(CALLBACK_SECRET, t);
  const q = callbackQuery(t);
  switch (r.int(10)) {
    case 0:
      return q.toString(); // no token
    case 1:
      q.set("token", good.slice(0, r.int(good.length)));
      return q.toString();
    case 2: {
      // Every character percent-encoded twice: one decoding leaves "%76%38..." (a single
      // encoding would decode to the valid token, which is then authentic, not fuzz).
      const twice = [...good].map((c) => `%25${c.charCodeAt(0).toString(16).padStart(2, "0")}`).join("");
      return `${q.toString()}&token=${twice}`;
    }
    case 3:
      return `${q.toString()}&token=${good}&token=${good}`; // repeated
    case 4:
      q.set("token", good);
      q.set("job", `${t.jobId}-other`); // a valid token for another job id
      return q.toString();
    case 5:
      q.set("token", r.text(r.int(300)));
      return q.toString();
    case 6:
      return `token=${good}`; // the other fields missing
    case 7:
      q.set("token", callbackToken(CALLBACK_SECRET, { ...t, attempt: t.attempt + 1 }));
      return q.toString(); // a token for another attempt than the URL names
    case 8:
      q.set("token", callbackToken(CALLBACK_SECRET, { ...t, uid: `${t.uid}x` }));
      return q.toString(); // a token for another object
    default:
      q.set("token", `${good.slice(0, -1)}${good.endsWith("A") ? "B" : "A"}`);
      return q.toString();
  }
}

interface Outcome {
  status: number; // 0: the connection failed (counted apart)
}

/** One request; `slow` sends the body in chunks with pauses between them. */
function send(
  base: string,
  pool: Pool,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
  slow: boolean,
): Promise<Outcome> {
  if (!slow) {
    return pool
      .request({ method: "POST", path, headers, body })
      .then(async (res) => {
        await res.body.dump();
        return { status: res.statusCode };
      })
      .catch(() => ({ status: 0 }));
  }
  return new Promise((resolve) => {
    const req = httpRequest(
      `${base}${path}`,
      { method: "POST", headers: { ...headers, "content-length": String(body.length) } },
      (res) => {
        res.resume();
        res.on("end", () => resolve({ status: res.statusCode ?? 0 }));
      },
    );
    req.on("error", () => resolve({ status: 0 }));
    const chunks = 3;
    const size = Math.ceil(body.length / chunks) || 1;
    let i = 0;
    const next = () => {
      if (i * size >= body.length) return void req.end();
      req.write(body.subarray(i * size, (i + 1) * size));
      i++;
      setTimeout(next, 30);
    };
    next();
  });
}

// ---- The stack ----------------------------------------------------------------------------------

const cp = await startControlPlane({ dataDir: mkdtempSync(join(tmpdir(), "mo-fuzz-")) });
const kc = new KubeConfig();
kc.loadFromFile(cp.kubeconfig);
await installCrds(kc);
await waitForServed(kc);
const api = new KubeApi(kc);
const core = kc.makeApiClient(CoreV1Api);

// The provider: callbacks are confirmed with its status API, so the sidecars need one. The target
// jobs are held IN_PROGRESS there, so authentic fuzzed callbacks change nothing either.
const sim = await startSimulator({
  timeScale: 0.01,
  endpoints: [{ id: "fuzz-ep", name: "media-asr-fuzz", workersMax: 2 }],
});
const gpu = new GpuProviderClient({ apiUrl: sim.url, apiKey: "sim-key" });

async function processingJob(ns: string, name: string): Promise<MediaJob> {
  const created = await api.create<MediaJob>("mediajobs", ns, {
    apiVersion: API_VERSION,
    kind: "MediaJob",
    metadata: { name },
    spec: { workload: "asr", input: { audio: "s3://fuzz/a.wav" }, timeoutSeconds: 600 },
  });
  const jobId = `job-${name}-${ns}`;
  sim.holdJob(jobId);
  const submitted = await gpu.submit("fuzz-ep", { id: jobId, input: {} });
  targets.set(ns, {
    namespace: ns,
    name,
    uid: created.metadata.uid ?? "",
    jobId,
    attempt: 1,
    submission: SUBMISSION,
  });
  const now = new Date().toISOString();
  return api.replaceStatus<MediaJob>("mediajobs", {
    ...created,
    status: withPhaseConditions(
      {
        phase: "Processing",
        jobId,
        providerJobId: submitted.id,
        endpointId: "fuzz-ep",
        attempts: 1,
        submittedAt: now,
        submission: { attempt: 1, id: SUBMISSION, startedAt: now, state: "Accepted" },
      },
      1,
      now,
    ),
  });
}

async function sidecar(name: string, ns: string) {
  const s = await startSidecar(name, {
    KUBECONFIG: cp.kubeconfig,
    CALLBACK_SECRET,
    GPU_PROVIDER_API_URL: sim.url,
    GPU_PROVIDER_API_KEY: "sim-key",
    PAYMENT_PROVIDER_WEBHOOK_SECRET: SECRET,
    WATCH_NAMESPACE: ns,
    POD_NAMESPACE: ns,
    // Limits out of the way: the fuzz is about what reaches the handlers.
    WEBHOOKS_RATE_LIMITS: ["payment", "callbackGlobal", "callbackPerJob", "failuresPerSource"]
      .map((n) => `${n}=1000000/1000000`)
      .join(","),
    WEBHOOKS_UNVERIFIED_IN_FLIGHT_PER_SOURCE: "100000",
    WEBHOOKS_UNVERIFIED_IN_FLIGHT: "100000",
    WEBHOOKS_MAX_CONNECTIONS_PER_SOURCE: "100000",
    // The fuzz's oversized bodies are 1 MiB and a bit: judged by the same limit as before.
    WEBHOOKS_PAYMENT_BODY_LIMIT_KIB: String(BODY_LIMIT / 1024),
  });
  return { child: s.child, base: s.base, pool: new Pool(s.base, { connections: CONCURRENCY }) };
}

const results: Record<string, unknown> = { date: new Date().toISOString(), seed: SEED, requests: TOTAL };
const r = rng(SEED);
let failed = false;
const invariants: Record<string, boolean> = {};
try {
  if (TOTAL > 0) {
    const openNs = "fuzz-open";
    const signedNs = "fuzz-signed";
    for (const ns of [openNs, signedNs]) await core.createNamespace({ body: { metadata: { name: ns } } });
    const openJob = await processingJob(openNs, "target");
    await processingJob(signedNs, "target");
    const open = await sidecar("fuzz-open", openNs);
    const signed = await sidecar("fuzz-signed", signedNs);

    const codes = { open: new Map<number, number>(), signed: new Map<number, number>() };
    const rss: Array<{ done: number; open: number; signed: number }> = [];
    let done = 0;
    let next = 0;
    const started = Date.now();
    const sampler = setInterval(() => {
      rss.push({ done, open: round(rssMiB(open.child.pid!)), signed: round(rssMiB(signed.child.pid!)) });
    }, 2000);

    const one = async (): Promise<void> => {
      const authentic = r.chance(0.3);
      const payment = r.chance(0.5);
      const target = authentic ? signed : open;
      const ns = authentic ? signedNs : openNs;
      const body = fuzzBody(r);
      const ct = r.chance(0.7) ? "application/json" : r.pick(CONTENT_TYPES);
      const headers: Record<string, string> = ct ? { "content-type": ct } : {};
      if (r.chance(0.1)) headers["x-forwarded-for"] = r.text(20);
      let path: string;
      if (payment) {
        path = PAY;
        const sig = authentic
          ? signStripePayload(body, SECRET, Math.floor(Date.now() / 1000))
          : badSignature(r, body);
        if (sig !== undefined) headers["stripe-signature"] = sig;
      } else if (authentic) {
        const q = callbackQuery(targets.get(ns)!);
        q.set("token", callbackToken(CALLBACK_SECRET, targets.get(ns)!));
        path = `${CB}?${q.toString()}`;
      } else {
        path = `${CB}?${badCallbackQuery(r, ns)}`;
      }
      const slow = r.chance(0.002);
      const { status } = await send(target.base, target.pool, path, headers, body, slow);
      const m = authentic ? codes.signed : codes.open;
      m.set(status, (m.get(status) ?? 0) + 1);
      done++;
      if (done % 10_000 === 0)
        log(`  ${done} requests, ${Math.round(done / ((Date.now() - started) / 1000))}/s`);
    };
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < TOTAL) {
          next++;
          await one();
        }
      }),
    );
    clearInterval(sampler);
    rss.push({ done, open: round(rssMiB(open.child.pid!)), signed: round(rssMiB(signed.child.pid!)) });
    const seconds = (Date.now() - started) / 1000;

    const fivexx = (m: Map<number, number>) =>
      [...m].filter(([c]) => c >= 500).reduce((s, [, n]) => s + n, 0);
    const after = await api.get<MediaJob>("mediajobs", openNs, "target");
    const openChanges =
      (await api.list("paymentevents", openNs)).items.length +
      (await api.list("billingaccounts", openNs)).items.length +
      (after?.metadata.resourceVersion === openJob.metadata.resourceVersion ? 0 : 1);
    // Memory: after a warm-up (the first quarter of the samples), the last quarter's mean against
    // the second quarter's: flat means no growth with the number of requests.
    const q = (xs: number[], from: number, to: number) => {
      const part = xs.slice(Math.floor(xs.length * from), Math.max(Math.floor(xs.length * to), 1));
      return round(part.reduce((s, x) => s + x, 0) / Math.max(1, part.length));
    };
    const memory = (key: "open" | "signed") => {
      const xs = rss.map((s) => s[key]);
      return { earlyMiB: q(xs, 0.25, 0.5), lateMiB: q(xs, 0.75, 1), maxMiB: Math.max(...xs) };
    };
    Object.assign(results, {
      seconds: round(seconds),
      requestsPerSecond: round(done / seconds),
      unauthenticated: {
        requests: [...codes.open.values()].reduce((s, n) => s + n, 0),
        statusCodes: Object.fromEntries([...codes.open].sort(([a], [b]) => a - b)),
        answers5xx: fivexx(codes.open),
        answers2xx: [...codes.open].filter(([c]) => c >= 200 && c < 300).reduce((n, [, k]) => n + k, 0),
        stateChanges: openChanges,
        memory: memory("open"),
      },
      authentic: {
        requests: [...codes.signed.values()].reduce((s, n) => s + n, 0),
        statusCodes: Object.fromEntries([...codes.signed].sort(([a], [b]) => a - b)),
        answers5xx: fivexx(codes.signed),
        memory: memory("signed"),
      },
      rssSamples: rss,
    });
    const u = results.unauthenticated as {
      answers5xx: number;
      answers2xx: number;
      stateChanges: number;
      memory: { earlyMiB: number; lateMiB: number };
    };
    const a = results.authentic as { answers5xx: number; memory: { earlyMiB: number; lateMiB: number } };
    // Flat: the late mean within 25 % (and 32 MiB) of the early one.
    const flat = (m: { earlyMiB: number; lateMiB: number }) =>
      m.lateMiB <= Math.max(m.earlyMiB * 1.25, m.earlyMiB + 32);
    Object.assign(invariants, {
      no5xx: u.answers5xx === 0 && a.answers5xx === 0,
      noStateChangeWithoutCredentials: u.stateChanges === 0,
      noAcceptanceWithoutCredentials: u.answers2xx === 0,
      memoryFlat: flat(u.memory) && flat(a.memory),
    });
    await Promise.all([open.pool.close(), signed.pool.close()]);
    await Promise.all([stopChild(open.child), stopChild(signed.child)]);
  }

  if (args.attacks !== "none") {
    const attackNs = "fuzz-attacks";
    const otherNs = "fuzz-attacks-tenant-b";
    for (const ns of [attackNs, otherNs]) await core.createNamespace({ body: { metadata: { name: ns } } });
    const attackSim = await startTestSimulator();
    try {
      const attacks: AttackResult[] = await runAttacks(
        {
          api,
          sim: attackSim,
          kubeconfig: cp.kubeconfig,
          namespace: attackNs,
          otherNamespace: otherNs,
          paymentSecret: SECRET,
          callbackSecret: CALLBACK_SECRET,
        },
        SCALE,
      );
      results.attackScale = SCALE;
      results.attacks = attacks;
      Object.assign(invariants, {
        attacksWithinMemoryLimit: attacks.every((x) => x.withinLimit),
        attacksGenuineAnswered2xx: attacks.every((x) => x.allGenuine2xx),
        // The other tenant's recorded job is refused; a job nothing records may be adopted only
        // marked AdoptedByCallback (its next step held): another tenant's output is never fed
        // forward silently.
        noAdoptionOfAnotherTenantsJob: attacks
          .filter((x) => x.name === "adoption")
          .every((x) => x.notes?.otherTenantsJobRefused === true),
        noUnmarkedAdoption: attacks.every((x) => x.notes?.unrecordedJobAdoptedUnmarked !== true),
      });
    } finally {
      await attackSim.close();
    }
  }
  results.invariants = invariants;
  failed = !Object.values(invariants).every(Boolean);
} finally {
  await sim.close();
  await cp.stop();
}
mkdirSync(join(REPO_ROOT, "bench/results"), { recursive: true });
writeFileSync(join(REPO_ROOT, "bench/results/fuzz.json"), `${JSON.stringify(results, null, 2)}\n`);
const { rssSamples: _samples, ...shown } = results;
log(JSON.stringify(shown, null, 2));
log(`seed ${SEED}: ${failed ? "INVARIANT BROKEN" : "all invariants hold"} (bench/results/fuzz.json)`);
process.exit(failed ? 1 : 0);
