// The chart installed into a real control plane exactly as docs/helm.md says: the CRD release
// first, then one release per environment (dev and staging side by side). Then the operator,
// both processes, run here but as the chart's ServiceAccount (impersonation) and configured from
// the installed Deployment and Secret, takes a paying customer's pipeline from webhook to
// completion: the RBAC is enough. Every verb the chart does not grant is refused: it is not more
// than enough. `helm upgrade` keeps the callback secret; uninstalling keeps the CRDs.
//
// This file starts its own control plane: the run's shared one already has the CRDs (installed by
// the global setup, not by Helm), and a user's cluster does not.
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  AppsV1Api,
  AuthorizationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  type V1Container,
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
import type { Simulator } from "../../src/simulator/server.js";
import { startPaymentEventGc } from "../../src/webhooks/gc.js";
import { recordedOutcome } from "../../src/webhooks/paymentrecord.js";
import { startWebhookServer, type RunningWebhookServer } from "../../src/webhooks/server.js";
import { signStripePayload } from "../../src/webhooks/signature.js";
import { startControlPlane, type RunningControlPlane } from "../support/controlplane.js";
import { eventually } from "../support/kube.js";
import {
  CHART_DIR,
  EXPECTED_RULES,
  expectedLeaseRules,
  helm,
  helmBinary,
  valuesFile,
} from "../support/helm.js";
import {
  mediaJob,
  SIM_KEY,
  startManager,
  startTestSimulator,
  waitForPhase,
  waitForReady,
} from "../support/stack.js";

const CRD_RELEASE = ["media-orchestrator-crds", "media-system"] as const;
const DEV = { release: "mo-dev", ns: "media-dev", env: "dev" };
const STAGING = { release: "mo-staging", ns: "media-staging", env: "staging" };
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

const run = (args: string[]) => helm(args, { kubeconfig: cp.kubeconfig });
function ok(args: string[]): string {
  const res = run(args);
  if (res.status !== 0) throw new Error(`helm ${args.join(" ")} failed: ${res.stderr}`);
  return res.stdout;
}

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

async function callbackSecret(ns: string, name: string): Promise<string> {
  const s = await kc.makeApiClient(CoreV1Api).readNamespacedSecret({ namespace: ns, name });
  return Buffer.from(s.data?.CALLBACK_SECRET ?? "", "base64").toString();
}

/** What the container would see: literal values, the downward API, and its Secret's keys. */
async function containerEnv(ns: string, c: V1Container, podName: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const core = kc.makeApiClient(CoreV1Api);
  for (const e of c.env ?? []) {
    if (e.value !== undefined) out[e.name] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === "metadata.name") out[e.name] = podName;
    else if (e.valueFrom?.fieldRef?.fieldPath === "metadata.namespace") out[e.name] = ns;
    else if (e.valueFrom?.secretKeyRef) {
      const ref = e.valueFrom.secretKeyRef;
      const secret = await core.readNamespacedSecret({ namespace: ns, name: ref.name! });
      const v = secret.data?.[ref.key];
      if (v !== undefined) out[e.name] = Buffer.from(v, "base64").toString();
      else if (!ref.optional) throw new Error(`${c.name}: ${e.name}: key ${ref.key} missing in ${ref.name}`);
    }
  }
  return out;
}

beforeAll(async () => {
  helmBinary();
  cp = await startControlPlane({ dataDir: mkdtempSync(join(tmpdir(), "mo-helm-controlplane-")) });
  kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfig);
  admin = new KubeApi(kc);
}, 15 * 60_000);

afterAll(async () => {
  await cp?.stop();
});

describe("installing per environment", () => {
  it("an environment release before the CRD release fails and says why", () => {
    const res = installEnv(DEV, DEV_SETTINGS);
    expect(res.status).not.toBe(0);
    expect(res.stderr).toContain('no matches for kind "GpuEndpoint"');
    expect(res.stderr).toContain("ensure CRDs are installed first");
    expect(ok(["list", "--all-namespaces", "-q"]).trim()).toBe(""); // nothing half-installed
  });

  it("the CRD release installs the four CRDs, Established, owned by it and kept on uninstall", async () => {
    const [release, ns] = CRD_RELEASE;
    const out = ok([
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
    // The release carries nothing else.
    expect(ok(["get", "manifest", release, "-n", ns]).match(/^kind: (\S+)/gm)).toEqual(
      CRDS.map(() => "kind: CustomResourceDefinition"),
    );
  });

  it("dev and staging install side by side, each with its own objects and GpuEndpoints", async () => {
    const dev = installEnv(DEV, DEV_SETTINGS);
    expect(dev.status, dev.stderr).toBe(0);
    expect(dev.stdout).toContain('environment "dev", release mo-dev in media-dev');
    const staging = installEnv(STAGING);
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
      expect(secret).toMatch(/^[A-Za-z0-9]{48}$/);
    }
    // Each environment has its own callback secret.
    expect(await callbackSecret(DEV.ns, FULLNAME(DEV))).not.toBe(
      await callbackSecret(STAGING.ns, FULLNAME(STAGING)),
    );
    const statuses = ok(["list", "-A", "-o", "json"]);
    expect(
      (JSON.parse(statuses) as Array<{ name: string; status: string }>).map((r) => [r.name, r.status]).sort(),
    ).toEqual([
      ["media-orchestrator-crds", "deployed"],
      ["mo-dev", "deployed"],
      ["mo-staging", "deployed"],
    ]);
  });

  it("a second release cannot take the CRDs over (the documented reason for crds.install=false)", () => {
    const res = run([
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
      expect(strip(lease.rules ?? [])).toEqual(expectedLeaseRules(FULLNAME(r)));
    }
    const clusterRoles = await rbac.listClusterRole({
      labelSelector: "app.kubernetes.io/part-of=media-orchestrator",
    });
    expect(clusterRoles.items).toEqual([]);
  });
});

describe("the operator as the chart's ServiceAccount", () => {
  let sa: string;
  let env: Env;
  let asSa: KubeApi;
  let sim: Simulator;
  let manager: Manager;
  let sidecar: RunningWebhookServer;

  beforeAll(async () => {
    const d = await kc
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ namespace: DEV.ns, name: FULLNAME(DEV) });
    const pod = d.spec!.template.spec!;
    sa = `system:serviceaccount:${DEV.ns}:${pod.serviceAccountName}`;
    asSa = new KubeApi(impersonating(kc, sa));
    const [controller, webhooks] = pod.containers;
    const controllerEnv = await containerEnv(DEV.ns, controller!, "mo-dev-pod-0");
    // Both containers get the same configuration.
    expect(await containerEnv(DEV.ns, webhooks!, "mo-dev-pod-0")).toEqual(controllerEnv);
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
    sidecar = await startWebhookServer({
      api: asSa,
      env: parseEnv(base),
      log: silent,
      registry: new Registry(),
      host: "127.0.0.1",
      port: 0,
    });
    env = parseEnv({ ...base, CALLBACK_BASE_URL: sidecar.url, LOG_LEVEL: "silent" });
    expect(env).toMatchObject({
      WATCH_NAMESPACE: DEV.ns,
      LEADER_ELECTION: true,
      LEADER_ELECTION_NAMESPACE: DEV.ns,
      LEADER_ELECTION_ID: FULLNAME(DEV),
      MEDIA_ENV: "dev",
      GPU_PROVIDER_API_KEY: SIM_KEY,
    });
    // The pod's identity in the Lease is its POD_NAME (downward API) plus a random suffix.
    manager = startManager(impersonating(kc, sa), sim, env, { identity: `${env.POD_NAME}_local` });
    await manager.start();
  });

  afterAll(async () => {
    await manager?.stop();
    await sidecar?.close();
    await sim?.close();
  });

  it("leads through the release's Lease", async () => {
    await eventually(() => manager.isLeader, { message: "the manager to lead" });
    const lease = await kc
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: DEV.ns, name: FULLNAME(DEV) });
    expect(lease.spec?.holderIdentity).toBe("mo-dev-pod-0_local");
  });

  it("brings the environment's GpuEndpoints to Ready", async () => {
    for (const w of ["asr", "tts", "render"]) {
      const ep = await waitForReady(admin, DEV.ns, `media-${w}-dev`);
      expect(ep.status?.endpointName).toBe(`media-${w}-dev`);
    }
  });

  it("takes a paying customer's pipeline from the payment webhook to completion", async () => {
    const customer = `cus_${randomBytes(4).toString("hex")}`;
    // 1. The payment provider reports an active subscription (sidecar: PaymentEvent, BillingAccount).
    const event = {
      id: `evt_${randomBytes(6).toString("hex")}`,
      object: "event",
      type: "customer.subscription.created",
      created: Math.floor(Date.now() / 1000),
      livemode: false,
      data: { object: { id: `sub_${customer}`, object: "subscription", customer, status: "active" } },
    };
    const body = JSON.stringify(event);
    const res = await request(`${sidecar.url}/webhooks/payment_provider`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "stripe-signature": signStripePayload(body, WEBHOOK_SECRET, Math.floor(Date.now() / 1000)),
      },
      body,
    });
    expect(res.statusCode, await res.body.text()).toBe(200);
    const record = await admin.get<PaymentEvent>("paymentevents", DEV.ns, paymentEventName(event.id));
    expect(record && recordedOutcome(record)).toBe("Processed");
    const account = await admin.get<BillingAccount>("billingaccounts", DEV.ns, billingAccountName(customer));
    expect(account?.status?.subscriptionStatus).toBe("active");

    // 2. The customer's two-step pipeline (controller: admission, submission, finalizer, status,
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
    const reasons = await eventually(async () => {
      const events = await kc
        .makeApiClient(CoreV1Api)
        .listNamespacedEvent({ namespace: DEV.ns, fieldSelector: "involvedObject.name=podcast" });
      const r = events.items.map((e) => e.reason);
      return r.includes("Submitted") && r.includes("NextStepCreated") ? r : undefined;
    });
    expect(reasons).not.toContain("RecoveredMissedCallback");
  });

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
    expect(await can({ ...lease, verb: "get", name: FULLNAME(DEV) })).toBe(true);
    expect(await can({ ...lease, verb: "update", name: FULLNAME(DEV) })).toBe(true);
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
      ...["get", "list", "watch", "create"].map((verb) => ({ group: "", resource: "secrets", verb })),
      { group: "", resource: "configmaps", verb: "get" },
      { group: "", resource: "pods", verb: "list" },
      { group: "", resource: "serviceaccounts", subresource: "token", verb: "create" },
      { group: "apps", resource: "deployments", verb: "get" },
      { group: "rbac.authorization.k8s.io", resource: "roles", verb: "get" },
      { ...lease, verb: "list" },
      { ...lease, verb: "delete", name: FULLNAME(DEV) },
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
        name: FULLNAME(STAGING),
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
    expect(await status(asSa.core.readNamespacedSecret({ namespace: DEV.ns, name: FULLNAME(DEV) }))).toBe(
      403,
    );
    expect(await admin.get("mediajobs", DEV.ns, "podcast")).toBeDefined();
  });
});

describe("upgrading and uninstalling", () => {
  it("helm upgrade keeps the generated callback secret; an explicit one replaces it", async () => {
    const before = await callbackSecret(DEV.ns, FULLNAME(DEV));
    ok([
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
    ok(["upgrade", DEV.release, CHART_DIR, "-n", DEV.ns, "--reuse-values", "--set", "replicaCount=2"]);
    expect(await callbackSecret(DEV.ns, FULLNAME(DEV))).toBe(before);
    const d = await kc
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ namespace: DEV.ns, name: FULLNAME(DEV) });
    expect(d.spec?.replicas).toBe(2);
    ok([
      "upgrade",
      STAGING.release,
      CHART_DIR,
      "-n",
      STAGING.ns,
      "-f",
      valuesFile("values-staging.yaml"),
      "--set",
      "callback.secret=rotated-1",
    ]);
    expect(await callbackSecret(STAGING.ns, FULLNAME(STAGING))).toBe("rotated-1");
    // The CRD release upgrades in place (how a new chart version brings new CRD schemas).
    expect(
      ok(["upgrade", CRD_RELEASE[0], CHART_DIR, "-n", CRD_RELEASE[1], "--set", "crds.only=true"]),
    ).toContain("REVISION: 2");
  });

  it("uninstalling an environment removes its objects; uninstalling the CRD release keeps the CRDs", async () => {
    ok(["uninstall", STAGING.release, "-n", STAGING.ns]);
    expect((await admin.list("gpuendpoints", STAGING.ns)).items).toEqual([]);
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    expect((await rbac.listNamespacedRole({ namespace: STAGING.ns })).items).toEqual([]);
    expect((await admin.list("gpuendpoints", DEV.ns)).items).toHaveLength(3); // dev untouched

    const out = ok(["uninstall", CRD_RELEASE[0], "-n", CRD_RELEASE[1]]);
    expect(out).toContain("These resources were kept due to the resource policy");
    for (const name of CRDS)
      await admin.rawJson("GET", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
    expect((await admin.list("mediajobs", DEV.ns)).items.length).toBeGreaterThan(0);
  });
});
