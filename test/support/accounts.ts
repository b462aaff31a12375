// BillingAccounts as the payment webhooks leave them: a customer's jobs are admitted only while its
// subscription is active, so tests of admission, plans and usage start from such an account; and
// jobs that ended with usage recorded against such an account, as the CLI's usage views read them.
import {
  billingAccountName,
  type BillingAccount,
  type BillingAccountStatus,
  type MediaJob,
  type UsageAttempt,
} from "../../src/crds/index.js";
import type { KubeApi } from "../../src/k8s/api.js";
import { changeBinding } from "../../src/cli/bind.js";
import { makeBillingAccount, makeMediaJob } from "./builders.js";

/**
 * The customer's BillingAccount with its subscription active and `status` over what it holds
 * (a plan's price ids, a period's usage), created when it does not exist yet. The status is read,
 * changed and written again on a conflict: the controller writes on the account too. The namespace
 * is bound to the customer (kubectl media bind), as an operator does for a tenant's namespace.
 */
export async function activeAccount(
  api: KubeApi,
  ns: string,
  customerId: string,
  status: Partial<BillingAccountStatus> = {},
): Promise<BillingAccount> {
  await changeBinding(api, ns, customerId, "bind");
  const name = billingAccountName(customerId);
  if (!(await api.get<BillingAccount>("billingaccounts", ns, name)))
    await api.create<BillingAccount>("billingaccounts", ns, makeBillingAccount(customerId).build());
  const { object } = await api.updateStatusWithRetry<BillingAccount>("billingaccounts", ns, name, (acct) => ({
    ...acct,
    status: { ...acct.status, subscriptionStatus: "active", ...status },
  }));
  return object!;
}

/**
 * A MediaJob of `customer` that ended Completed with `attempts`' usage recorded, its status written
 * directly as a controller would have left it (none runs): attempt n ran as `p-NAME-n` at the
 * provider, ended two hours ago and was billed 0 s, unless the attempt says otherwise. The usage's
 * billed seconds are the attempts' sum.
 */
export async function endedJobWithUsage(
  api: KubeApi,
  ns: string,
  name: string,
  customer: string,
  attempts: Array<Partial<UsageAttempt>>,
): Promise<MediaJob> {
  const created = await api.create<MediaJob>("mediajobs", ns, makeMediaJob(name).account(customer).build());
  return api.replaceStatus<MediaJob>("mediajobs", {
    ...created,
    status: {
      phase: "Completed",
      usage: {
        workload: "asr",
        account: customer,
        billedSeconds: attempts.reduce((s, a) => s + (a.billedSeconds ?? 0), 0),
        attempts: attempts.map((a, i) => ({
          attempt: i + 1,
          providerJobId: `p-${name}-${i + 1}`,
          providerStatus: "COMPLETED",
          endedAt: new Date(Date.now() - 2 * 3_600_000).toISOString(),
          billedSeconds: 0,
          ...a,
        })),
      },
    },
  });
}
