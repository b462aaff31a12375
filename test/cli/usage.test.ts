// `kubectl media usage` against the real control plane: BillingAccounts and MediaJob statuses
// written directly (no controller), the command run in-process through the CLI's own main() with
// its real argument parsing and output. It shows each account's period usage beside what was
// reported and what waits, names one account, and exits 1 when a report needs a person.
import { beforeAll, describe, expect, it } from "vitest";
import { billingAccountName, type BillingAccountUsage } from "../../src/crds/billingaccount.js";
import type { UsageAttempt } from "../../src/crds/mediajob.js";
import { KubeApi } from "../../src/k8s/api.js";
import { activeAccount, endedJobWithUsage } from "../support/accounts.js";
import { kubectlMedia } from "../support/cli.js";
import { createTestNamespace, testKubeConfig, testKubeconfigPath } from "../support/kube.js";
import { changeBinding } from "../../src/cli/bind.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
let ns = "";

const media = (...args: string[]) => kubectlMedia(args, { KUBECONFIG: testKubeconfigPath() });

const account = (customerId: string, usage?: BillingAccountUsage) =>
  activeAccount(api, ns, customerId, usage && { usage });

async function jobWithUsage(
  name: string,
  customer: string,
  attempts: Array<Partial<UsageAttempt>>,
): Promise<void> {
  await changeBinding(api, ns, customer, "bind");
  await endedJobWithUsage(api, ns, name, customer, attempts);
}

beforeAll(async () => {
  ns = await createTestNamespace(kc, "cli-usage");
  await account("cus_paid", {
    periodStart: "2026-11-01T00:00:00Z",
    periodEnd: "2026-12-01T00:00:00Z",
    usedSeconds: 120,
    reportedSeconds: 100,
    limitSeconds: 3600,
  });
  await account("cus_quiet");
  await jobWithUsage("reported", "cus_paid", [{ billedSeconds: 100, meter: "Reported", counted: true }]);
  await jobWithUsage("waiting", "cus_paid", [
    { billedSeconds: 12, meter: "Pending", counted: true },
    {
      billedSeconds: 8,
      meter: "Pending",
      counted: true,
      endedAt: new Date(Date.now() - 600_000).toISOString(),
    },
  ]);
}, 60_000);

describe("kubectl media usage", () => {
  it("lists each account's period usage beside what was reported and the backlog", async () => {
    const run = await media("usage", "-n", ns);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const [header, ...rows] = run.stdout.trim().split("\n");
    expect(header).toMatch(
      /^CUSTOMER\s+PERIOD\s+USED\s+REPORTED\s+LIMIT\s+UNREPORTED\s+OLDEST UNREPORTED\s+REFUSED\s+PROVIDER COST\s+COST PER SECOND$/,
    );
    expect(rows[0]).toMatch(
      /^cus_paid\s+2026-11-01\.\.2026-12-01\s+120\s+100\s+3600\s+20 s \(2\)\s+120m\s+0\s+-\s+-$/,
    );
    expect(rows[1]).toMatch(/^cus_quiet\s+-\s+-\s+-\s+-\s+0 s \(0\)\s+-\s+0\s+-\s+-$/);
  });

  it("names one account (by customer id or object name), as JSON; an unknown one is an error", async () => {
    for (const name of ["cus_paid", billingAccountName("cus_paid")]) {
      const run = await media("usage", name, "-n", ns, "-o", "json");
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual({
        items: [
          {
            customer: "cus_paid",
            account: billingAccountName("cus_paid"),
            periodStart: "2026-11-01T00:00:00Z",
            periodEnd: "2026-12-01T00:00:00Z",
            usedSeconds: 120,
            reportedSeconds: 100,
            limitSeconds: 3600,
            providerCostMicros: null,
            providerCostPerUsedSecondMicros: null,
            workerCostMeteredMicros: null,
            unreportedAttempts: 2,
            unreportedSeconds: 20,
            oldestUnreportedSeconds: expect.any(Number) as number,
            refusedAttempts: 0,
            afterInvoiceAttempts: 0,
            afterInvoiceSeconds: 0,
            uncountedAttempts: 0,
            uncountedSeconds: 0,
            accountMissing: false,
          },
        ],
      });
    }
    const unknown = await media("usage", "cus_nobody", "-n", ns);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no account "cus_nobody"/);
    expect((await media("usage", "a", "b", "-n", ns)).code).toBe(2);
  });

  it("exits 1 when a report was refused: a person decides", async () => {
    await jobWithUsage("refused", "cus_quiet", [{ billedSeconds: 7, meter: "Refused", message: "too old" }]);
    const run = await media("usage", "cus_quiet", "-n", ns);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/cus_quiet\s+-\s+-\s+-\s+-\s+0 s \(0\)\s+-\s+1/);
    expect(run.stderr).toMatch(/1 job attempt\(s\) were not reported/);
  });

  it("shows the provider's cost allocated to the account, and the cost of a billed second", async () => {
    await activeAccount(api, ns, "cus_costly", {
      usage: { periodStart: "2026-11-01T00:00:00Z", usedSeconds: 300, reportedSeconds: 300 },
      cost: {
        periodStart: "2026-11-01T00:00:00Z",
        settledUntil: "2026-11-01T00:00:00Z",
        settledMicros: 0,
        settledExecutionMs: 0,
        allocatedMicros: 1_234_567,
        executionMs: 290_000,
      },
    });
    const json = await media("usage", "cus_costly", "-n", ns, "-o", "json");
    expect(JSON.parse(json.stdout).items[0]).toMatchObject({
      providerCostMicros: 1_234_567,
      providerCostPerUsedSecondMicros: 4_116,
    });
    const run = await media("usage", "cus_costly", "-n", ns);
    expect(run.stdout).toMatch(/cus_costly\s.*\$1\.234567\s+\$0\.004116$/m);
  });

  it("counts usage accepted after its invoice, says it is on no invoice, and exits 1: a person bills it", async () => {
    await account("cus_late");
    await jobWithUsage("late", "cus_late", [
      { billedSeconds: 9, meter: "Reported", afterInvoice: true },
      { billedSeconds: 2, meter: "Reported" },
    ]);
    const json = await media("usage", "cus_late", "-n", ns, "-o", "json");
    expect(JSON.parse(json.stdout).items[0]).toMatchObject({
      afterInvoiceAttempts: 1,
      afterInvoiceSeconds: 9,
    });
    const run = await media("usage", "cus_late", "-n", ns);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /cus_late: 9 GPU seconds of 1 job attempt\(s\) were accepted after .* on no invoice/,
    );
  });

  it("usage waiting for a BillingAccount that is gone is shown, and exits 1: a person decides", async () => {
    await jobWithUsage("orphan", "cus_gone", [{ billedSeconds: 30, meter: "Reported" }]);
    const run = await media("usage", "cus_gone", "-n", ns);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^cus_gone\s+-\s+-\s+-\s+-\s+0 s \(0\)\s+-\s+0\s+-\s+-$/m);
    expect(run.stderr).toMatch(
      /customer cus_gone has no BillingAccount .*: 30 GPU seconds of 1 job attempt\(s\) wait/,
    );
    const json = await media("usage", "cus_gone", "-n", ns, "-o", "json");
    expect(JSON.parse(json.stdout)).toMatchObject({
      items: [
        {
          customer: "cus_gone",
          account: null,
          uncountedAttempts: 1,
          uncountedSeconds: 30,
          accountMissing: true,
        },
      ],
    });
  });
});
