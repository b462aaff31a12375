// make chaos: the whole stack as real processes on the local control plane, under combined faults,
// then a check of the guarantees (docs/reliability.md, docs/controller.md "At most once").
//
//   tsx bench/chaos.ts [--jobs 2000] [--seed S] [--out bench/results/chaos.json] [--drain-seconds 300]
//                      [--unconfirmed-policy fail|resubmit]
//
// Faults: the provider simulator in RunPod mode (client ids ignored) drops, duplicates, reorders
// and delays callbacks, answers 5xx, loses /run answers after accepting the job, fails jobs, and
// has its endpoints' workersMax lowered behind the operator's back; two controller replicas with
// leader election whose leader is SIGKILLed at random points; two sidecars, one SIGKILLed once;
// the control plane stopped and started again on its data directory; payment events delivered out
// of order, each delivery posted 20 times at once across both sidecars; metered customers whose
// usage goes to a payment provider that fails and loses answers; customers on plans that cap their
// GPU seconds and their jobs at once, held at the cap, then upgraded; a burst of low-priority jobs
// followed by another account's normal jobs; a burst created while no leader runs, so the next
// leader starts with a backlog; media jobs through a real S3-compatible store behind a front that
// answers 5xx, holds PUTs, refuses presigned requests as expired and goes down for a while
// (bench/chaos/storage.ts). Exit 1 when an invariant
// is broken; the seed is printed first, so a failure can be replayed.
import { randomBytes } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { CoordinationV1Api, KubeConfig } from "@kubernetes/client-node";
import type { GpuEndpoint } from "../src/crds/gpuendpoint.js";
import type { BillingAccount } from "../src/crds/billingaccount.js";
import { checkCost, providerTotalMicros, unallocatedFromMetrics } from "./chaos/cost.js";
import type { MediaJob } from "../src/crds/mediajob.js";
import { KubeApi } from "../src/k8s/api.js";
import { ACCEPTED_PROVIDER_JOB_ANNOTATION, adoptedWithoutEvidence } from "../src/callback/adoption.js";
import { providerRequestId } from "../src/mediajob/job.js";
import { isFirstStep } from "../src/mediajob/pipeline.js";
import { isAlreadyExists } from "../src/k8s/errors.js";
import { freePort } from "../scripts/devstack-lib.js";
import { REPO_ROOT } from "../test/support/controlplane.js";
import { installCrds } from "../test/support/crds.js";
import { waitForServed } from "../test/support/kube.js";
import { checkJobs, isTerminal, listJobs, outstanding, planJobs } from "./chaos/jobs.js";
import {
  checkMetering,
  createMeteredAccounts,
  meterBacklog,
  meteredCustomers,
  METER,
  type EndedProviderJob,
  type MeterEventRecord,
} from "./chaos/metering.js";
import { checkPayments, planPayments, sendPayments, type PaymentTraffic } from "./chaos/payments.js";
import { ControlPlane, Supervised, type ControlPlaneAddress } from "./chaos/processes.js";
import { apiserverFront, serviceFront } from "./chaos/proxies.js";
import { INVARIANTS, table, type ChaosResult } from "./chaos/report.js";
import { Rng } from "./chaos/rng.js";
import {
  BACKLOG_ACCOUNT,
  LOW_PRIORITY_ACCOUNT,
  LOW_PRIORITY_WORKLOAD,
  checkWaitBound,
  createBurstAccounts,
  planBacklogBurst,
  planBursts,
  planLowPriorityBursts,
  type Outage,
  type PlannedBurst,
} from "./chaos/accounts.js";
import {
  chaosPlans,
  checkPlans,
  deliver,
  planCustomers,
  planCustomerBursts,
  PlanLimits,
  PRICES,
  subscriptionEvent,
} from "./chaos/plans.js";
import { changeBinding } from "../src/cli/bind.js";
import { openStore } from "../src/storage/index.js";
import { startS3Server } from "../test/support/s3server.js";
import { storeEnv } from "../test/support/s3store.js";
import { checkOrphans, checkStorage, chaosInput, storeFront, withMedia } from "./chaos/storage.js";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "2000" },
    seed: { type: "string" },
    out: { type: "string", default: "bench/results/chaos.json" },
    "drain-seconds": { type: "string", default: "300" },
    "keep-logs": { type: "boolean", default: false },
    "unconfirmed-policy": { type: "string", default: "fail" },
  },
});
const JOBS = Number(values.jobs);
const SEED = values.seed === undefined ? 1 + Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
const POLICY = values["unconfirmed-policy"];
if (
  !Number.isInteger(JOBS) ||
  JOBS < 1 ||
  !Number.isInteger(SEED) ||
  (POLICY !== "fail" && POLICY !== "resubmit")
) {
  console.error(
    "usage: tsx bench/chaos.ts [--jobs N] [--seed S] [--out FILE] [--drain-seconds N] [--unconfirmed-policy fail|resubmit]",
  );
  process.exit(2);
}
const NAMESPACE = "default";
const ENV_NAME = "chaos";
const WORKERS = 6;
const LEASE = "media-orchestrator-controller";
// Leader kills: at least 5 in the default run, at least 2 in a small one.
const LEADER_KILLS = Math.max(2, Math.round(JOBS / 400));
// Jobs not yet terminal at once: the backlog the stack carries while the faults run.
const WINDOW = Math.min(150, Math.max(30, Math.round(JOBS / 4)));
// Disruptions are at least this far apart; a leader kill also waits until a leader was elected
// after the previous one (the Lease names a replica that is running).
const DISRUPTION_GAP_MS = 5_000;
// Customers on plans: each creates this many jobs at once, about 2.5 GPU seconds each, under a
// plan capped at one GPU second per job (so it reaches the cap about 40 % in), and is held at
// the cap this long before it upgrades.
const PLAN_CUSTOMERS = 2;
const PLAN_JOBS_PER_CUSTOMER = Math.max(20, Math.round(JOBS / 40));
const PLAN_CAP_SECONDS = PLAN_JOBS_PER_CUSTOMER;
const PLAN_HOLD_MS = 20_000;

const say = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0)}s`;

say(
  `chaos: seed ${SEED}, ${JOBS} jobs, unconfirmed submissions: ${POLICY} ` +
    `(replay: make chaos CHAOS_ARGS="--jobs ${JOBS} --seed ${SEED}${POLICY === "fail" ? "" : ` --unconfirmed-policy ${POLICY}`}")`,
);
const rng = new Rng(SEED);
const workDir = join(REPO_ROOT, ".local", "chaos", `seed-${SEED}-${process.pid}`);
const logDir = join(workDir, "logs");
rmSync(workDir, { recursive: true, force: true });
mkdirSync(logDir, { recursive: true });

// ---- control plane, behind a front that keeps the clients' credentials across its restart ----
const controlPlane = new ControlPlane(
  join(workDir, "controlplane"),
  await freePort(),
  join(logDir, "controlplane.log"),
);
let apiserver: ControlPlaneAddress | undefined = await controlPlane.start();
const front = await apiserverFront(() => apiserver);
const kubeconfig = join(workDir, "kubeconfig");
writeFileSync(
  kubeconfig,
  [
    "apiVersion: v1",
    "kind: Config",
    // Plain HTTP on loopback to the front; client-node accepts http:// only with this flag set.
    "clusters: [{name: chaos, cluster: {server: '" + front.url + "', insecure-skip-tls-verify: true}}]",
    "users: [{name: chaos, user: {}}]",
    "contexts: [{name: chaos, context: {cluster: chaos, user: chaos, namespace: " + NAMESPACE + "}}]",
    "current-context: chaos",
    "",
  ].join("\n"),
);
const kc = new KubeConfig();
kc.loadFromFile(kubeconfig);
await installCrds(kc);
await waitForServed(kc);
const api = new KubeApi(kc);
const leases = kc.makeApiClient(CoordinationV1Api);
say(`${elapsed()} control plane up (${apiserver.url})`);

// ---- the provider simulator: RunPod mode plus the faults ----
const simPort = await freePort();
const simulatorUrl = `http://127.0.0.1:${simPort}`;
const faults = {
  dropCallback: 0.2,
  duplicateCallback: 0.3,
  reorderCallbacks: true,
  delayCallbackMs: 2_000,
  serverErrors: 0.05,
  lostRunAnswers: 0.02,
  failJob: 0.05,
  // The payment provider's meters: 5xx (half of them after recording the event) and lost answers.
  paymentServerErrors: 0.1,
  lostMeterEventAnswers: 0.1,
};
const simConfig = join(workDir, "simulator.json");
writeFileSync(
  simConfig,
  JSON.stringify({
    port: simPort,
    seed: SEED,
    timeScale: 0.05,
    coldStartMs: 1_000,
    executionMs: 2_000,
    endpoints: ["asr", "tts", "render"].map((w) => ({
      name: `media-${w}-${ENV_NAME}`,
      workload: w,
      workersMax: WORKERS,
    })),
    faults,
    meters: [METER],
  }),
);
const simulator = new Supervised(
  "simulator",
  ["tools/simulator/main.ts", "--config", simConfig, "--log-level", "warn"],
  () => ({}),
  logDir,
  { restart: false }, // its counts are the evidence: a restart would lose them
);
simulator.start();
const sim = async <T>(path: string, init?: RequestInit): Promise<T> => {
  const res = await fetch(`${simulatorUrl}/_sim/${path}`, { ...init, signal: AbortSignal.timeout(30_000) });
  if (!res.ok) throw new Error(`simulator ${path}: ${res.status}`);
  return (await res.json()) as T;
};
await waitUntil("the simulator", async () => (await fetch(`${simulatorUrl}/_sim/stats`)).ok);

// ---- the object store (a real S3-compatible server) behind its faulty front ----
const STORE_BUCKET = "chaos-media";
const s3 = await startS3Server();
const directStore = (await openStore(storeEnv(s3, STORE_BUCKET)))!;
await directStore.client.createBucket();
const mediaInput = chaosInput(NAMESPACE);
await directStore.client.put(mediaInput.key, mediaInput.bytes);
const storeFaults = { serverErrors: 0.03, expiredUrls: 0.02, slowPuts: 0.1, slowPutMs: 1_500 };
const storage = await storeFront(s3.endpoint, new Rng(SEED ^ 0x3c6ef372), storeFaults);

// ---- two sidecars behind their Service, two controller replicas ----
const webhookSecret = `whsec_${randomBytes(18).toString("hex")}`;
const sidecarPorts = [await freePort(), await freePort()];
const sidecarUrls = sidecarPorts.map((p) => `http://127.0.0.1:${p}`);
const sidecars: Supervised[] = [];
const service = await serviceFront(() =>
  sidecars.flatMap((s, i) => (s.pid === undefined ? [] : [sidecarUrls[i]!])),
);
const common: Record<string, string> = {
  KUBECONFIG: kubeconfig,
  GPU_PROVIDER_API_URL: simulatorUrl,
  GPU_PROVIDER_API_KEY: "sim-key",
  PAYMENT_PROVIDER_API_URL: simulatorUrl,
  PAYMENT_PROVIDER_API_KEY: "sim-payment-key",
  PAYMENT_PROVIDER_WEBHOOK_SECRET: webhookSecret,
  CALLBACK_BASE_URL: service.url,
  CALLBACK_SECRET: randomBytes(32).toString("hex"),
  MEDIA_ENV: ENV_NAME,
  MEDIA_ENDPOINT_PREFIX: "media",
  WATCH_NAMESPACE: NAMESPACE,
  POD_NAMESPACE: NAMESPACE,
  LEADER_ELECTION: "true",
  LEADER_ELECTION_NAMESPACE: NAMESPACE,
  LEADER_ELECTION_ID: LEASE,
  // The product's defaults: shorter leases make an overloaded machine's replicas lose the lease
  // on their own (and exit), which measures the machine rather than the product.
  LEADER_ELECTION_LEASE_DURATION_SECONDS: "15",
  LEADER_ELECTION_RENEW_DEADLINE_SECONDS: "10",
  LEADER_ELECTION_RETRY_PERIOD_SECONDS: "2",
  RESYNC_INTERVAL_SECONDS: "5",
  // The provider lowers workersMax every few seconds here: look for drift at every tick.
  PROVIDER_DRIFT_CHECK_SECONDS: "5",
  JOB_TIMEOUT_SECONDS: "15",
  // Longer than the simulated provider's callback window (3 attempts, 10 s apart at time scale
  // 0.05, plus the injected delay and reordering): a lost answer is given up on only when its
  // callback really never came.
  CALLBACK_CONFIRMATION_SECONDS: "15",
  UNCONFIRMED_SUBMISSION_POLICY: POLICY,
  MAX_CONCURRENT_RECONCILES: "16",
  // Plans, as the chart renders its `plans` value (MEDIA_PLANS, JSON keyed by price id).
  MEDIA_PLANS: JSON.stringify(chaosPlans(PLAN_CAP_SECONDS)),
  // The provider's bill read and allocated every 2 s (docs/design.md, "Cost allocation").
  COST_RECONCILE_INTERVAL_SECONDS: "2",
  // The run's own jobs name no account (the default account of fair share), in a namespace bound
  // to every customer of the run: allowed unbilled, as an operator may choose (docs/design.md,
  // "Tenancy"); the customers' jobs are checked against the binding.
  TENANCY_REQUIRE_ACCOUNT: "false",
  WEBHOOKS_HOST: "127.0.0.1",
  LOG_LEVEL: "info",
  // The media store, through its faulty front; the sweep often enough to be seen within the run.
  STORAGE_BUCKET: STORE_BUCKET,
  STORAGE_ENDPOINT: storage.url,
  STORAGE_REGION: s3.region,
  STORAGE_ADDRESSING: "path",
  STORAGE_CREDENTIALS: "keys",
  STORAGE_ACCESS_KEY_ID: s3.accessKeyId,
  STORAGE_SECRET_ACCESS_KEY: s3.secretAccessKey,
  STORAGE_SWEEP_INTERVAL_SECONDS: "10",
  STORAGE_ORPHAN_MIN_AGE_SECONDS: "5",
  // Stage cache entries expire within the run: the orphan check then sees every object go.
  STORAGE_CACHE_TTL_SECONDS: "20",
  // The simulator's hosted outputs are on 127.0.0.1.
  STORAGE_KEEP_ALLOW_PRIVATE: "true",
};
sidecarPorts.forEach((port, i) =>
  sidecars.push(
    new Supervised(
      `webhooks-${i}`,
      ["src/main.ts", "webhooks"],
      (n) => ({ ...common, WEBHOOKS_PORT: String(port), POD_NAME: `webhooks-${i}-${n}` }),
      logDir,
    ),
  ),
);
const controllerPorts = [await freePort(), await freePort()];
const controllers = controllerPorts.map(
  (port, i) =>
    new Supervised(
      `controller-${i}`,
      ["src/main.ts", "controller"],
      (n) => ({ ...common, CONTROLLER_METRICS_PORT: String(port), POD_NAME: `controller-${i}-${n}` }),
      logDir,
    ),
);
for (const p of [...sidecars, ...controllers]) p.start();
await waitUntil("both sidecars", async () => {
  for (const u of sidecarUrls) if (!(await fetch(`${u}/readyz`)).ok) return false;
  return true;
});
await waitUntil("a leader", async () => (await leader()) !== undefined);
for (const w of ["asr", "tts", "render"]) {
  await createOnce("gpuendpoints", {
    apiVersion: "media-orchestrator.io/v1alpha1",
    kind: "GpuEndpoint",
    metadata: { name: w },
    // The low-priority pattern's endpoint keeps a worker warm: low jobs run only on workers up
    // and free (they never make an endpoint scale), so they finish once the normal work is done.
    spec: { workload: w, minWorkers: w === LOW_PRIORITY_WORKLOAD ? 1 : 0, maxWorkers: WORKERS },
  });
}
await waitUntil("the three GpuEndpoints Ready", async () => {
  const { items } = await api.list<GpuEndpoint>("gpuendpoints", NAMESPACE);
  return (
    items.filter((e) => e.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"))
      .length === 3
  );
});
await createBurstAccounts(api, NAMESPACE, [PRICES.open]);
// The customers on plans subscribe to the capped plan: an event through the sidecars, as the
// payment provider sends it, whose price the sidecar records.
const planCustomerIds = planCustomers(SEED, PLAN_CUSTOMERS);
const toSidecars = () => sidecarUrls;
for (const customer of planCustomerIds) {
  const event = subscriptionEvent(customer, PRICES.capped, 0, Math.floor(Date.now() / 1000) - 60);
  const giveUp = Date.now() + 60_000;
  if (!(await deliver(event, toSidecars, webhookSecret, () => Date.now() < giveUp)))
    throw new Error(`chaos: ${customer}'s subscription was not delivered in 60 s; logs in ${logDir}`);
}
say(`${elapsed()} stack up: simulator, 2 sidecars, 2 controllers (leader ${(await leader())?.name})`);

// ---- the work, the payment traffic and the faults, together ----
// Customers whose jobs are metered: their accounts active from the start.
const customers = meteredCustomers(SEED, Math.max(2, Math.min(5, Math.round(JOBS / 100))));
await createMeteredAccounts(api, NAMESPACE, customers, [PRICES.open]);
const planned = planJobs(rng, JOBS, customers);
// A quarter of the single-step jobs move media (from a generator of their own: older seeds replay).
const mediaPlan = withMedia(new Rng(SEED ^ 0x7f4a7c15), planned, 0.25, {
  uri: `s3://${STORE_BUCKET}/${mediaInput.key}`,
  sha256: mediaInput.sha256,
  size: mediaInput.bytes.length,
});
const pipelines = planned.filter((j) => j.pipeline).length;
// Two more accounts' bursts (fair share), from a generator of their own: the run's other draws,
// and so the replay of an older seed, stay as they were.
// Then the low-priority pattern and the burst a new leader finds waiting, from generators of
// their own too. Low jobs never make an endpoint scale (RunPod's policy.lowPriority), so once the
// run's normal work is over they go one at a time on the endpoint's one warm worker: the burst
// is at most 30, which that worker runs within the run's deadline.
const LOW_PRIORITY_BURST = Math.min(30, Math.max(10, Math.round(JOBS / 20)));
const bursts = [
  ...planBursts(new Rng(SEED ^ 0x5f3759df), Math.max(10, Math.round(JOBS / 10))),
  ...planLowPriorityBursts(new Rng(SEED ^ 0x1b873593), LOW_PRIORITY_BURST),
];
const backlogBurst = planBacklogBurst(new Rng(SEED ^ 0x68e31da4), Math.max(10, Math.round(JOBS / 10)));
/** Jobs of the backlog burst created while no replica led (the lease not yet taken over). */
let backlogWithoutLeader = 0;
// The namespace bills the run's customers, as an operator binds it (kubectl media bind).
for (const customer of new Set([
  ...planCustomerIds,
  ...customers,
  ...bursts.map((b) => b.account),
  BACKLOG_ACCOUNT,
]))
  await changeBinding(api, NAMESPACE, customer, "bind");
const burstJobs = bursts.reduce((n, b) => n + b.jobs.length, 0) + backlogBurst.jobs.length;
let burstsCreated = 0;
// The bursts of the customers on capped plans, from a generator of their own too.
const cappedBursts = planCustomerBursts(new Rng(SEED ^ 0x2545f491), planCustomerIds, PLAN_JOBS_PER_CUSTOMER);
const cappedJobs = cappedBursts.reduce((n, b) => n + b.jobs.length, 0);
let cappedJobsCreated = 0;
/** Outages injected (leader kills, the control plane's restart), for the wait bound. */
const outages: Outage[] = [];
const expectedMediaJobs = JOBS + 2 * pipelines + burstJobs + cappedJobs;
const payments = planPayments(rng, SEED, Math.max(10, Math.round(JOBS / 20)));
let terminal = 0;
let terminalTopLevel = 0;
let created = 0;
let settled = false;
const progress = () => terminal / expectedMediaJobs;
const deadlineAfterCreation = () => Number(values["drain-seconds"]) * 1000;
let creationDone = Infinity;
const deadline = () => creationDone + deadlineAfterCreation();

const counts = { controllerKills: 0, sidecarKills: 0, workersMaxLowered: 0 };

async function observe(): Promise<void> {
  while (!settled) {
    const listStarted = Date.now();
    try {
      const jobs = await listJobs(api, NAMESPACE);
      planLimits.sawJobs(jobs);
      await acceptAdoptions(jobs);
      terminal = jobs.filter(isTerminal).length;
      terminalTopLevel = jobs.filter((j) => isTerminal(j) && isFirstStep(j)).length;
      const left = outstanding(jobs);
      if (
        created === JOBS &&
        burstsCreated === burstJobs &&
        cappedJobsCreated === cappedJobs &&
        jobs.length >= JOBS + burstJobs + cappedJobs &&
        left.unfinished.length + left.missingSteps.length === 0
      )
        settled = true;
    } catch {
      // the control plane is restarting
    }
    // Every 2 s, or less often when a list is slow: watching must not be the load.
    if (!settled) await sleep(Math.max(2_000, 3 * (Date.now() - listStarted)));
  }
}

/**
 * The runbook's step for a result adopted from a callback alone (MediaOrchestratorCallbackAdoptionHeld):
 * look the provider job up at the provider (here the simulator's record of what was submitted for
 * it), and accept it when it is the job's own submission. One that is not is counted, never accepted.
 */
const adoptions = new Map<string, "accepted" | "another job">();
async function acceptAdoptions(jobs: MediaJob[]): Promise<void> {
  for (const job of jobs) {
    const uid = job.metadata.uid!;
    const providerJobId = job.status?.providerJobId;
    if (!providerJobId || adoptions.has(uid) || !adoptedWithoutEvidence(job)) continue;
    const seen = await sim<{ key: string }>(`jobs/${providerJobId}/key`).catch(() => undefined);
    if (!seen) continue; // not known (yet): looked at again next time
    // The provider's record names our job: by the id we sent, or (a provider that ignores it, as
    // RunPod does) by the job id in the webhook URL, the same for every attempt of the job.
    const jobId = job.status!.jobId!;
    const own = seen.key === jobId || seen.key === providerRequestId(job, job.status, jobId);
    adoptions.set(uid, own ? "accepted" : "another job");
    if (!own) continue;
    await api
      .mergePatch("mediajobs", NAMESPACE, job.metadata.name!, {
        metadata: {
          resourceVersion: job.metadata.resourceVersion,
          annotations: { [ACCEPTED_PROVIDER_JOB_ANNOTATION]: providerJobId },
        },
      })
      .catch(() => adoptions.delete(uid)); // changed meanwhile, or the control plane restarts
  }
}

async function create(): Promise<void> {
  for (const job of planned) {
    while (created - terminalTopLevel >= WINDOW) await sleep(200);
    await createOnce("mediajobs", job.body);
    created++;
  }
  creationDone = Date.now();
  say(`${elapsed()} all ${JOBS} jobs created`);
}

/** Each account's burst, all at once, when the run reaches its point. */
async function createBursts(list: PlannedBurst[], created: (n: number) => void): Promise<void> {
  for (const b of [...list].sort((x, y) => x.atProgress - y.atProgress)) {
    while (progress() < b.atProgress && !settled) await sleep(250);
    await Promise.all(b.jobs.map((j) => createOnce("mediajobs", j.body)));
    created(b.jobs.length);
    say(`${elapsed()} burst of ${b.jobs.length} jobs for account ${b.account}`);
  }
}

/** Customers on plans: seen at the cap, held there, then upgraded by a subscription event. */
const planLimits = new PlanLimits({
  api,
  namespace: NAMESPACE,
  customers: planCustomerIds,
  capSeconds: PLAN_CAP_SECONDS,
  holdMs: PLAN_HOLD_MS,
  upgrade: async (customer) => {
    const event = subscriptionEvent(customer, PRICES.upgraded, 1, Math.floor(Date.now() / 1000));
    await deliver(event, toSidecars, webhookSecret, () => !settled);
    say(`${elapsed()} ${customer} held at its plan's cap for ${PLAN_HOLD_MS / 1000} s: upgraded`);
  },
});

async function leader(): Promise<{ name: string; replica: Supervised } | undefined> {
  const lease = await leases
    .readNamespacedLease({ name: LEASE, namespace: NAMESPACE })
    .catch(() => undefined);
  const holder = lease?.spec?.holderIdentity;
  if (!holder) return undefined;
  const replica = controllers.find((c) => c.pid !== undefined && holder.startsWith(`${c.name}-${c.starts}_`));
  return replica && { name: holder, replica };
}

/** Leader kills, one sidecar kill and one control plane restart at random points of the run. */
async function disrupt(): Promise<void> {
  type Disruption = { at: number; what: "leader" | "sidecar" | "controlplane" };
  const plan: Disruption[] = [
    ...Array.from({ length: LEADER_KILLS }, (_, i): Disruption => ({
      at: (i + rng.between(0.3, 0.9)) / (LEADER_KILLS + 1),
      what: "leader",
    })),
    { at: rng.between(0.25, 0.45), what: "sidecar" as const },
    { at: rng.between(0.45, 0.65), what: "controlplane" as const },
  ].sort((a, b) => a.at - b.at);
  let last = 0;
  for (const d of plan) {
    // Waits for its point of the run (or for the end of the work: a disruption is never skipped).
    while (!(progress() >= d.at || settled) || Date.now() - last < DISRUPTION_GAP_MS) await sleep(250);
    if (d.what === "leader") {
      let l = await leader();
      while (l === undefined) {
        await sleep(250);
        l = await leader();
      }
      const killedAt = Date.now();
      await l.replica.kill();
      counts.controllerKills++;
      // A successor waits out the lease (15 s), then a retry period and a tick.
      outages.push({ from: killedAt, to: Date.now(), recoveryMs: 15_000 + 2_000 + 5_000 });
      say(`${elapsed()} SIGKILL leader ${l.name} (progress ${(progress() * 100).toFixed(0)} %)`);
      // The first kill: a burst lands while no replica leads, so the next leader starts with it.
      if (counts.controllerKills === 1) {
        await Promise.all(backlogBurst.jobs.map((j) => createOnce("mediajobs", j.body)));
        burstsCreated += backlogBurst.jobs.length;
        if ((await leader()) === undefined) backlogWithoutLeader = backlogBurst.jobs.length;
        say(
          `${elapsed()} burst of ${backlogBurst.jobs.length} jobs for account ${BACKLOG_ACCOUNT} while no leader runs`,
        );
      }
    } else if (d.what === "sidecar") {
      const victim = rng.pick(sidecars);
      await victim.kill();
      counts.sidecarKills++;
      say(`${elapsed()} SIGKILL sidecar ${victim.name} (progress ${(progress() * 100).toFixed(0)} %)`);
    } else {
      say(`${elapsed()} control plane: stop (progress ${(progress() * 100).toFixed(0)} %)`);
      apiserver = undefined;
      const stoppedAt = Date.now();
      apiserver = await controlPlane.restart(rng.between(2_000, 5_000));
      // The watches relist, the leader renews or is replaced: up to a lease and a tick more.
      outages.push({ from: stoppedAt, to: Date.now(), recoveryMs: 15_000 + 2_000 + 5_000 });
      say(`${elapsed()} control plane: started again on its data directory`);
    }
    last = Date.now();
  }
}

/** The provider lowers an endpoint's workersMax on its own, every few seconds. */
async function drift(): Promise<void> {
  while (!settled) {
    await sleep(rng.between(4_000, 12_000));
    if (settled) return;
    try {
      const { endpoints } = await sim<{ endpoints: Array<{ id: string; name: string }> }>("endpoints");
      const ep = rng.pick(endpoints);
      await sim(`endpoints/${ep.id}`, { method: "PUT", body: JSON.stringify({ workersMax: 1 }) });
      counts.workersMaxLowered++;
    } catch {
      // the simulator is busy: try again later
    }
  }
}

/** The store unreachable twice during the run, a few seconds each. */
async function storeOutages(): Promise<void> {
  const outageRng = new Rng(SEED ^ 0x510e527f);
  for (const at of [outageRng.between(0.2, 0.4), outageRng.between(0.5, 0.7)]) {
    while (progress() < at && !settled) await sleep(250);
    say(`${elapsed()} object store unreachable (progress ${(progress() * 100).toFixed(0)} %)`);
    await storage.outage(outageRng.between(3_000, 6_000));
    say(`${elapsed()} object store back`);
  }
}

const observing = observe();
const storeDown = storeOutages();
const disrupting = disrupt();
const drifting = drift();
const holding = planLimits.run(() => settled);
const paying: Promise<PaymentTraffic> = sendPayments({
  plan: payments,
  sidecars: () => sidecarUrls,
  secret: webhookSecret,
  progress: () => (settled ? 1 : progress()),
  deadline,
});
const progressLog = setInterval(
  () => say(`${elapsed()} created ${created}/${JOBS}, terminal ${terminal}/${expectedMediaJobs}`),
  15_000,
);
await Promise.all([
  create(),
  createBursts(bursts, (n) => (burstsCreated += n)),
  createBursts(cappedBursts, (n) => (cappedJobsCreated += n)),
]);
while (!settled && Date.now() < deadline()) await sleep(1_000);
// Every job is terminal: the usage reporter drains its outbox (bounded, as the jobs are).
if (settled) {
  const drainEnd = Date.now() + 300_000;
  while (Date.now() < drainEnd) {
    const backlog = await listJobs(api, NAMESPACE)
      .then(meterBacklog)
      .catch(() => 1);
    if (backlog === 0) break;
    await sleep(2_000);
  }
}
const settledInTime = settled;
settled = true;
clearInterval(progressLog);
await Promise.all([observing, drifting, holding, storeDown]);
await disrupting;
const traffic = await paying;
say(`${elapsed()} ${settledInTime ? "every job terminal" : "deadline passed"}; checking`);

// ---- the provider's bill, allocated: the warm worker let go, every worker stopped, two cost passes ----
await api
  .mergePatch("gpuendpoints", NAMESPACE, LOW_PRIORITY_WORKLOAD, { spec: { minWorkers: 0 } })
  .catch(() => undefined);
await waitUntil(
  "every worker stopped at the provider",
  async () =>
    (await sim<{ runs: Array<{ stoppedAt?: number }> }>("worker-ledger")).runs.every(
      (r) => r.stoppedAt !== undefined,
    ),
  180_000,
);
// The provider's figures and the leader's, read until they agree or a minute has passed: the cost
// loop passes every 2 s and a pass the provider answers 5xx (a fault of the run) is retried at the next.
const readCost = async () => {
  const ours = new Set(
    (await api.list<GpuEndpoint>("gpuendpoints", NAMESPACE)).items.flatMap((e) =>
      e.status?.endpointId ? [e.status.endpointId] : [],
    ),
  );
  const hour = 3_600_000;
  const q = new URLSearchParams({
    bucketSize: "hour",
    startTime: new Date(Math.floor((Date.now() - 24 * hour) / hour) * hour).toISOString(),
    endTime: new Date(Math.ceil(Date.now() / hour) * hour).toISOString(),
  });
  const res = await fetch(`${simulatorUrl}/v2/billing/serverless?${q}`, {
    headers: { authorization: `Bearer ${common.GPU_PROVIDER_API_KEY}` },
  });
  if (!res.ok) return undefined; // the provider's injected 5xx: read again
  const billing = (await res.json()) as { records: Array<{ serverlessId: string; totalAmount: number }> };
  const accounts = (await api.list<BillingAccount>("billingaccounts", NAMESPACE)).items;
  const lead = await leader();
  const port = lead ? controllerPorts[controllers.indexOf(lead.replica)] : undefined;
  if (port === undefined) return undefined;
  const metrics = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => (r.ok ? r.text() : undefined));
  if (metrics === undefined) return undefined;
  return checkCost(
    providerTotalMicros(billing.records, ours),
    accounts.reduce((n, a) => n + (a.status?.cost?.allocatedMicros ?? 0), 0),
    unallocatedFromMetrics(metrics, ours),
  );
};
let costCheck = checkCost(NaN, 0, 0);
for (const end = Date.now() + 60_000; Date.now() < end; await sleep(1_000)) {
  costCheck = (await readCost().catch(() => undefined)) ?? costCheck;
  if (costCheck.allocatedCostDiffMicros === 0) break;
}

// ---- the checks ----
const jobs = await listJobs(api, NAMESPACE);
const { executions } = await sim<{ executions: Record<string, number> }>("executions");
const deliveries = await sim<{
  deliveries: Array<{ key: string; ok: boolean; at: number; copy: number; attempt: number }>;
  dropped: string[];
}>("deliveries");
const stats = await sim<{ serverErrors: number; lostRunAnswers: number }>("stats");
const simFaults = await sim<{ honourClientId?: boolean; ignoreClientId?: boolean }>("faults");
const jobCheck = checkJobs(jobs, executions, deliveries.dropped, deliveries.deliveries);
const { jobs: endedProviderJobs } = await sim<{ jobs: EndedProviderJob[] }>("ended-jobs");
const { events: meterEvents } = await sim<{ events: MeterEventRecord[] }>("payment/meters");
const meteringCheck = checkMetering(jobs, [...customers, ...planCustomerIds], endedProviderJobs, meterEvents);
// A queued job of a capped account is cancelled at the provider at its next pass (at most a tick
// after the limit), after a read, the mark and a second read: allowed two ticks.
const planCheck = checkPlans(jobs, planCustomerIds, PLAN_CAP_SECONDS, planLimits, {
  ended: endedProviderJobs,
  reactionMs: 2 * Number(common.RESYNC_INTERVAL_SECONDS) * 1000,
  // Two watches of one apiserver read an event within this of each other on a loaded machine.
  watchSkewMs: 1_000,
  outages,
});
// The wait bound with this run's numbers: a window of at least 1 slot (a 429, workersMax lowered
// to 1) and at most WORKERS plus its headroom; a slot held at most by a dropped callback's
// timeout plus the confirmation window and a tick; the resync tick.
const waitCheck = checkWaitBound(
  jobs,
  {
    slots: 1,
    maxInFlight: 2 * WORKERS,
    slotSeconds: Number(common.JOB_TIMEOUT_SECONDS) + Number(common.CALLBACK_CONFIRMATION_SECONDS) + 5,
    tickSeconds: Number(common.RESYNC_INTERVAL_SECONDS),
    outages,
    heldAccounts: new Set(planCustomerIds),
    lowPriorityAccounts: new Set([LOW_PRIORITY_ACCOUNT]),
  },
  isFirstStep,
);
const paymentCheck = await checkPayments(api, NAMESPACE, payments);
// The store itself, past the front: every Completed job's outputs, then the media jobs deleted and
// the store left with no object of a job that is gone (the deletion's cleanup, else the sweep).
const storageCheck = await checkStorage(jobs, directStore.client);
const orphanCheck = await checkOrphans({
  api,
  namespace: NAMESPACE,
  client: directStore.client,
  jobs,
  waitMs: 120_000,
  cacheTtlMs: 20_000,
  listJobs: () => listJobs(api, NAMESPACE),
  // The store down while the jobs go: the cleanup of their objects fails, and the sweep must do it.
  meanwhile: () => storage.outage(4_000),
});
say(
  `${elapsed()} ${orphanCheck.deleted} media jobs deleted; up to ${orphanCheck.mostSeen} of their objects seen ` +
    `left after the deletion, ${orphanCheck.orphans.length} after the sweep`,
);
const selfExits =
  [...controllers, ...sidecars].reduce((n, p) => n + p.exits, 0) -
  counts.controllerKills -
  counts.sidecarKills;
const simulatorDied = simulator.exits > 0;

const result: ChaosResult = {
  date: new Date().toISOString(),
  seed: SEED,
  jobs: JOBS,
  mediaJobs: jobCheck.mediaJobs,
  pipelines,
  durationSeconds: Math.round((Date.now() - started) / 1000),
  lost: jobCheck.lost.length + Math.max(0, JOBS + burstJobs + cappedJobs - jobs.filter(isFirstStep).length),
  burstJobs,
  lowPriorityJobs: bursts.find((b) => b.account === LOW_PRIORITY_ACCOUNT)?.jobs.length ?? 0,
  lowPriorityCompleted: jobs.filter(
    (j) => j.spec.account === LOW_PRIORITY_ACCOUNT && j.status?.phase === "Completed",
  ).length,
  leaderStartBacklog: backlogWithoutLeader,
  jobsOverWaitBound: waitCheck.overBound.length,
  worstWaitOverBound: waitCheck.worstRatio,
  executedMoreThanOnce: jobCheck.executedMoreThanOnce.length,
  executedAgainAfterUnconfirmed: jobCheck.executedAgainAfterUnconfirmed,
  executedAgainCallbackDropped: jobCheck.executedAgainCallbackDropped,
  executedAgainCallbackLate: jobCheck.executedAgainCallbackLate.length,
  answeredBeforeResubmission: jobCheck.answeredBeforeResubmission.length,
  unconfirmedResubmissions: jobCheck.unconfirmedResubmissions,
  unconfirmedSubmissionPolicy: POLICY,
  endedUnconfirmed: jobCheck.endedUnconfirmed.length,
  endedUnconfirmedExecuted: jobCheck.endedUnconfirmed.filter((j) => j.executed).length,
  duplicateSteps: jobCheck.duplicateSteps.length,
  adoptedByCallback: adoptions.size,
  adoptedAnotherJob: [...adoptions.values()].filter((a) => a === "another job").length,
  paymentEvents: paymentCheck.events,
  paymentEventsDuplicated: paymentCheck.duplicated,
  paymentEventsUnrecorded: paymentCheck.unrecorded,
  staleAccounts: paymentCheck.stale.length,
  meteredCustomers: meteringCheck.customers,
  meteredJobs: meteringCheck.meteredJobs,
  meteredSeconds: meteringCheck.meteredSeconds,
  meteredSecondsDiff: meteringCheck.meteredSecondsDiff,
  executionSecondsDiff: meteringCheck.executionSecondsDiff,
  providerCostMicros: costCheck.providerMicros,
  allocatedCostMicros: costCheck.allocatedMicros,
  unallocatedCostMicros: costCheck.unallocatedMicros,
  allocatedCostDiffMicros: costCheck.allocatedCostDiffMicros,
  meterEventsDuplicated: meteringCheck.meterEventsDuplicated,
  meterEventsLost: meteringCheck.meterEventsLost,
  meterBacklog: meteringCheck.meterBacklog,
  meterRefused: meteringCheck.meterRefused,
  unconfirmedRunSeconds: meteringCheck.unconfirmedRunSeconds,
  planCustomers: planCheck.customers,
  planJobs: planCheck.jobs,
  planCapSeconds: PLAN_CAP_SECONDS,
  usageLimitReached: planCheck.reachedLimit,
  usageLimitWaitingSeen: planCheck.waitingSeen,
  usageLimitOvershootSeconds: planCheck.usageLimitOvershootSeconds,
  usageLimitOvershootRawSeconds: planCheck.usageLimitOvershootRawSeconds,
  usageLimitCountLagSeconds: planCheck.usageLimitCountLagSeconds,
  concurrencyOverPlan: planCheck.concurrencyOverPlan,
  planMaxRunning: planCheck.maxRunning,
  mediaStorageJobs: mediaPlan.media,
  mediaHostedJobs: mediaPlan.hosted,
  mediaCompleted: storageCheck.mediaCompleted,
  hostedCompleted: storageCheck.hostedCompleted,
  outputsMissing: storageCheck.outputsMissing.length,
  orphanObjects: orphanCheck.orphans.length,
  orphansBeforeSweep: orphanCheck.mostSeen,
  crossTenantCacheHits: storageCheck.crossTenantCacheHits.length,
  byPhase: jobCheck.byPhase,
  faults: {
    controllerKills: counts.controllerKills,
    sidecarKills: counts.sidecarKills,
    controlPlaneRestarts: controlPlane.restarts,
    ignoreClientId: simFaults.honourClientId !== true && simFaults.ignoreClientId !== false,
    droppedCallbacks: deliveries.dropped.length,
    duplicatedCallbacks: deliveries.deliveries.filter((d) => d.copy === 1 && d.attempt === 1).length,
    serverErrors: stats.serverErrors,
    lostRunAnswers: stats.lostRunAnswers,
    jobsFailedOnce: jobCheck.jobsFailedOnce,
    workersMaxLowered: counts.workersMaxLowered,
    selfExits,
    paymentPosts: traffic.posts,
    paymentAnswers: traffic.answers,
    storage: { ...storage.stats, outages: storage.outages },
  },
  broken: [],
  examples: {
    // Why each process that exited on its own did (a controller that lost its lease exits).
    selfExits: [...controllers, ...sidecars].flatMap((p) =>
      p.ownExits.map((e) => ({ process: p.name, ...e })),
    ),
    lost: jobCheck.lost.slice(0, 20),
    executedMoreThanOnce: jobCheck.executedMoreThanOnce.slice(0, 20),
    executedAgainCallbackLate: jobCheck.executedAgainCallbackLate.slice(0, 20),
    answeredBeforeResubmission: jobCheck.answeredBeforeResubmission.slice(0, 20),
    endedUnconfirmed: jobCheck.endedUnconfirmed.slice(0, 20),
    duplicateSteps: jobCheck.duplicateSteps.slice(0, 20),
    staleAccounts: paymentCheck.stale.slice(0, 20),
    meterEventsDuplicated: meteringCheck.examples,
    meteredSecondsDiff: meteringCheck.perCustomer.filter((c) => c.metered !== c.billable),
    executionSecondsDiff: meteringCheck.perCustomer.filter((c) => c.executionMs !== c.providerExecutionMs),
    jobsOverWaitBound: waitCheck.overBound.slice(0, 20),
    plans: planCheck.perCustomer,
    outputsMissing: storageCheck.outputsMissing.slice(0, 20),
    orphanObjects: orphanCheck.orphans.slice(0, 20),
    crossTenantCacheHits: storageCheck.crossTenantCacheHits.slice(0, 20),
  },
};
result.broken = INVARIANTS.filter((k) => result[k] !== 0);
// A run that did not inject what it claims proves nothing: that fails too.
if (result.faults.controllerKills < LEADER_KILLS) result.broken.push("controllerKills");
if (result.faults.sidecarKills < 1) result.broken.push("sidecarKills");
if (result.faults.controlPlaneRestarts < 1) result.broken.push("controlPlaneRestarts");
// A backlog created while a leader still ran does not test a leader's start with one.
if (result.leaderStartBacklog < 1) result.broken.push("leaderStartBacklog");
if (simulatorDied) result.broken.push("simulatorExited");
// Plans that no customer reached prove nothing about their limits.
if (result.usageLimitReached < 1) result.broken.push("usageLimitReached");
// Media that never completed, or a store that was never faulty, proves nothing about storage.
if (result.mediaCompleted < 1) result.broken.push("mediaCompleted");
if (result.hostedCompleted < 1) result.broken.push("hostedCompleted");
if (storage.outages < 1 || storage.stats.serverErrors < 1) result.broken.push("storageFaults");

// ---- shut down, report ----
await Promise.all([...controllers, ...sidecars].map((p) => p.stop()));
await simulator.stop();
await Promise.all([service.close(), front.close(), storage.close()]);
directStore.client.close();
await s3.stop();
await controlPlane.stop();
rmSync(join(workDir, "controlplane"), { recursive: true, force: true });
if (result.broken.length === 0 && values["keep-logs"] !== true)
  rmSync(workDir, { recursive: true, force: true });

const out = resolve(REPO_ROOT, values.out!);
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
say("");
say(table(result));
say("");
say(`phases: ${JSON.stringify(result.byPhase)}; ${result.durationSeconds} s; results in ${out}`);
if (result.broken.length) {
  say(`BROKEN: ${result.broken.join(", ")} (seed ${SEED}; logs in ${logDir}; examples in ${out})`);
  process.exit(1);
}
say(`all invariants hold (seed ${SEED})`);
process.exit(0);

// ---- helpers ----
async function waitUntil(what: string, probe: () => Promise<boolean>, timeoutMs = 90_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await probe().catch(() => false)) return;
    await sleep(250);
  }
  throw new Error(`chaos: ${what} not ready in ${timeoutMs / 1000} s; logs in ${logDir}`);
}

/** Creates an object, retrying while the control plane is away; AlreadyExists means an earlier try landed. */
async function createOnce(
  plural: "mediajobs" | "gpuendpoints",
  body: Record<string, unknown>,
): Promise<void> {
  for (;;) {
    try {
      await api.create(plural, NAMESPACE, body as never);
      return;
    } catch (err) {
      if (isAlreadyExists(err)) return;
      await sleep(500);
    }
  }
}
