// BillingAccounts as the payment webhooks leave them: a customer's jobs are admitted only while its
// subscription is active, so tests of admission, plans and usage start from such an account.
import { billingAccountName, type BillingAccount, type BillingAccountStatus } from "../../src/crds/index.js";
import type { KubeApi } from "../../src/k8s/api.js";
import { changeBinding } from "../../src/cli/bind.js";
import { makeBillingAccount } from "./builders.js";

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
