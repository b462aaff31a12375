// Account bursts: one account's MediaJobs, built to be created at once, and the active
// BillingAccount they run under. make bench's fair-share scenario (bench/fairness.ts) and make
// chaos (its burst accounts, its customers on plans) build their accounts' work with these.
import { billingAccountName, type BillingAccount } from "../src/crds/billingaccount.js";
import { API_VERSION } from "../src/crds/common.js";
import type { MediaJob } from "../src/crds/mediajob.js";
import type { KubeApi, KubeObject } from "../src/k8s/api.js";
import { isAlreadyExists } from "../src/k8s/errors.js";
import { changeBinding } from "../src/cli/bind.js";

export interface BurstJob {
  name: string;
  body: KubeObject;
}

/** What a burst's job `i` is: its name and its spec, the account aside. */
type BurstJobSpec = (i: number) => {
  name: string;
  spec: Omit<MediaJob["spec"], "account">;
};

/** `count` single MediaJobs of `account`, in the order they are to be created. */
export function burstJobs(account: string, count: number, jobOf: BurstJobSpec): BurstJob[] {
  return Array.from({ length: count }, (_, i) => {
    const { name, spec } = jobOf(i);
    return {
      name,
      body: {
        apiVersion: API_VERSION,
        kind: "MediaJob",
        metadata: { name },
        spec: { ...spec, account },
      } as KubeObject,
    };
  });
}

/**
 * The customer's BillingAccount, active (as a subscription event would have made it), on the given
 * prices when there are any. Tried again for up to a minute while the control plane is away; an
 * account that already exists (an earlier try landed) is brought to that state.
 */
export async function activateAccount(
  api: KubeApi,
  namespace: string,
  customerId: string,
  priceIds?: readonly string[],
): Promise<void> {
  // Its namespace may bill it (kubectl media bind), as an operator binds a tenant's namespace.
  await changeBinding(api, namespace, customerId, "bind");
  const name = billingAccountName(customerId);
  const wanted = (a: BillingAccount) =>
    a.status?.subscriptionStatus === "active" &&
    (priceIds === undefined || String(a.status.priceIds) === String([...priceIds].sort()));
  for (let tries = 0; ; tries++) {
    try {
      const account =
        (await api.get<BillingAccount>("billingaccounts", namespace, name)) ??
        (await api
          .create<BillingAccount>("billingaccounts", namespace, {
            apiVersion: API_VERSION,
            kind: "BillingAccount",
            metadata: { name },
            spec: { customerId },
          } as never)
          .catch(async (err: unknown) => {
            if (isAlreadyExists(err))
              return (await api.get<BillingAccount>("billingaccounts", namespace, name))!;
            throw err;
          }));
      if (!wanted(account))
        await api.replaceStatus("billingaccounts", {
          ...account,
          status: {
            ...account.status,
            subscriptionStatus: "active",
            ...(priceIds !== undefined && { priceIds: [...priceIds].sort() }),
          },
        } as never);
      return;
    } catch (err) {
      if (tries >= 120) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}
