// The chart installed into a real control plane exactly as docs/helm.md says: the CRD release
// first, then one release per environment (dev and staging side by side). Then the operator,
// both processes, run here but as the chart's ServiceAccount (impersonation) and configured from
// the installed Deployment and Secret, takes a paying customer's pipeline from webhook to
// completion: the RBAC is enough. Every verb the chart does not grant is refused: it is not more
// than enough. The hook Job creates the callback Secret once and `helm upgrade` keeps it; `helm
// test` checks both containers; a second release over the same namespace competes for the same
// Lease; a user with the built-in `edit` role can run MediaJobs but not touch billing;
// uninstalling keeps the CRDs.
//
// The control plane has no kubelet, no Job controller and no kube-controller-manager: the chart's
// hook pods are run by test/helm/hook-pods.ts, and ClusterRole aggregation by aggregateClusterRoles()
// below (what the clusterrole-aggregation controller does).
//
// This file starts its own control plane: the run's shared one already has the CRDs (installed by
// the global setup, not by Helm), and a user's cluster does not.
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  AppsV1Api,
  AuthorizationV1Api,
  BatchV1Api,
  CoordinationV1Api,
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  type V1Container,
  type V1PodSpec,
  type V1ResourceAttributes,
} from "@kubernetes/client-node";
import { pino } from "pino";
import { Registry } from "prom-client";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseEnv, type Env } from "../../src/config/env.js";
import {
  billingAccountName,
  paymentEventName,
  type BillingAccount,
  type PaymentEvent,
} from "../../src/crds/index.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import type { Manager } from "../../src/controller/manager.js";
import { KubeApi } from "../../src/k8s/api.js";
import { impersonating } from "../../src/k8s/config.js";
import type { Simulator } from "../../tools/simulator/server.js";
import { startPaymentEventGc } from "../../src/webhooks/gc.js";
import { GpuProviderClient } from "../../src/provider/index.js";
import { recordedOutcome } from "../../src/webhooks/paymentrecord.js";
import { startWebhookServer, type RunningWebhookServer } from "../../src/webhooks/server.js";
import { makeBillingAccount } from "../support/builders.js";
import { startControlPlane, type RunningControlPlane } from "../support/controlplane.js";
import { eventually } from "../support/kube.js";
import { deliverPaymentEvent, subscriptionCreated } from "../support/payments.js";
import { startControllerHealthServer } from "../../src/runtime/health.js";
import { runController, type RunningController } from "../../src/controller/run.js";
import {
  CHART_DIR,
  EXPECTED_RULES,
  expectedLeaseRules,
  helmAsync,
  helmBinary,
  leaseName,
  valuesFile,
} from "../support/helm.js";
import { runHookPods, type HookPodRunner } from "./hook-pods.js";
import {
  mediaJob,
  SIM_KEY,
  startManager,
  startTestSimulator,
  waitForPhase,
  waitForReady,
} from "../support/stack.js";
import { changeBinding } from "../../src/cli/bind.js";

const CRD_RELEASE = ["media-orchestrator-crds", "media-system"] as const;
const DEV = { release: "mo-dev", ns: "media-dev", env: "dev" };
const STAGING = { release: "mo-staging", ns: "media-staging", env: "staging" };
const HOOK_FAILS = { release: "mo-hook-fails", ns: "media-hook-fails", env: "dev" };
const FULLNAME = (r: { release: string }) => `${r.release}-media-orchestrator`;
const WEBHOOK_SECRET = `whsec_${randomBytes(12).toString("hex")}`;
const CRDS = ["billingaccounts", "gpuendpoints", "mediajobs", "paymentevents"].map(
  (p) => `${p}.media-orchestrator.io`,
);
const G = "media-orchestrator.io";
const silent = pino({ level: "silent" });

let cp: RunningControlPlane;
let kc: KubeConfig;
let admin: KubeApi;
let hooks: HookPodRunner;
/** Where `helm test`'s pod finds the two containers here (a pod would use the Service's DNS name). */
let readyzUrls = "";

const run = (args: string[]) => helmAsync(args, { kubeconfig: cp.kubeconfig });
async function ok(args: string[]): Promise<string> {
  const res = await run(args);
  if (res.status !== 0) throw new Error(`helm ${args.join(" ")} failed: ${res.stderr}`);
  return res.stdout;
}

/** What docs/helm.md gives an environment behind the Ingress: its host and the ingress controller's pods. */
const ingressArgs = (env: string) => [
  "--set",
  `ingress.host=media-hooks-${env}.example.com`,
  "--set",
  "webhooks.trustedProxies={10.244.0.0/16}",
];

/** `helm install` of one environment, as docs/helm.md writes it (plus the test's own settings). */
const installEnv = (r: typeof DEV, extra: string[] = []) =>
  run([
    "install",
    r.release,
    CHART_DIR,
    "--namespace",
    r.ns,
    "--create-namespace",
    "-f",
    valuesFile(`values-${r.env}.yaml`),
    ...(r.env === "dev" ? [] : ingressArgs(r.env)),
    ...extra,
  ]);

const DEV_SETTINGS = [
  "--set",
  `secrets.gpuProviderApiKey=${SIM_KEY}`,
  "--set",
  `secrets.paymentProviderWebhookSecret=${WEBHOOK_SECRET}`,
  // A fast tick for the test; everything else is the dev values file.
  "--set",
  "resyncIntervalSeconds=2",
];

/** The callback key the release's pods read (the hook's Secret, or the chart's with callback.secret). */
async function callbackSecret(ns: string, deployment: string): Promise<string> {
  const d = await kc.makeApiClient(AppsV1Api).readNamespacedDeployment({ namespace: ns, name: deployment });
  const pod = d.spec!.template.spec!;
  return (await secretFiles(ns, pod, pod.containers[0]!)).CALLBACK_SECRET!;
}

/**
 * The files the kubelet would put in a container's SECRETS_DIR: the items of its projected
 * volume's Secrets, named by their paths (a missing optional Secret or key is no file).
 */
async function secretFiles(ns: string, pod: V1PodSpec, c: V1Container): Promise<Record<string, string>> {
  const dir = c.env?.find((e) => e.name === "SECRETS_DIR")?.value;
  const mount = c.volumeMounts?.find((m) => m.mountPath === dir);
  const volume = pod.volumes?.find((v) => v.name === mount?.name);
  if (!volume?.projected) throw new Error(`${c.name}: no projected secrets volume at SECRETS_DIR`);
  const core = kc.makeApiClient(CoreV1Api);
  const out: Record<string, string> = {};
  for (const src of volume.projected.sources ?? []) {
    const ref = src.secret!;
    const secret = await core
      .readNamespacedSecret({ namespace: ns, name: ref.name! })
      .catch((err: unknown) => {
        if (ref.optional) return undefined;
        throw err;
      });
    for (const item of ref.items ?? []) {
      const v = secret?.data?.[item.key];
      if (v !== undefined) out[item.path] = Buffer.from(v, "base64").toString();
      else if (!ref.optional) throw new Error(`${c.name}: key ${item.key} missing in ${ref.name}`);
    }
  }
  return out;
}

/**
 * What the container's process would see: literal values, the downward API, and its secret files
 * read in place of their variables (as src/config/secret-files.ts does with SECRETS_DIR).
 */
async function containerEnv(
  ns: string,
  pod: V1PodSpec,
  c: V1Container,
  podName: string,
): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of c.env ?? []) {
    if (e.value !== undefined) out[e.name] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === "metadata.name") out[e.name] = podName;
    else if (e.valueFrom?.fieldRef?.fieldPath === "metadata.namespace") out[e.name] = ns;
    else if (e.valueFrom) throw new Error(`${c.name}: ${e.name} comes from ${JSON.stringify(e.valueFrom)}`);
  }
  delete out.SECRETS_DIR; // this process has no such directory: the files' values are given instead
  return { ...out, ...(await secretFiles(ns, pod, c)) };
}

beforeAll(async () => {
  helmBinary();
  cp = await startControlPlane({ dataDir: mkdtempSync(join(tmpdir(), "mo-helm-controlplane-")) });
  kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfig);
  admin = new KubeApi(kc);
  hooks = runHookPods(cp, kc, {
    env: (ns, vars) => {
      if (vars.READYZ_URLS !== undefined) return { ...vars, READYZ_URLS: readyzUrls };
      // A hook that fails: it is sent to read a Secret of a namespace its Role does not cover (403).
      if (ns === HOOK_FAILS.ns) return { ...vars, SECRET_NAMESPACE: "kube-system" };
      return vars;
    },
  });
}, 15 * 60_000);

afterAll(async () => {
  await hooks?.stop();
  await cp?.stop();
});

describe("installing per environment", () => {
  it("an environment release before the CRD release fails and says why", async () => {
    const res = await installEnv(DEV, DEV_SETTINGS);
    expect(res.status).not.toBe(0);
    expect(res.stderr).toContain('no matches for kind "GpuEndpoint"');
    expect(res.stderr).toContain("ensure CRDs are installed first");
    expect((await ok(["list", "--all-namespaces", "-q"])).trim()).toBe(""); // nothing half-installed
  });

  it("the CRD release installs the four CRDs and their rules, Established, owned by it and kept on uninstall", async () => {
    const [release, ns] = CRD_RELEASE;
    const out = await ok([
      "install",
      release,
      CHART_DIR,
      "-n",
      ns,
      "--create-namespace",
      "--set",
      "crds.only=true",
      "--wait",
      "--timeout",
      "2m",
    ]);
    expect(out).toContain("STATUS: deployed");
    expect(out).toContain("The media-orchestrator CRDs are installed");
    for (const name of CRDS) {
      const crd = await admin.rawJson<{
        metadata: { annotations: Record<string, string> };
        status: { conditions: Array<{ type: string; status: string }> };
      }>("GET", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
      expect(crd.metadata.annotations).toMatchObject({
        "meta.helm.sh/release-name": release,
        "meta.helm.sh/release-namespace": ns,
        "helm.sh/resource-policy": "keep",
      });
      expect(crd.status.conditions).toContainEqual(
        expect.objectContaining({ type: "Established", status: "True" }),
      );
    }
    // The release carries nothing else but the ClusterRoles that give users access to them, and
    // the policy that a MediaJob bills only an account its namespace is bound to.
    expect((await ok(["get", "manifest", release, "-n", ns])).match(/^kind: (\S+)/gm)?.sort()).toEqual([
      "kind: ClusterRole",
      "kind: ClusterRole",
      "kind: ClusterRole",
      ...CRDS.map(() => "kind: CustomResourceDefinition"),
      // Each resource's rules policy, the account-binding policy, the MediaJob's inline-input
      // limits (a policy of its own, which fails open) and its status rules (the reset, on the
      // status subresource only), with their bindings.
      ...CRDS.map(() => "kind: ValidatingAdmissionPolicy"),
      ...Array<string>(3).fill("kind: ValidatingAdmissionPolicy"),
      ...CRDS.map(() => "kind: ValidatingAdmissionPolicyBinding"),
      ...Array<string>(3).fill("kind: ValidatingAdmissionPolicyBinding"),
    ]);
  });

  it("dev and staging install side by side, each with its own objects and GpuEndpoints", async () => {
    const dev = await installEnv(DEV, DEV_SETTINGS);
    expect(dev.status, dev.stderr).toBe(0);
    expect(dev.stdout).toContain('environment "dev", release mo-dev in media-dev');
    const staging = await installEnv(STAGING);
    expect(staging.status, staging.stderr).toBe(0);
    // No credentials given for staging: NOTES says what is missing.
    expect(staging.stdout).toContain("WARNING: no GPU provider API key");

    for (const r of [DEV, STAGING]) {
      const eps = await admin.list("gpuendpoints", r.ns);
      expect(eps.items.map((e) => e.metadata.name).sort()).toEqual(
        ["asr", "render", "tts"].map((w) => `media-${w}-${r.env}`),
      );
      const d = await kc
        .makeApiClient(AppsV1Api)
        .readNamespacedDeployment({ namespace: r.ns, name: FULLNAME(r) });
      expect(d.spec?.template.spec?.containers.map((c) => c.name)).toEqual(["controller", "webhooks"]);
      expect(d.spec?.replicas).toBe(r.env === "dev" ? 1 : 2);
      const secret = await callbackSecret(r.ns, FULLNAME(r));
      expect(secret).toMatch(/^[0-9a-f]{64}$/);
    }
    // Each environment has its own callback secret.
    expect(await callbackSecret(DEV.ns, FULLNAME(DEV))).not.toBe(
      await callbackSecret(STAGING.ns, FULLNAME(STAGING)),
    );
    const statuses = await ok(["list", "-A", "-o", "json"]);
    expect(
      (JSON.parse(statuses) as Array<{ name: string; status: string }>).map((r) => [r.name, r.status]).sort(),
    ).toEqual([
      ["media-orchestrator-crds", "deployed"],
      ["mo-dev", "deployed"],
      ["mo-staging", "deployed"],
    ]);
  });

  it("the hook Job created each callback Secret as its own ServiceAccount, then was removed", async () => {
    const jobs = hooks.runs.filter((r) => r.kind === "Job");
    expect(jobs.map((r) => [r.namespace, r.exitCode, r.output.trim()])).toEqual([
      [DEV.ns, 0, `Secret ${DEV.ns}/${FULLNAME(DEV)}-callback created`],
      [STAGING.ns, 0, `Secret ${STAGING.ns}/${FULLNAME(STAGING)}-callback created`],
    ]);
    // The key never reaches the hook's output.
    const key = await callbackSecret(DEV.ns, FULLNAME(DEV));
    expect(jobs.some((r) => r.output.includes(key))).toBe(false);
    // hook-succeeded: the Job, its ServiceAccount and its Role are gone; the Secret stays.
    const core = kc.makeApiClient(CoreV1Api);
    await eventually(async () => {
      const sas = await core.listNamespacedServiceAccount({ namespace: DEV.ns });
      return !sas.items.some((a) => a.metadata?.name?.endsWith("-callback-init"));
    });
    const roles = await kc.makeApiClient(RbacAuthorizationV1Api).listNamespacedRole({ namespace: DEV.ns });
    expect(roles.items.map((r) => r.metadata?.name).filter((n) => n?.endsWith("-callback-init"))).toEqual([]);
  });

  it("a hook Job that fails leaves nothing behind: no ServiceAccount that may create Secrets", async () => {
    const res = await installEnv(HOOK_FAILS, [...DEV_SETTINGS, "--timeout", "60s"]);
    expect(res.status).not.toBe(0);
    expect(res.stderr).toContain("callback-init");
    const run = hooks.runs.find((r) => r.namespace === HOOK_FAILS.ns);
    expect(run).toMatchObject({ kind: "Job", exitCode: 1 });
    expect(run!.output).toContain("HTTP 403");
    // hook-failed deletes the whole hook: the Job and its ServiceAccount, Role and RoleBinding.
    const core = kc.makeApiClient(CoreV1Api);
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const left = async () => [
      ...(await core.listNamespacedServiceAccount({ namespace: HOOK_FAILS.ns })).items.map(
        (o) => `sa/${o.metadata?.name}`,
      ),
      ...(await rbac.listNamespacedRole({ namespace: HOOK_FAILS.ns })).items.map(
        (o) => `role/${o.metadata?.name}`,
      ),
      ...(await rbac.listNamespacedRoleBinding({ namespace: HOOK_FAILS.ns })).items.map(
        (o) => `rolebinding/${o.metadata?.name}`,
      ),
      ...(await kc.makeApiClient(BatchV1Api).listNamespacedJob({ namespace: HOOK_FAILS.ns })).items.map(
        (o) => `job/${o.metadata?.name}`,
      ),
    ];
    let remaining: string[] = [];
    await eventually(
      async () => {
        remaining = (await left()).filter((n) => n.includes("callback-init"));
        return remaining.length === 0;
      },
      { message: () => `the hook's objects to be deleted (left: ${remaining.join(", ")})` },
    );
    // The failed release is a user's to remove; nothing of the hook waits for that.
    await ok(["uninstall", HOOK_FAILS.release, "-n", HOOK_FAILS.ns]);
  });

  it("a second release cannot take the CRDs over (the documented reason for crds.install=false)", async () => {
    const res = await run([
      "install",
      "mo-qa",
      CHART_DIR,
      "-n",
      "media-qa",
      "--create-namespace",
      "--set",
      "crds.install=true",
    ]);
    expect(res.status).not.toBe(0);
    expect(res.stderr).toContain("cannot be imported into the current release: invalid ownership metadata");
    expect(res.stderr).toContain('current value is "media-orchestrator-crds"');
  });

  it("the installed RBAC is exactly the documented rules", async () => {
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const strip = (
      rules: Array<{ apiGroups?: string[]; resources?: string[]; verbs: string[]; resourceNames?: string[] }>,
    ) =>
      rules.map((r) => ({
        apiGroups: r.apiGroups,
        resources: r.resources,
        verbs: r.verbs,
        ...(r.resourceNames ? { resourceNames: r.resourceNames } : {}),
      }));
    for (const r of [DEV, STAGING]) {
      const role = await rbac.readNamespacedRole({ namespace: r.ns, name: FULLNAME(r) });
      expect(strip(role.rules ?? [])).toEqual(EXPECTED_RULES);
      const lease = await rbac.readNamespacedRole({
        namespace: r.ns,
        name: `${FULLNAME(r)}-leader-election`,
      });
      expect(strip(lease.rules ?? [])).toEqual(expectedLeaseRules(leaseName(r.ns)));
    }
    // Cluster-wide, only the CRD release's roles for users, and each environment's read of its
    // own Namespace (its account bindings).
    const clusterRoles = await rbac.listClusterRole({
      labelSelector: "app.kubernetes.io/part-of=media-orchestrator",
    });
    expect(clusterRoles.items.map((r) => r.metadata?.name).sort()).toEqual(
      [
        "media-orchestrator-billing-view",
        "media-orchestrator-edit",
        "media-orchestrator-view",
        ...[DEV, STAGING].map((r) => `${r.ns}-${FULLNAME(r)}-namespaces`),
      ].sort(),
    );
    for (const r of [DEV, STAGING]) {
      const read = clusterRoles.items.find((c) => c.metadata?.name === `${r.ns}-${FULLNAME(r)}-namespaces`)!;
      expect(strip(read.rules ?? [])).toEqual([
        {
          apiGroups: [""],
          resources: ["namespaces"],
          verbs: ["get", "list", "watch", "patch"],
          resourceNames: [r.ns],
        },
      ]);
    }
  });
});

describe("the operator as the chart's ServiceAccount", () => {
  let sa: string;
  let env: Env;
  let asSa: KubeApi;
  let sim: Simulator;
  let manager: Manager;
  let sidecar: RunningWebhookServer;
  let health: Awaited<ReturnType<typeof startControllerHealthServer>>;
  let other: RunningController | undefined;

  beforeAll(async () => {
    const d = await kc
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ namespace: DEV.ns, name: FULLNAME(DEV) });
    const pod = d.spec!.template.spec!;
    sa = `system:serviceaccount:${DEV.ns}:${pod.serviceAccountName}`;
    asSa = new KubeApi(impersonating(kc, sa));
    const [controller, webhooks] = pod.containers;
    const controllerEnv = await containerEnv(DEV.ns, pod, controller!, "mo-dev-pod-0");
    const webhooksEnv = await containerEnv(DEV.ns, pod, webhooks!, "mo-dev-pod-0");
    // The same configuration, but each container only the secrets it uses: the controller never
    // sees the payment signing secret.
    expect(controllerEnv.PAYMENT_PROVIDER_WEBHOOK_SECRET).toBeUndefined();
    expect(webhooksEnv.PAYMENT_PROVIDER_WEBHOOK_SECRET).toBe(WEBHOOK_SECRET);
    for (const e of [controllerEnv, webhooksEnv]) {
      expect(e.GPU_PROVIDER_API_KEY).toBe(SIM_KEY);
      expect(e.CALLBACK_SECRET).toMatch(/^[0-9a-f]{64}$/);
    }
    // The sidecar's heap is bounded by its container's memory limit (docs/webhooks.md, "Memory").
    expect(webhooksEnv.NODE_OPTIONS).toMatch(/^--max-old-space-size=\d+$/);
    expect(controllerEnv.NODE_OPTIONS).toBeUndefined();
    const { PAYMENT_PROVIDER_WEBHOOK_SECRET: _w, NODE_OPTIONS: _n, ...shared } = webhooksEnv;
    expect(shared).toEqual(controllerEnv);
    // The provider endpoints the dev GpuEndpoints resolve to by name.
    sim = await startTestSimulator({
      endpoints: ["asr", "tts", "render"].map((w) => ({
        name: `media-${w}-dev`,
        workload: w as "asr",
        workersMax: 2,
      })),
    });
    // Only what cannot be the same on this machine: the provider's address, and the sidecar's
    // address and ports (the pod's 8080/8081 may be taken here).
    const base = { ...controllerEnv, GPU_PROVIDER_API_URL: sim.url, WEBHOOKS_HOST: "127.0.0.1" };
    const sidecarEnv = parseEnv({
      ...webhooksEnv,
      GPU_PROVIDER_API_URL: sim.url,
      WEBHOOKS_HOST: "127.0.0.1",
    });
    sidecar = await startWebhookServer({
      api: asSa,
      env: sidecarEnv,
      log: silent,
      registry: new Registry(),
      host: "127.0.0.1",
      port: 0,
      // As runWebhooks builds it from the pod's environment: callbacks are confirmed with the provider.
      provider: new GpuProviderClient({ apiUrl: sim.url, apiKey: sidecarEnv.GPU_PROVIDER_API_KEY! }),
    });
    env = parseEnv({ ...base, CALLBACK_BASE_URL: sidecar.url, LOG_LEVEL: "silent" });
    expect(env).toMatchObject({
      WATCH_NAMESPACE: DEV.ns,
      LEADER_ELECTION: true,
      LEADER_ELECTION_NAMESPACE: DEV.ns,
      LEADER_ELECTION_ID: leaseName(DEV.ns),
      MEDIA_ENV: "dev",
      GPU_PROVIDER_API_KEY: SIM_KEY,
    });
    // The pod's identity in the Lease is its POD_NAME (downward API) plus a random suffix.
    manager = startManager(impersonating(kc, sa), sim, env, { identity: `${env.POD_NAME}_local` });
    await manager.start();
    health = await startControllerHealthServer(manager, "127.0.0.1", 0);
    readyzUrls = `${sidecar.url}/readyz ${health.url}/readyz`;
  });

  afterAll(async () => {
    await other?.stop();
    await new Promise((r) => health?.server.close(r));
    await manager?.stop();
    await sidecar?.close();
    await sim?.close();
  });

  it("leads through the Lease of the namespace it watches", async () => {
    await eventually(() => manager.isLeader, { message: "the manager to lead" });
    const lease = await kc
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: DEV.ns, name: leaseName(DEV.ns) });
    expect(lease.spec?.holderIdentity).toBe("mo-dev-pod-0_local");
  });

  it("brings the environment's GpuEndpoints to Ready", async () => {
    for (const w of ["asr", "tts", "render"]) {
      const ep = await waitForReady(admin, DEV.ns, `media-${w}-dev`);
      expect(ep.status?.endpointName).toBe(`media-${w}-dev`);
    }
  });

  // Its own waits (each step's completion, the Events) add up to two minutes on a loaded machine.
  it(
    "takes a paying customer's pipeline from the payment webhook to completion",
    { timeout: 150_000 },
    async () => {
      const customer = `cus_${randomBytes(4).toString("hex")}`;
      // 1. The payment provider reports an active subscription (sidecar: PaymentEvent, BillingAccount).
      const event = subscriptionCreated(customer);
      const res = await deliverPaymentEvent(sidecar.url, event, WEBHOOK_SECRET);
      expect(res.status, res.text).toBe(200);
      const record = await admin.get<PaymentEvent>("paymentevents", DEV.ns, paymentEventName(event.id));
      expect(record && recordedOutcome(record)).toBe("Processed");
      const account = await admin.get<BillingAccount>(
        "billingaccounts",
        DEV.ns,
        billingAccountName(customer),
      );
      expect(account?.status?.subscriptionStatus).toBe("active");

      // 2. An operator binds the namespace to the customer (docs/helm.md, "Binding namespaces to
      //    accounts"): the controller, as the chart's ServiceAccount, reads the binding.
      await changeBinding(admin, DEV.ns, customer, "bind");
      // 3. The customer's two-step pipeline (controller: admission, submission, finalizer, status,
      //    next step, Events; sidecar: the GPU provider's callbacks). The job timeout is the chart's
      //    (600 s), so only callbacks through the sidecar can complete the jobs in time.
      await admin.create(
        "mediajobs",
        DEV.ns,
        mediaJob("podcast", {
          workload: "asr",
          account: customer,
          input: { audio: "s3://bucket/episode.wav" },
          then: [{ workload: "tts", input: { voice: "en-1" } }],
        }) as never,
      );
      await waitForPhase(admin, DEV.ns, "podcast", "Completed", 30_000);
      // The next step is created by the pass after the one that completed the first.
      const first = await eventually(async () => {
        const j = await admin.get<MediaJob>("mediajobs", DEV.ns, "podcast");
        return j?.status?.nextJob ? j : undefined;
      });
      const second = await waitForPhase(admin, DEV.ns, first.status!.nextJob!, "Completed", 30_000);
      expect(second.status?.output).toBeTruthy();
      for (const job of [first, second]) {
        await eventually(async () => {
          const j = await admin.get<MediaJob>("mediajobs", DEV.ns, job.metadata.name);
          return (j?.metadata.finalizers ?? []).length === 0;
        });
      }
      // Events, recorded as the ServiceAccount; none says a callback went missing.
      const reasons = await eventually(
        async () => {
          const events = await kc
            .makeApiClient(CoreV1Api)
            .listNamespacedEvent({ namespace: DEV.ns, fieldSelector: "involvedObject.name=podcast" });
          const r = events.items.map((e) => e.reason);
          return r.includes("Submitted") && r.includes("NextStepCreated") ? r : undefined;
          // Events are written after the status they tell of; a loaded machine (the whole suite beside
          // the chaos test) takes its time.
        },
        { timeoutMs: 60_000 },
      );
      expect(reasons).not.toContain("RecoveredMissedCallback");
    },
  );

  it("garbage-collects expired PaymentEvents (list, delete)", async () => {
    const gc = startPaymentEventGc({ api: asSa, namespace: DEV.ns, retentionMs: 0, log: silent });
    try {
      expect(await gc.runOnce()).toBeGreaterThan(0);
    } finally {
      gc.stop();
    }
    expect((await admin.list("paymentevents", DEV.ns)).items).toEqual([]);
  });

  it("is refused everything the chart does not grant", async () => {
    const authz = impersonating(kc, sa).makeApiClient(AuthorizationV1Api);
    const can = async (a: V1ResourceAttributes) =>
      (await authz.createSelfSubjectAccessReview({ body: { spec: { resourceAttributes: a } } })).status
        ?.allowed ?? false;
    const split = (resource: string) => {
      const [res, subresource] = resource.split("/");
      return { resource: res, ...(subresource ? { subresource } : {}) };
    };
    // Everything granted, in its own namespace...
    for (const rule of EXPECTED_RULES) {
      for (const resource of rule.resources) {
        for (const verb of rule.verbs) {
          const a = { namespace: DEV.ns, group: rule.apiGroups[0], verb, ...split(resource) };
          expect(await can(a), `${verb} ${resource} in ${DEV.ns}`).toBe(true);
          // ...and none of it in the other environment's namespace, nor cluster-wide.
          expect(await can({ ...a, namespace: STAGING.ns }), `${verb} ${resource} in ${STAGING.ns}`).toBe(
            false,
          );
          expect(await can({ ...a, namespace: "" }), `${verb} ${resource} cluster-wide`).toBe(false);
        }
      }
    }
    const lease = { group: "coordination.k8s.io", resource: "leases", namespace: DEV.ns };
    expect(await can({ ...lease, verb: "get", name: leaseName(DEV.ns) })).toBe(true);
    expect(await can({ ...lease, verb: "update", name: leaseName(DEV.ns) })).toBe(true);
    expect(await can({ ...lease, verb: "create" })).toBe(true);

    const refused: V1ResourceAttributes[] = [
      // Verbs on the project's resources that no code path uses.
      ...["update", "delete", "deletecollection"].map((verb) => ({ group: G, resource: "mediajobs", verb })),
      { group: G, resource: "mediajobs", subresource: "status", verb: "patch" },
      { group: G, resource: "mediajobs", subresource: "finalizers", verb: "update" },
      ...["get", "create", "update", "patch", "delete"].map((verb) => ({
        group: G,
        resource: "gpuendpoints",
        verb,
      })),
      { group: G, resource: "gpuendpoints", subresource: "status", verb: "patch" },
      ...["update", "patch", "delete"].map((verb) => ({ group: G, resource: "billingaccounts", verb })),
      ...["update", "patch", "deletecollection"].map((verb) => ({
        group: G,
        resource: "paymentevents",
        verb,
      })),
      // Everything else.
      ...["get", "list", "patch", "delete"].map((verb) => ({ group: "", resource: "events", verb })),
      ...["get", "list", "delete"].map((verb) => ({ group: "events.k8s.io", resource: "events", verb })),
      ...["get", "list", "watch", "create"].map((verb) => ({ group: "", resource: "secrets", verb })),
      { group: "", resource: "configmaps", verb: "get" },
      { group: "", resource: "pods", verb: "list" },
      { group: "", resource: "serviceaccounts", subresource: "token", verb: "create" },
      { group: "apps", resource: "deployments", verb: "get" },
      { group: "rbac.authorization.k8s.io", resource: "roles", verb: "get" },
      { ...lease, verb: "list" },
      { ...lease, verb: "delete", name: leaseName(DEV.ns) },
      { ...lease, verb: "get", name: "kube-controller-manager" },
      { ...lease, verb: "update", name: "some-other-lease" },
      { group: "apiextensions.k8s.io", resource: "customresourcedefinitions", verb: "get" },
    ].map((a) => ({ namespace: DEV.ns, ...a }));
    refused.push(
      { group: "", resource: "namespaces", verb: "list" },
      {
        group: "coordination.k8s.io",
        resource: "leases",
        namespace: STAGING.ns,
        verb: "get",
        name: leaseName(STAGING.ns),
      },
    );
    for (const a of refused) expect(await can(a), JSON.stringify(a)).toBe(false);

    // And real calls, refused with 403.
    const status = (p: Promise<unknown>) =>
      p.then(
        () => 200,
        (err: { code?: number }) => err.code,
      );
    expect(await status(asSa.delete("mediajobs", DEV.ns, "podcast"))).toBe(403);
    expect(await status(asSa.list("mediajobs", STAGING.ns))).toBe(403);
    expect(
      await status(
        (await asSa.typed()).core.readNamespacedSecret({ namespace: DEV.ns, name: FULLNAME(DEV) }),
      ),
    ).toBe(403);
    expect(await admin.get("mediajobs", DEV.ns, "podcast")).toBeDefined();
  });

  it("helm test checks /readyz of both containers, and fails when one does not answer", async () => {
    await eventually(() => manager.synced, { message: "the controller's caches to sync" });
    const saved = readyzUrls;
    readyzUrls = `${sidecar.url}/readyz http://127.0.0.1:9/readyz`; // nothing listens on port 9
    const failed = await run(["test", DEV.release, "-n", DEV.ns, "--timeout", "60s"]);
    expect(failed.status).not.toBe(0);
    expect(hooks.runs.at(-1)).toMatchObject({ kind: "Pod", exitCode: 1 });
    expect(hooks.runs.at(-1)!.output).toContain(`${sidecar.url}/readyz: 200`);
    readyzUrls = saved;
    const passed = await run(["test", DEV.release, "-n", DEV.ns, "--timeout", "60s"]);
    expect(passed.status, passed.stderr).toBe(0);
    expect(passed.stdout).toMatch(/Phase:\s+Succeeded/);
    expect(hooks.runs.at(-1)!.output).toContain(`${health.url}/readyz: 200`);
  });

  it("a second release watching the same namespace competes for the same Lease: one controller leads", async () => {
    const second = { release: "mo-dev-b", ns: "media-dev-b", env: "dev" };
    const res = await run([
      "install",
      second.release,
      CHART_DIR,
      "-n",
      second.ns,
      "--create-namespace",
      "-f",
      valuesFile("values-dev.yaml"),
      "--set",
      `watchNamespace=${DEV.ns}`,
      "--set",
      "gpuEndpoints.enabled=false", // the first release owns the namespace's GpuEndpoints
      "--set",
      `secrets.gpuProviderApiKey=${SIM_KEY}`,
      // Its own timings, to see them reach the controller through the environment.
      "--set",
      "leaderElection.leaseDurationSeconds=37",
      "--set",
      "leaderElection.renewDeadlineSeconds=20",
      "--set",
      "leaderElection.retryPeriodSeconds=1",
    ]);
    expect(res.status, res.stderr).toBe(0);
    const d = await kc
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ namespace: second.ns, name: FULLNAME(second) });
    const pod = d.spec!.template.spec!;
    const secondEnv = parseEnv({
      ...(await containerEnv(second.ns, pod, pod.containers[0]!, "mo-dev-b-pod-0")),
      GPU_PROVIDER_API_URL: sim.url,
      CALLBACK_BASE_URL: sidecar.url,
      WEBHOOKS_HOST: "127.0.0.1",
      CONTROLLER_METRICS_PORT: "0",
      LOG_LEVEL: "silent",
    });
    // The same Lease, though the releases and their namespaces differ.
    expect([secondEnv.LEADER_ELECTION_NAMESPACE, secondEnv.LEADER_ELECTION_ID]).toEqual([
      DEV.ns,
      leaseName(DEV.ns),
    ]);
    const leases = kc.makeApiClient(CoordinationV1Api);
    const before = await leases.readNamespacedLease({ namespace: DEV.ns, name: leaseName(DEV.ns) });
    expect(before.spec?.holderIdentity).toBe("mo-dev-pod-0_local");

    // Both controllers run; at no moment do both lead. The second runs as its pod would: the
    // product's runController, with a token of its release's ServiceAccount.
    let both = 0;
    const sampler = setInterval(() => {
      if (manager.isLeader && other?.manager.isLeader) both++;
    }, 20);
    try {
      other = await runController(secondEnv, silent, {
        kubeconfig: await serviceAccountKubeconfig(second.ns, pod.serviceAccountName!),
      });
      const second_ = other.manager;
      await eventually(() => second_.synced, { message: "the second controller's caches to sync" });
      expect(manager.isLeader).toBe(true);
      expect(second_.isLeader).toBe(false);
      // The leader stops (a rollout, a drain) and releases the Lease: the other release's controller takes it.
      await manager.stop();
      await eventually(() => second_.isLeader, { message: "the second release's controller to lead" });
    } finally {
      clearInterval(sampler);
    }
    expect(both).toBe(0);
    const after = await leases.readNamespacedLease({ namespace: DEV.ns, name: leaseName(DEV.ns) });
    expect(after.spec?.holderIdentity).toBe(other.manager.elector!.identity);
    expect(after.spec?.leaseTransitions).toBe((before.spec?.leaseTransitions ?? 0) + 1);
    // The release's leaderElection values, through the environment, are the controller's.
    expect(after.spec?.leaseDurationSeconds).toBe(37);
  });
});

describe("webhooks.separateDeployment: the sidecar with a ServiceAccount of its own", () => {
  const SEP = { release: "mo-sep", ns: "media-sep", env: "dev" };
  let sidecar: RunningWebhookServer | undefined;

  afterAll(async () => {
    await sidecar?.close();
    await run(["uninstall", SEP.release, "-n", SEP.ns]);
  });

  it("its rules are enough for the sidecar's work and hold none of the controller's", async () => {
    const res = await installEnv(SEP, [...DEV_SETTINGS, "--set", "webhooks.separateDeployment=true"]);
    expect(res.status, res.stderr).toBe(0);
    const apps = kc.makeApiClient(AppsV1Api);
    const d = await apps.readNamespacedDeployment({ namespace: SEP.ns, name: `${FULLNAME(SEP)}-webhooks` });
    const pod = d.spec!.template.spec!;
    expect(pod.containers.map((c) => c.name)).toEqual(["webhooks"]);
    const sa = `system:serviceaccount:${SEP.ns}:${pod.serviceAccountName}`;
    expect(pod.serviceAccountName).toBe(`${FULLNAME(SEP)}-webhooks`);
    const asSidecar = new KubeApi(impersonating(kc, sa));
    const env = parseEnv({
      ...(await containerEnv(SEP.ns, pod, pod.containers[0]!, "mo-sep-webhooks-0")),
      WEBHOOKS_HOST: "127.0.0.1",
      LOG_LEVEL: "silent",
    });
    expect(env.LEADER_ELECTION).toBe(false); // no controller beside it: every replica collects
    sidecar = await startWebhookServer({
      api: asSidecar,
      env,
      log: silent,
      registry: new Registry(),
      host: "127.0.0.1",
      port: 0,
    });
    // A subscription event: the record, the replay memory's watch, the BillingAccount.
    const customer = `cus_${randomBytes(4).toString("hex")}`;
    const answer = await deliverPaymentEvent(sidecar.url, subscriptionCreated(customer), WEBHOOK_SECRET);
    expect(answer.status, answer.text).toBe(200);
    const account = await admin.get<BillingAccount>("billingaccounts", SEP.ns, billingAccountName(customer));
    expect(account?.status?.subscriptionStatus).toBe("active");
    expect((await request(`${sidecar.url}/readyz`)).statusCode).toBe(200);
    // Garbage collection of old records.
    const gc = startPaymentEventGc({ api: asSidecar, namespace: SEP.ns, retentionMs: 0, log: silent });
    try {
      expect(await gc.runOnce()).toBeGreaterThan(0);
    } finally {
      gc.stop();
    }

    const authz = impersonating(kc, sa).makeApiClient(AuthorizationV1Api);
    const can = async (a: V1ResourceAttributes) =>
      (await authz.createSelfSubjectAccessReview({ body: { spec: { resourceAttributes: a } } })).status
        ?.allowed ?? false;
    const at = (a: V1ResourceAttributes) => ({ namespace: SEP.ns, group: G, ...a });
    // A callback reads its job and writes its status.
    expect(await can(at({ resource: "mediajobs", verb: "get" }))).toBe(true);
    expect(await can(at({ resource: "mediajobs", subresource: "status", verb: "update" }))).toBe(true);
    // Its AdoptedByCallback Warning (docs/helm.md, RBAC).
    expect(await can(at({ group: "events.k8s.io", resource: "events", verb: "create" }))).toBe(true);
    // Before adopting a provider job, it asks which MediaJobs hold it (a field selector).
    expect(await can(at({ resource: "mediajobs", verb: "list" }))).toBe(true);
    // None of the controller's rights.
    for (const a of [
      at({ resource: "mediajobs", verb: "create" }),
      at({ resource: "mediajobs", verb: "patch" }),
      at({ resource: "gpuendpoints", verb: "list" }),
      at({ resource: "gpuendpoints", subresource: "status", verb: "update" }),
      at({ group: "coordination.k8s.io", resource: "leases", verb: "create" }),
      at({ group: "coordination.k8s.io", resource: "leases", verb: "get", name: leaseName(SEP.ns) }),
      at({ group: "", resource: "secrets", verb: "get" }),
    ])
      expect(await can(a), JSON.stringify(a)).toBe(false);
    // And the controller's ServiceAccount none of the sidecar's: no payment records, no new
    // accounts; it writes an account's status only for its period usage (the usage reporter).
    const controllerSa = `system:serviceaccount:${SEP.ns}:${FULLNAME(SEP)}`;
    const controllerAuthz = impersonating(kc, controllerSa).makeApiClient(AuthorizationV1Api);
    const controllerCan = async (a: V1ResourceAttributes) =>
      (await controllerAuthz.createSelfSubjectAccessReview({ body: { spec: { resourceAttributes: a } } }))
        .status?.allowed ?? false;
    expect(await controllerCan(at({ resource: "billingaccounts", verb: "watch" }))).toBe(true);
    expect(
      await controllerCan(at({ resource: "billingaccounts", subresource: "status", verb: "update" })),
    ).toBe(true);
    for (const a of [
      at({ resource: "paymentevents", verb: "create" }),
      at({ resource: "paymentevents", verb: "get" }),
      at({ resource: "billingaccounts", verb: "create" }),
      at({ resource: "billingaccounts", verb: "update" }),
    ])
      expect(await controllerCan(a), JSON.stringify(a)).toBe(false);
  });
});

describe("the built-in user roles (the CRD release's aggregated ClusterRoles)", () => {
  const status = (p: Promise<unknown>) =>
    p.then(
      () => 200,
      (err: { code?: number }) => err.code,
    );
  const rbac = rbacApi;
  const bind = (user: string, role: string, namespace: string) =>
    rbac().createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: `${user}-${role}` },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
        subjects: [{ kind: "User", name: user, apiGroup: "rbac.authorization.k8s.io" }],
      },
    });

  beforeAll(async () => {
    // Before: the local control plane has no kube-controller-manager, so the built-in roles
    // have their aggregation rules but no rules yet.
    expect((await rbac().readClusterRole({ name: "edit" })).rules ?? []).toEqual([]);
    await aggregateClusterRoles();
    await bind("alice", "edit", DEV.ns);
    await bind("bob", "view", DEV.ns);
    await bind("carol", "media-orchestrator-billing-view", DEV.ns);
  });

  it("a user with only `edit` in a namespace creates MediaJobs but can neither read nor write billing", async () => {
    const alice = new KubeApi(impersonating(kc, "alice"));
    expect(
      await status(
        alice.create(
          "mediajobs",
          DEV.ns,
          mediaJob("alice-job", { workload: "asr", input: { audio: "s3://bucket/a.wav" } }) as never,
        ),
      ),
    ).toBe(200);
    expect(await status(alice.list("mediajobs", DEV.ns))).toBe(200);
    expect(await status(alice.delete("mediajobs", DEV.ns, "alice-job"))).toBe(200);
    // Provider state: readable, never writable. Billing state (every customer's plan, usage and
    // payments, side by side in the sidecar's namespace): neither.
    expect(await status(alice.list("billingaccounts", DEV.ns))).toBe(403);
    expect(await status(alice.list("paymentevents", DEV.ns))).toBe(403);
    expect(await status(alice.list("gpuendpoints", DEV.ns))).toBe(200);
    const account = makeBillingAccount("cus_free_ride").named("cus-free-ride").build();
    expect(await status(alice.create("billingaccounts", DEV.ns, account))).toBe(403);
    const authz = impersonating(kc, "alice").makeApiClient(AuthorizationV1Api);
    const can = async (a: V1ResourceAttributes) =>
      (await authz.createSelfSubjectAccessReview({ body: { spec: { resourceAttributes: a } } })).status
        ?.allowed ?? false;
    const refused: V1ResourceAttributes[] = [
      ...["get", "list", "watch"].flatMap((verb) =>
        ["billingaccounts", "paymentevents"].map((resource) => ({ resource, verb })),
      ),
      ...["create", "update", "patch", "delete"].flatMap((verb) =>
        ["billingaccounts", "paymentevents", "gpuendpoints"].map((resource) => ({ resource, verb })),
      ),
      ...["update", "patch"].flatMap((verb) =>
        ["mediajobs", "billingaccounts", "paymentevents", "gpuendpoints"].map((resource) => ({
          resource,
          subresource: "status",
          verb,
        })),
      ),
    ];
    for (const a of refused)
      expect(await can({ group: G, namespace: DEV.ns, ...a }), JSON.stringify(a)).toBe(false);
    // Only where the role is bound.
    expect(await can({ group: G, namespace: STAGING.ns, resource: "mediajobs", verb: "create" })).toBe(false);
  });

  it("a user with `view` reads MediaJobs but not billing state, and creates nothing", async () => {
    const bob = new KubeApi(impersonating(kc, "bob"));
    expect(await status(bob.list("mediajobs", DEV.ns))).toBe(200);
    expect(await status(bob.list("billingaccounts", DEV.ns))).toBe(403);
    expect(await status(bob.list("paymentevents", DEV.ns))).toBe(403);
    expect(
      await status(
        bob.create(
          "mediajobs",
          DEV.ns,
          mediaJob("bob-job", { workload: "asr", input: { audio: "s3://bucket/b.wav" } }) as never,
        ),
      ),
    ).toBe(403);
  });

  it("an operator bound to the chart's billing-view role reads billing state, writes none of it", async () => {
    const carol = new KubeApi(impersonating(kc, "carol"));
    expect(await status(carol.list("billingaccounts", DEV.ns))).toBe(200);
    expect(await status(carol.list("paymentevents", DEV.ns))).toBe(200);
    const account = makeBillingAccount("cus_by_hand").named("cus-by-hand").build();
    expect(await status(carol.create("billingaccounts", DEV.ns, account))).toBe(403);
    // Only where it is bound.
    expect(await status(carol.list("billingaccounts", STAGING.ns))).toBe(403);
  });
});

/**
 * What kube-controller-manager's clusterrole-aggregation controller does, to a fixed point: every
 * ClusterRole with an aggregationRule gets the rules of the ClusterRoles its selectors match
 * (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#aggregated-clusterroles).
 */
async function aggregateClusterRoles(): Promise<void> {
  const api = rbacApi();
  for (let changed = true, pass = 0; changed && pass < 10; pass++) {
    changed = false;
    const roles = (await api.listClusterRole()).items;
    for (const role of roles) {
      const selectors = role.aggregationRule?.clusterRoleSelectors ?? [];
      if (!selectors.length) continue;
      const matches = (labels: Record<string, string>) =>
        selectors.some((sel) => Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v));
      const rules: NonNullable<typeof role.rules> = [];
      const seen = new Set<string>();
      for (const source of roles) {
        if (source.metadata?.name === role.metadata?.name || !matches(source.metadata?.labels ?? {}))
          continue;
        for (const rule of source.rules ?? []) {
          const key = JSON.stringify(rule);
          if (!seen.has(key)) {
            seen.add(key);
            rules.push(rule);
          }
        }
      }
      if (JSON.stringify(rules) === JSON.stringify(role.rules ?? [])) continue;
      await api.replaceClusterRole({ name: role.metadata!.name!, body: { ...role, rules } });
      changed = true;
    }
  }
}

/** A kubeconfig with a real token of a ServiceAccount (TokenRequest), as its pod would have. */
async function serviceAccountKubeconfig(namespace: string, name: string): Promise<string> {
  const token = await kc.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    namespace,
    name,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const sa = new KubeConfig();
  sa.loadFromOptions({
    clusters: [{ name: "local", server: cp.url, skipTLSVerify: true }],
    users: [{ name, token: token.status!.token }],
    contexts: [{ name: "sa", cluster: "local", user: name }],
    currentContext: "sa",
  });
  const path = join(mkdtempSync(join(tmpdir(), "mo-helm-sa-")), "kubeconfig");
  writeFileSync(path, sa.exportConfig());
  return path;
}

function rbacApi(): RbacAuthorizationV1Api {
  return kc.makeApiClient(RbacAuthorizationV1Api);
}

describe("upgrading and uninstalling", () => {
  it("helm upgrade keeps the generated callback secret; an explicit one replaces it", async () => {
    const before = await callbackSecret(DEV.ns, FULLNAME(DEV));
    const initRuns = hooks.runs.filter((r) => r.kind === "Job").length;
    await ok([
      "upgrade",
      DEV.release,
      CHART_DIR,
      "-n",
      DEV.ns,
      "-f",
      valuesFile("values-dev.yaml"),
      ...DEV_SETTINGS,
      "--set",
      "logLevel=info",
    ]);
    expect(await callbackSecret(DEV.ns, FULLNAME(DEV))).toBe(before);
    await ok(["upgrade", DEV.release, CHART_DIR, "-n", DEV.ns, "--reuse-values", "--set", "replicaCount=2"]);
    expect(await callbackSecret(DEV.ns, FULLNAME(DEV))).toBe(before);
    // The pre-upgrade hook ran each time and found the Secret.
    const upgrades = hooks.runs.filter((r) => r.kind === "Job").slice(initRuns);
    expect(upgrades.map((r) => [r.namespace, r.exitCode, r.output.trim()])).toEqual([
      [DEV.ns, 0, `Secret ${DEV.ns}/${FULLNAME(DEV)}-callback exists: kept`],
      [DEV.ns, 0, `Secret ${DEV.ns}/${FULLNAME(DEV)}-callback exists: kept`],
    ]);
    const d = await kc
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ namespace: DEV.ns, name: FULLNAME(DEV) });
    expect(d.spec?.replicas).toBe(2);
    await ok([
      "upgrade",
      STAGING.release,
      CHART_DIR,
      "-n",
      STAGING.ns,
      "-f",
      valuesFile("values-staging.yaml"),
      ...ingressArgs(STAGING.env),
      "--set",
      "callback.secret=rotated-1-0123456789abcdef0123456789abcdef",
    ]);
    expect(await callbackSecret(STAGING.ns, FULLNAME(STAGING))).toBe(
      "rotated-1-0123456789abcdef0123456789abcdef",
    );
    // The CRD release upgrades in place (how a new chart version brings new CRD schemas).
    expect(
      await ok(["upgrade", CRD_RELEASE[0], CHART_DIR, "-n", CRD_RELEASE[1], "--set", "crds.only=true"]),
    ).toContain("REVISION: 2");
  });

  it("uninstalling an environment removes its objects; uninstalling the CRD release keeps the CRDs", async () => {
    await ok(["uninstall", STAGING.release, "-n", STAGING.ns]);
    expect((await admin.list("gpuendpoints", STAGING.ns)).items).toEqual([]);
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    expect((await rbac.listNamespacedRole({ namespace: STAGING.ns })).items).toEqual([]);
    expect((await admin.list("gpuendpoints", DEV.ns)).items).toHaveLength(3); // dev untouched

    const out = await ok(["uninstall", CRD_RELEASE[0], "-n", CRD_RELEASE[1]]);
    expect(out).toContain("These resources were kept due to the resource policy");
    for (const name of CRDS)
      await admin.rawJson("GET", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
    expect((await admin.list("mediajobs", DEV.ns)).items.length).toBeGreaterThan(0);
  });
});
