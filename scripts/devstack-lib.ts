// The local stack of `make dev-up`, `make demo` and the demo test: the control plane, the CRDs,
// the provider simulator with the dev endpoints, and the controller and sidecar as two processes
// configured the way the Helm chart configures the two containers. Everything on loopback.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { billingAccountName, type BillingAccount } from "../src/crds/billingaccount.js";
import { KubeApi, type KubeObject, type Plural } from "../src/k8s/api.js";
import { isAlreadyExists } from "../src/k8s/errors.js";
import { processAlive, REPO_ROOT, startControlPlane, stopProcess } from "../test/support/controlplane.js";
import { installCrds } from "../test/support/crds.js";
import { changeBinding } from "../src/cli/bind.js";
import { writePrivateFile } from "./private-file.js";
import { waitForServed } from "../test/support/kube.js";
import { spawnS3Server } from "../test/support/s3server.js";
import { seedSampleMedia } from "./sample-media.js";
import { openStore } from "../src/storage/index.js";

export const LOCAL = join(REPO_ROOT, ".local");
export const LOGS = join(LOCAL, "logs");
export const STATE_FILE = join(LOCAL, "devstack.json");
export const ENV_FILE = join(LOCAL, "env");
export const DEV_ENV = "dev";
export const PREFIX = "media";
export const GPU_KEY = "sim-key";
export const PAYMENT_KEY = "sim-payment-key";
/** The dev store's data (versitygw's posix backend: a directory per bucket). */
const S3_DIR = join(LOCAL, "s3");
const STORAGE_REGION = "us-east-1";

/**
 * The CRD release of docs/helm.md (`helm install media-orchestrator-crds deploy/helm -n
 * media-system --set crds.only=true`): dev-up's CRDs carry its Helm ownership, so that release
 * adopts them instead of refusing them as objects of no release.
 */
export const CRD_RELEASE_OWNERSHIP = {
  labels: { "app.kubernetes.io/managed-by": "Helm" },
  annotations: {
    "meta.helm.sh/release-name": "media-orchestrator-crds",
    "meta.helm.sh/release-namespace": "media-system",
  },
};

export interface StackState {
  namespace: string;
  kubeconfig: string;
  simulatorUrl: string;
  webhooksUrl: string;
  controllerUrl: string;
  webhookSecret: string;
  /** The dev environment's object store (versitygw on loopback) and the controller's keys to it. */
  storage?: { endpoint: string; bucket: string; accessKeyId: string; secretAccessKey: string };
  pids: Record<string, number>;
  dataDir: string;
}

const say = (line: string) => process.stderr.write(`${line}\n`);

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

export function readState(): StackState | undefined {
  if (!existsSync(STATE_FILE)) return undefined;
  const state = JSON.parse(readFileSync(STATE_FILE, "utf8")) as StackState;
  return Object.values(state.pids).every(processAlive) ? state : undefined;
}

async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} did not become ready in ${timeoutMs / 1000} s; see ${LOGS}`);
}

const httpOk = (url: string) => async () => (await fetch(url, { signal: AbortSignal.timeout(2_000) })).ok;

function spawnLogged(name: string, args: string[], env: Record<string, string>, detached: boolean): number {
  mkdirSync(LOGS, { recursive: true });
  const out = openSync(join(LOGS, `${name}.log`), "w");
  const child = spawn(process.execPath, ["--import", "tsx", ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", out, out],
    detached,
  });
  if (detached) child.unref();
  return child.pid!;
}

export async function applyManifests(api: KubeApi, namespace: string, file: string): Promise<KubeObject[]> {
  const docs = parseAllDocuments(readFileSync(file, "utf8"))
    .map((d) => d.toJS() as KubeObject)
    .filter(Boolean);
  return createManifests(api, namespace, docs);
}

/** Creates each object in `namespace`; one that exists already is left as it is. */
export async function createManifests(
  api: KubeApi,
  namespace: string,
  docs: KubeObject[],
): Promise<KubeObject[]> {
  const plurals: Record<string, Plural> = { GpuEndpoint: "gpuendpoints", MediaJob: "mediajobs" };
  for (const doc of docs) {
    try {
      await api.create(plurals[doc.kind!]!, namespace, doc);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
  }
  return docs;
}

/**
 * Brings the whole stack up. `detached` leaves it running after this process exits (dev-up);
 * otherwise the processes die with us (demo, tests).
 */
export async function stackUp(opts: {
  detached: boolean;
  timeScale?: number;
  namespace?: string;
}): Promise<StackState> {
  mkdirSync(LOGS, { recursive: true });
  const dataDir = join(LOCAL, "controlplane");
  say("1/5 control plane (kube-apiserver + etcd)...");
  const cp = await startControlPlane({
    dataDir,
    logFile: join(LOGS, "controlplane.log"),
    detached: opts.detached,
  });
  const kubeconfig = join(LOCAL, "kubeconfig");
  writePrivateFile(kubeconfig, readFileSync(cp.kubeconfig));
  writeFileSync(join(LOCAL, "controlplane.pid"), String(cp.process.pid));
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  say(`    ready at ${cp.url}`);

  say("2/5 CRDs...");
  await installCrds(kc, undefined, CRD_RELEASE_OWNERSHIP);
  await waitForServed(kc);

  const [simPort, hooksPort, ctrlPort] = [await freePort(), await freePort(), await freePort()];
  const simulatorUrl = `http://127.0.0.1:${simPort}`;
  const webhooksUrl = `http://127.0.0.1:${hooksPort}`;
  const controllerUrl = `http://127.0.0.1:${ctrlPort}`;
  const webhookSecret = `whsec_${randomBytes(18).toString("hex")}`;
  const callbackSecret = randomBytes(32).toString("hex");
  const namespace = opts.namespace ?? "default";

  say("3/5 GPU provider simulator (endpoints media-asr-dev, media-tts-dev, media-render-dev)...");
  const pids: Record<string, number> = { controlplane: cp.process.pid! };
  pids.simulator = spawnLogged(
    "simulator",
    [
      "tools/simulator/main.ts",
      "--port",
      String(simPort),
      "--time-scale",
      String(opts.timeScale ?? 0.5),
      ...["asr", "tts", "render"].flatMap((w) => [
        "--endpoint",
        `${PREFIX}-${w}-${DEV_ENV},workload=${w},max=2`,
      ]),
      // The meter the controller reports to (USAGE_METER_EVENT_NAME's default): without one it
      // holds the usage (MetersConfigured=False).
      "--meter",
      "gpu_seconds",
      "--payment-webhook-url",
      `${webhooksUrl}/webhooks/payment_provider`,
      "--payment-webhook-secret",
      webhookSecret,
    ],
    {},
    opts.detached,
  );
  await waitFor("the simulator", httpOk(`${simulatorUrl}/_sim/stats`));

  // The environment's object store: a real S3-compatible server that checks signatures and expiry
  // (test/support/s3server.ts), with the bucket <prefix>-<env>; its keys go to the controller only,
  // as the chart mounts them.
  say("    S3-compatible store (versitygw)...");
  const s3Port = await freePort();
  rmSync(S3_DIR, { recursive: true, force: true });
  mkdirSync(S3_DIR, { recursive: true });
  const storage = {
    endpoint: `http://127.0.0.1:${s3Port}`,
    bucket: `${PREFIX}-${DEV_ENV}`,
    accessKeyId: `dev${randomBytes(6).toString("hex")}`,
    secretAccessKey: randomBytes(24).toString("base64url"),
  };
  pids.s3 = spawnS3Server({
    dir: S3_DIR,
    port: s3Port,
    region: STORAGE_REGION,
    accessKeyId: storage.accessKeyId,
    secretAccessKey: storage.secretAccessKey,
    detached: opts.detached,
    logFile: join(LOGS, "s3.log"),
  }).pid!;
  const storageEnv = {
    STORAGE_BUCKET: storage.bucket,
    STORAGE_ENDPOINT: storage.endpoint,
    STORAGE_REGION: STORAGE_REGION,
    STORAGE_ADDRESSING: "path" as const,
    STORAGE_CREDENTIALS: "keys" as const,
  };
  const storageKeys = {
    STORAGE_ACCESS_KEY_ID: storage.accessKeyId,
    STORAGE_SECRET_ACCESS_KEY: storage.secretAccessKey,
  };
  await waitFor(
    "the S3 server",
    async () => (await fetch(storage.endpoint, { signal: AbortSignal.timeout(2_000) })).status > 0,
  );
  const store = await openStore({ ...storageEnv, ...storageKeys, STORAGE_SESSION_TOKEN: undefined });
  await store!.client.createBucket();
  // The sample pipeline's audio, where config/samples/pipeline.yaml reads it.
  await seedSampleMedia(store!.client, namespace);
  store!.client.close();

  say("4/5 controller and webhooks sidecar...");
  // The environment the chart gives the two containers.
  const env: Record<string, string> = {
    KUBECONFIG: kubeconfig,
    GPU_PROVIDER_API_URL: simulatorUrl,
    GPU_PROVIDER_API_KEY: GPU_KEY,
    PAYMENT_PROVIDER_API_URL: simulatorUrl,
    PAYMENT_PROVIDER_API_KEY: PAYMENT_KEY,
    PAYMENT_PROVIDER_WEBHOOK_SECRET: webhookSecret,
    CALLBACK_BASE_URL: webhooksUrl,
    CALLBACK_SECRET: callbackSecret,
    MEDIA_ENV: DEV_ENV,
    MEDIA_ENDPOINT_PREFIX: PREFIX,
    RESYNC_INTERVAL_SECONDS: "5",
    JOB_TIMEOUT_SECONDS: "60",
    LEADER_ELECTION: "true",
    LEADER_ELECTION_NAMESPACE: namespace,
    WATCH_NAMESPACE: "",
    POD_NAMESPACE: namespace,
    WEBHOOKS_HOST: "127.0.0.1",
    WEBHOOKS_PORT: String(hooksPort),
    CONTROLLER_METRICS_PORT: String(ctrlPort),
    LOG_LEVEL: "info",
    ...storageEnv,
  };
  pids.webhooks = spawnLogged("webhooks", ["src/main.ts", "webhooks"], env, opts.detached);
  pids.controller = spawnLogged(
    "controller",
    ["src/main.ts", "controller"],
    { ...env, ...storageKeys },
    opts.detached,
  );
  await waitFor("the webhooks sidecar", httpOk(`${webhooksUrl}/readyz`));
  await waitFor("the controller", httpOk(`${controllerUrl}/readyz`));

  say("5/5 sample GpuEndpoints (config/samples/gpuendpoints.yaml)...");
  const api = new KubeApi(kc);
  // The sample pipeline bills cus_demo: its namespace is bound to it, as an operator would with
  // kubectl media bind NAMESPACE cus_demo (docs/helm.md, "Binding namespaces to accounts").
  await changeBinding(api, namespace, SAMPLE_CUSTOMER, "bind");
  await applyManifests(api, namespace, join(REPO_ROOT, "config/samples/gpuendpoints.yaml"));
  await waitFor(
    "the three GpuEndpoints",
    async () => {
      const { items } = await api.list<
        KubeObject & { status?: { conditions?: Array<{ type: string; status: string }> } }
      >("gpuendpoints", namespace);
      return (
        items.filter((e) => e.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"))
          .length >= 3
      );
    },
    60_000,
  );

  const state: StackState = {
    namespace,
    kubeconfig,
    simulatorUrl,
    webhooksUrl,
    controllerUrl,
    webhookSecret,
    storage,
    pids,
    dataDir,
  };
  writePrivateFile(STATE_FILE, JSON.stringify(state, null, 2));
  writePrivateFile(ENV_FILE, envFile(state));
  return state;
}

/**
 * .local/env: what a shell needs to use the stack. The Node this stack runs on goes first on PATH
 * when it is the project's own (.local/node, downloaded by make on a machine with another Node), so
 * `kubectl media` and npx run on it. RunPod's Python SDK is pointed at the simulator: it reads
 * RUNPOD_API_BASE_URL (its GraphQL management calls) and RUNPOD_ENDPOINT_BASE_URL (its job API) from
 * the environment, as test/sdk/python-sdk.test.ts runs it; RUNPOD_API_KEY is the variable RunPod's
 * examples set `runpod.api_key` from. CONTROLLER_METRICS_URL and WEBHOOKS_METRICS_URL are the two
 * processes' Prometheus endpoints.
 */
export function envFile(
  state: Pick<
    StackState,
    "kubeconfig" | "simulatorUrl" | "webhooksUrl" | "controllerUrl" | "webhookSecret" | "storage"
  >,
  node = process.execPath,
): string {
  const { kubeconfig, simulatorUrl, webhooksUrl, controllerUrl, webhookSecret, storage } = state;
  const nodeBin = dirname(node);
  return [
    // .local/bin: `helm` once `make helm` built it (the name the docs' commands use).
    `export PATH=${join(LOCAL, "bin")}:$PATH`,
    ...(nodeBin.startsWith(join(LOCAL, "node")) ? [`export PATH=${nodeBin}:$PATH`] : []),
    `export KUBECONFIG=${kubeconfig}`,
    `export GPU_PROVIDER_API_URL=${simulatorUrl}`,
    `export GPU_PROVIDER_API_KEY=${GPU_KEY}`,
    `export PAYMENT_PROVIDER_API_URL=${simulatorUrl}`,
    `export PAYMENT_PROVIDER_API_KEY=${PAYMENT_KEY}`,
    `export PAYMENT_PROVIDER_WEBHOOK_SECRET=${webhookSecret}`,
    `export WEBHOOKS_URL=${webhooksUrl}`,
    `export WEBHOOKS_METRICS_URL=${webhooksUrl}/metrics`,
    `export CONTROLLER_METRICS_URL=${controllerUrl}/metrics`,
    `export SIMULATOR_URL=${simulatorUrl}`,
    `export RUNPOD_API_KEY=${GPU_KEY}`,
    `export RUNPOD_API_BASE_URL=${simulatorUrl}`,
    `export RUNPOD_ENDPOINT_BASE_URL=${simulatorUrl}/v2`,
    ...(storage !== undefined
      ? [
          `export STORAGE_BUCKET=${storage.bucket}`,
          `export STORAGE_ENDPOINT=${storage.endpoint}`,
          `export STORAGE_REGION=${STORAGE_REGION}`,
          "export STORAGE_ADDRESSING=path",
          `export STORAGE_ACCESS_KEY_ID=${storage.accessKeyId}`,
          `export STORAGE_SECRET_ACCESS_KEY=${storage.secretAccessKey}`,
        ]
      : []),
    "",
  ].join("\n");
}

/** The customer of config/samples/pipeline.yaml. */
export const SAMPLE_CUSTOMER = "cus_demo";

/** The simulator's answer to /_sim/payment/send: the delivery and each attempt to deliver it. */
export interface PaymentDelivery {
  id: string;
  attempts: Array<{ httpStatus?: number; redelivery: boolean }>;
}

/**
 * Makes `customer` active the way production does: the payment provider (the simulator) signs a
 * customer.subscription.created event with the webhook secret and delivers it to the sidecar, which
 * verifies it and writes the BillingAccount. Resolves once the account is active.
 */
export async function activateCustomer(
  api: KubeApi,
  namespace: string,
  simulatorUrl: string,
  customer: string,
  eventId = `evt_dev_${randomBytes(6).toString("hex")}`,
): Promise<{ eventId: string; delivery: PaymentDelivery }> {
  const event = {
    id: eventId,
    object: "event",
    type: "customer.subscription.created",
    created: Math.floor(Date.now() / 1000),
    data: { object: { id: `sub_${customer}`, object: "subscription", customer, status: "active" } },
  };
  const res = await fetch(`${simulatorUrl}/_sim/payment/send`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(event),
  });
  if (!res.ok) throw new Error(`the simulator did not send the subscription event: HTTP ${res.status}`);
  const delivery = (await res.json()) as PaymentDelivery;
  const status = delivery.attempts.at(-1)?.httpStatus;
  if (status !== 200) throw new Error(`the sidecar answered the subscription event with HTTP ${status}`);
  await waitFor(`BillingAccount ${billingAccountName(customer)} active`, async () => {
    const acct = await api.get<BillingAccount>("billingaccounts", namespace, billingAccountName(customer));
    return acct?.status?.subscriptionStatus === "active";
  });
  return { eventId, delivery };
}

/** Stops every process the stack started and removes its data. */
export async function stackDown(state: StackState | undefined = readState()): Promise<boolean> {
  let raw: StackState | undefined = state;
  if (!raw && existsSync(STATE_FILE)) raw = JSON.parse(readFileSync(STATE_FILE, "utf8")) as StackState;
  if (raw) {
    for (const name of ["controller", "webhooks", "simulator", "s3"]) {
      const pid = raw.pids[name];
      if (pid) await stopProcess(pid);
    }
    if (raw.pids.controlplane) await stopProcess(raw.pids.controlplane, raw.dataDir);
  }
  for (const f of [STATE_FILE, ENV_FILE, join(LOCAL, "kubeconfig"), join(LOCAL, "controlplane.pid")])
    rmSync(f, { force: true });
  rmSync(join(LOCAL, "controlplane"), { recursive: true, force: true });
  rmSync(S3_DIR, { recursive: true, force: true });
  for (const name of ["controlplane", "simulator", "webhooks", "controller", "s3"])
    rmSync(join(LOGS, `${name}.log`), { force: true });
  return raw !== undefined;
}
