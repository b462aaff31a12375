// A BillingAccount is the customer's whose id its spec.customerId holds, never merely the object
// whose name billingAccountName() gives (40 bits of a hash, and a name anyone with write access
// can give any object): an account of that name holding another customer's id is not found. A job
// naming the customer is not admitted on it, and a subscription event for the customer is never
// written onto it.
import { describe, expect, it } from "vitest";
import { billingAccountName, type BillingAccount } from "../../src/crds/index.js";
import { KubeApi } from "../../src/k8s/api.js";
import { applySubscriptionChange } from "../../src/webhooks/billing.js";
import { makeBillingAccount } from "../support/builders.js";
import { eventually, testKubeConfig } from "../support/kube.js";
import { condition, controllerStackForTests, mediaJob } from "../support/stack.js";
import type { MediaJob } from "../../src/crds/mediajob.js";
import { changeBinding } from "../../src/cli/bind.js";

const kc = testKubeConfig();
const api = new KubeApi(kc);
const s = controllerStackForTests(kc, { name: "account-lookup", endpoints: ["asr"] });

/** An active account under the name of `named`'s account, holding `holds` as its customer. */
async function accountNamedFor(named: string, holds: string): Promise<BillingAccount> {
  const name = billingAccountName(named);
  await api.create<BillingAccount>("billingaccounts", s.ns, makeBillingAccount(holds).named(name).build());
  const { object } = await api.updateStatusWithRetry<BillingAccount>("billingaccounts", s.ns, name, (a) => ({
    ...a,
    status: { ...a.status, subscriptionStatus: "active", lastEventId: "evt_1", lastEventCreated: 1 },
  }));
  return object!;
}

describe("a BillingAccount lookup", () => {
  it("does not admit a job on an account of its customer's name that is another customer's", async () => {
    await accountNamedFor("cus_victim", "cus_impostor");
    await changeBinding(api, s.ns, "cus_victim", "bind");
    await api.create(
      "mediajobs",
      s.ns,
      mediaJob("named-victim", {
        workload: "asr",
        account: "cus_victim",
        input: { audio: "a.wav" },
      }) as never,
    );
    const held = await eventually(async () => {
      const j = await api.get<MediaJob>("mediajobs", s.ns, "named-victim");
      return condition(j, "Admitted") ? j : undefined;
    });
    expect(condition(held, "Admitted")).toMatchObject({ status: "False", reason: "AccountUnknown" });
    expect(held.status?.phase).toBe("Pending");
  });

  it("never writes a customer's subscription event onto another customer's account", async () => {
    const impostor = await accountNamedFor("cus_other_victim", "cus_other_impostor");
    await expect(
      applySubscriptionChange(
        { api, namespace: s.ns },
        {
          customerId: "cus_other_victim",
          subscriptionStatus: "canceled",
          eventId: "evt_2",
          created: 2,
        },
        new Date().toISOString(),
      ),
    ).rejects.toThrow(/is customer cus_other_impostor's, not cus_other_victim's/);
    const after = await api.get<BillingAccount>("billingaccounts", s.ns, impostor.metadata.name);
    expect(after?.status?.subscriptionStatus).toBe("active");
    expect(after?.metadata.resourceVersion).toBe(impostor.metadata.resourceVersion);
  });
});
