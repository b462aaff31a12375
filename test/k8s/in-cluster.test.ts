// The containers' configuration inside a cluster, without @kubernetes/client-node: the service
// account's token and CA read from files in a directory laid out as the kubelet lays out
// /var/run/secrets/kubernetes.io/serviceaccount, the apiserver from KUBERNETES_SERVICE_HOST/PORT.
// Against the real control plane, with a real ServiceAccount token (TokenRequest) and the
// apiserver's real CA; the files are then rotated in place, as the kubelet does.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { rootCertificates } from "node:tls";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GROUP, VERSION } from "../../src/crds/common.js";
import { KubeApi } from "../../src/k8s/api.js";
import { loadClusterConfig } from "../../src/k8s/cluster-config.js";
import { kubeError } from "../../src/k8s/errors.js";
import { InClusterConfig, inClusterConfig } from "../../src/k8s/in-cluster.js";
import { resolvedModules } from "../support/module-loads.js";
import { createTestNamespace, eventually, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import { servingCa } from "../support/serving-ca.js";

const kc = testKubeConfig();
const admin = new KubeApi(kc);
const server = new URL(kc.getCurrentCluster()!.server);
const SA = "media-orchestrator";
let ns = "";
let dir = "";
let token = "";

/** The ServiceAccount, (re)created: a new one has a new uid, so the old one's tokens stop working. */
async function recreateServiceAccount(): Promise<void> {
  const path = `/api/v1/namespaces/${ns}/serviceaccounts`;
  await admin.rawJson("DELETE", `${path}/${SA}`).catch((err: unknown) => {
    if (kubeError(err)?.code !== 404) throw err;
  });
  await eventually(
    () =>
      admin
        .rawJson("POST", path, { metadata: { name: SA } })
        .then(() => true)
        .catch((err: unknown) => (kubeError(err)?.reason === "AlreadyExists" ? false : Promise.reject(err))),
    { message: "the ServiceAccount recreated" },
  );
}

/** A token of the ServiceAccount, as the kubelet gets one for the pod (TokenRequest). */
async function requestToken(): Promise<string> {
  const res = await admin.rawJson<{ status: { token: string } }>(
    "POST",
    `/api/v1/namespaces/${ns}/serviceaccounts/${SA}/token`,
    { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 3600 } },
  );
  return res.status.token;
}

/** The status the apiserver answers a list of MediaJobs made with `token` (a probe beside the client). */
async function statusWith(token: string): Promise<number> {
  const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });
  try {
    const res = await request(`${server.origin}/apis/${GROUP}/${VERSION}/namespaces/${ns}/mediajobs`, {
      headers: { authorization: `Bearer ${token}` },
      dispatcher,
    });
    await res.body.dump();
    return res.statusCode;
  } finally {
    await dispatcher.close();
  }
}

/** A new token on disk, once the apiserver accepts it and refuses `old` (its caches may lag a moment). */
async function rotateToken(old: string): Promise<string> {
  await recreateServiceAccount();
  const token = await requestToken();
  await eventually(async () => (await statusWith(old)) === 401 && (await statusWith(token)) === 200, {
    message: "the old token refused and the new one accepted",
  });
  write("token", token);
  return token;
}

const write = (file: string, content: string) => writeFileSync(join(dir, file), content);
const env = () => ({ KUBERNETES_SERVICE_HOST: server.hostname, KUBERNETES_SERVICE_PORT: server.port });
/** What the service account may do here: list MediaJobs in the test's namespace. */
const listJobs = (api: KubeApi) => api.list("mediajobs", ns).then((r) => r.items.length);

beforeAll(async () => {
  ns = await createTestNamespace(kc, "in-cluster");
  dir = mkdtempSync(join(tmpdir(), "mo-serviceaccount-"));
  await admin.rawJson("POST", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
    metadata: { name: "read-jobs" },
    rules: [{ apiGroups: [GROUP], resources: ["mediajobs"], verbs: ["get", "list"] }],
  });
  await admin.rawJson("POST", `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    metadata: { name: "read-jobs" },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "read-jobs" },
    subjects: [{ kind: "ServiceAccount", name: SA, namespace: ns }],
  });
  await recreateServiceAccount();
  token = await requestToken();
  write("token", `${token}\n`);
  write("ca.crt", await servingCa(server));
  write("namespace", ns);
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("in-cluster configuration", () => {
  it("is found from the service host and the token file, and only then", async () => {
    expect(inClusterConfig(env(), dir)?.getCurrentCluster().server).toBe(`https://${server.host}`);
    expect(
      inClusterConfig({ ...env(), KUBERNETES_SERVICE_HOST: "fd00::1" }, dir)?.getCurrentCluster(),
    ).toEqual({ name: "inCluster", server: `https://[fd00::1]:${server.port}` });
    expect(inClusterConfig({}, dir)).toBeUndefined();
    expect(inClusterConfig(env(), join(dir, "absent"))).toBeUndefined();
    // A kubeconfig file comes first, as with client-node's loadFromDefault.
    const home = mkdtempSync(join(tmpdir(), "mo-home-"));
    try {
      const found = await loadClusterConfig({ env: { ...env(), HOME: home }, serviceAccountDir: dir });
      expect(found).toBeInstanceOf(InClusterConfig);
      const explicit = await loadClusterConfig({
        path: testKubeconfigPath(),
        env: { ...env(), HOME: home },
        serviceAccountDir: dir,
      });
      expect(explicit).not.toBeInstanceOf(InClusterConfig);
      expect(explicit.getCurrentCluster()?.server).toBe(server.origin);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it("reaches the apiserver with the service account's token and CA", async () => {
    const api = new KubeApi(inClusterConfig(env(), dir)!);
    expect(await listJobs(api)).toBe(0);
    // The token is the service account's: it may list MediaJobs here, and nothing else.
    await expect(api.list("mediajobs", "default")).rejects.toMatchObject({ code: 403 });
  });

  it("keeps working when the token is rotated and the old one revoked (the controller's and the sidecar's client alike)", async () => {
    // Credentials kept for an hour: only the 401 can make the client read the new token.
    const api = new KubeApi(inClusterConfig(env(), dir)!, { credentialsTtlMs: 3_600_000 });
    expect(await listJobs(api)).toBe(0);
    // The old token stops working (its ServiceAccount is gone), the new one is on disk.
    token = await rotateToken(token);
    // The next call meets a 401 with the token it cached, reads the file and tries once more.
    expect(await listJobs(api)).toBe(0);
    expect(await listJobs(api)).toBe(0);
  });

  it("rebuilds its connections when the CA file is rotated", async () => {
    const api = new KubeApi(inClusterConfig(env(), dir)!, { credentialsTtlMs: 500 });
    const rightCa = await servingCa(server);
    expect(await listJobs(api)).toBe(0);
    // A CA that did not sign the apiserver's certificate: once read, no connection may trust it,
    // including the pooled one that was opened under the old CA.
    write("ca.crt", rootCertificates[0]!);
    const refused: Error = await eventually(
      () =>
        listJobs(api).then(
          () => undefined,
          (err: unknown) => err as Error,
        ),
      { timeoutMs: 5_000, message: "calls refused under a CA that did not sign the apiserver" },
    );
    expect(String((refused as { code?: string }).code ?? refused.message)).toMatch(
      /CERT|certificate|SELF_SIGNED|UNABLE_TO_VERIFY/i,
    );
    write("ca.crt", rightCa);
    await eventually(() => listJobs(api).then((n) => n === 0), {
      timeoutMs: 5_000,
      message: "calls accepted again under the rotated-back CA",
    });
  });

  it("is all the containers load: their code never imports @kubernetes/client-node", () => {
    const loads = (modules: string[]) =>
      resolvedModules(modules).some((url) => url.includes("/node_modules/@kubernetes/client-node/"));
    const containers = ["log", "config/env", "idle-collection", "controller/run", "webhooks/run"];
    expect(loads(containers.map((m) => `./src/${m}.ts`))).toBe(false);
    // The kubeconfig loader does load it: the hook sees what it is asked to find.
    expect(loads(["./src/k8s/config.ts"])).toBe(true);
  });
});
