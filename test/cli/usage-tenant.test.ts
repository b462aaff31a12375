// `kubectl media usage` as a tenant: a ServiceAccount with the rules the chart aggregates into
// `view`, in its own namespace, a real token, no access to BillingAccounts
// (every customer's, in the operator's namespace). It sees the usage its own namespace's jobs
// record and nothing of another customer; the accounts' namespace stays closed to it.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { beforeAll, describe, expect, it } from "vitest";
import type { UsageAttempt } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { activeAccount, endedJobWithUsage } from "../support/accounts.js";
import { kubectlMedia } from "../support/cli.js";
import { createTestNamespace, eventually, testKubeConfig } from "../support/kube.js";
import { bindChartRole } from "../support/tenants.js";
import { ACCOUNTS_USAGE_ANNOTATION, accountsSummary } from "../../src/mediajob/tenancy.js";
import { changeBinding } from "../../src/cli/bind.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let operatorNs = "";
let tenantNs = "";
let tenantKubeconfig = "";

/** A job of `customer` that ended ten minutes ago, billed `seconds`, its report `meter`. */
async function jobWithUsage(
  ns: string,
  name: string,
  customer: string,
  seconds: number,
  meter: UsageAttempt["meter"],
) {
  await endedJobWithUsage(api, ns, name, customer, [
    {
      providerJobId: `p-${name}`,
      endedAt: new Date(Date.now() - 600_000).toISOString(),
      billedSeconds: seconds,
      meter,
      counted: true,
    },
  ]);
}

/** A kubeconfig with a real token of a ServiceAccount holding the chart's `view` in `ns` only. */
async function tenantKubeconfigFor(ns: string): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: "tenant" } } });
  await bindChartRole(kc, ns, "view", { kind: "ServiceAccount", name: "tenant", namespace: ns });
  const token = await core.createNamespacedServiceAccountToken({
    namespace: ns,
    name: "tenant",
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const cluster = kc.getCurrentCluster()!;
  const tenant = new KubeConfig();
  tenant.loadFromOptions({
    clusters: [{ name: "local", server: cluster.server, skipTLSVerify: true }],
    users: [{ name: "tenant", token: token.status!.token }],
    contexts: [{ name: "tenant", cluster: "local", user: "tenant", namespace: ns }],
    currentContext: "tenant",
  });
  const path = join(mkdtempSync(join(tmpdir(), "mo-tenant-")), "kubeconfig");
  writeFileSync(path, tenant.exportConfig(), { mode: 0o600 });
  return path;
}

beforeAll(async () => {
  operatorNs = await createTestNamespace(kc, "usage-operator");
  tenantNs = await createTestNamespace(kc, "usage-tenant");
  await activeAccount(api, operatorNs, "cus_tenant", {
    usage: { periodStart: "2026-11-01T00:00:00Z", usedSeconds: 50, reportedSeconds: 40 },
  });
  await activeAccount(api, operatorNs, "cus_other_customer", {
    usage: { periodStart: "2026-11-01T00:00:00Z", usedSeconds: 9_999, reportedSeconds: 9_999 },
  });
  await changeBinding(api, tenantNs, "cus_tenant", "bind"); // the tenant's namespace bills its customer
  await jobWithUsage(tenantNs, "mine-1", "cus_tenant", 30, "Reported");
  await jobWithUsage(tenantNs, "mine-2", "cus_tenant", 20, "Pending");
  await jobWithUsage(operatorNs, "theirs", "cus_other_customer", 9_999, "Reported");
  tenantKubeconfig = await tenantKubeconfigFor(tenantNs);
}, 60_000);

describe("kubectl media usage as a tenant", () => {
  it("shows the usage its own namespace's jobs record, and no other customer", async () => {
    const run = await kubectlMedia(["usage", "-n", tenantNs], {}, tenantKubeconfig);
    expect(run.code, run.stderr).toBe(0);
    const [header, ...rows] = run.stdout.trim().split("\n");
    expect(header).toMatch(
      /^CUSTOMER\s+PERIOD\s+USED\s+LIMIT\s+BILLED \(THESE JOBS\)\s+UNREPORTED\s+OLDEST UNREPORTED\s+REFUSED$/,
    );
    expect(rows).toHaveLength(1);
    // Without the Namespace's summary (not written, or not readable): the jobs' own figures only.
    expect(rows[0]).toMatch(/^cus_tenant\s+-\s+-\s+-\s+50\s+20 s \(1\)\s+\S+\s+0$/);
    expect(run.stderr).toMatch(/BillingAccounts .* are not readable with these credentials/);
    const all = `${run.stdout}${run.stderr}`;
    expect(all).not.toContain("cus_other_customer");
    expect(all).not.toContain("9999");

    const json = await kubectlMedia(["usage", "-n", tenantNs, "-o", "json"], {}, tenantKubeconfig);
    expect(JSON.parse(json.stdout)).toMatchObject({
      billingAccountsReadable: false,
      items: [{ customer: "cus_tenant", jobsSeconds: 50, unreportedSeconds: 20, unreportedAttempts: 1 }],
    });
  });

  it("with its Namespace readable (the built-in view grants it), shows its accounts' period usage and limit", async () => {
    // What the controller keeps on a bound Namespace (test/controller/tenancy.test.ts shows it written).
    await api.mergePatch("namespaces", "", tenantNs, {
      metadata: {
        annotations: {
          [ACCOUNTS_USAGE_ANNOTATION]: accountsSummary([
            {
              customerId: "cus_tenant",
              status: {
                subscriptionStatus: "active",
                usage: {
                  periodStart: "2026-11-01T00:00:00Z",
                  periodEnd: "2026-12-01T00:00:00Z",
                  usedSeconds: 50,
                  reportedSeconds: 40,
                  limitSeconds: 3600,
                },
              },
            },
          ])!,
        },
      },
    });
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: tenantNs,
      body: {
        metadata: { name: "own-namespace" },
        rules: [{ apiGroups: [""], resources: ["namespaces"], verbs: ["get"] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: tenantNs,
      body: {
        metadata: { name: "own-namespace" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "own-namespace" },
        subjects: [{ kind: "ServiceAccount", name: "tenant", namespace: tenantNs }],
      },
    });
    const run = await eventually(async () => {
      const r = await kubectlMedia(["usage", "-n", tenantNs], {}, tenantKubeconfig);
      return /cus_tenant\s+2026-11-01\.\.2026-12-01\s+50\s+3600\s+50\s/.test(r.stdout) ? r : undefined;
    });
    expect(run.code, run.stderr).toBe(0);
    expect(`${run.stdout}${run.stderr}`).not.toContain("cus_other_customer");
  });

  it("cannot read the operator's namespace, where every customer's account lives", async () => {
    const run = await kubectlMedia(["usage", "-n", operatorNs], {}, tenantKubeconfig);
    expect(run.code).not.toBe(0);
    expect(`${run.stdout}${run.stderr}`).not.toContain("cus_other_customer");
  });
});
