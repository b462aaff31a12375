// BillingAccount's room for plan and usage on the real apiserver: whole seconds only, shown by
// `kubectl get bacct -o wide`.
import { execFileSync } from "node:child_process";
import { beforeAll, describe, expect, it } from "vitest";
import { makeBillingAccount } from "../support/builders.js";
import { KubeApi, type KubeObject } from "../../src/k8s/api.js";
import { describeError } from "../../src/k8s/errors.js";
import { createTestNamespace, testKubeConfig, testKubeconfigPath } from "../support/kube.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";

type Account = KubeObject & { status?: Record<string, unknown> };

const account = (customerId: string): Account => makeBillingAccount(customerId).build();

const usage = {
  periodStart: "2026-11-01T00:00:00Z",
  usedSeconds: 3600,
  reportedSeconds: 3540,
  limitSeconds: 36_000,
};

beforeAll(async () => {
  ns = await createTestNamespace(kc, "bacct-usage");
});

describe("BillingAccount plan and usage status", () => {
  it("keeps the prices and the period's usage, and kubectl -o wide shows used and limit seconds", async () => {
    const created = await api.create<Account>("billingaccounts", ns, account("cus_usage"));
    const written = await api.replaceStatus<Account>("billingaccounts", {
      ...created,
      status: { subscriptionStatus: "active", priceIds: ["price_small"], usage },
    });
    expect(written.status).toMatchObject({ priceIds: ["price_small"], usage });
    const out = execFileSync(
      "kubectl",
      ["--kubeconfig", testKubeconfigPath(), "-n", ns, "get", "bacct", "-o", "wide"],
      { encoding: "utf8" },
    );
    expect(out.split("\n")[0]).toMatch(/NAME\s+CUSTOMER\s+SUBSCRIPTION\s+USED\s+LIMIT\s+UPDATED\s+AGE/);
    expect(out).toMatch(/cus_usage\s+active\s+3600\s+36000\s/);
    // The plan's prices too, last.
    expect(out.split("\n")[0]).toMatch(/AGE\s+PRICES$/);
    expect(out).toMatch(/\["price_small"\]\s*$/m);
    // The default view stays as it was.
    const narrow = execFileSync("kubectl", ["--kubeconfig", testKubeconfigPath(), "-n", ns, "get", "bacct"], {
      encoding: "utf8",
    });
    expect(narrow.split("\n")[0]).not.toMatch(/USED/);
  });

  it.each([
    ["fractional seconds", { ...usage, usedSeconds: 1.5 }, /usedSeconds/],
    ["negative seconds", { ...usage, reportedSeconds: -1 }, /reportedSeconds/],
    ["no period start", { usedSeconds: 1, reportedSeconds: 0 }, /periodStart/],
  ])("the apiserver refuses %s", async (_name, bad, field) => {
    const created = await api.create<Account>(
      "billingaccounts",
      ns,
      account(`cus_bad_${Math.random().toString(36).slice(2, 8)}`),
    );
    let msg = "";
    try {
      await api.replaceStatus<Account>("billingaccounts", { ...created, status: { usage: bad } });
    } catch (err) {
      msg = describeError(err);
    }
    expect(msg).toMatch(field);
  });
});
