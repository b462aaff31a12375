// BillingAccount.status.usage.limitSeconds kept equal to the account's plan (kubectl get bacct -o
// wide shows it beside the period's usage). Leader only; a write only when the figure differs, so
// the watch event of our own write changes nothing. Written only once the account has a period's
// usage: the billing period is the usage recorder's to start, not this one's to make up.
import type { Logger } from "pino";
import type { BillingAccount } from "../crds/billingaccount.js";
import type { KubeApi } from "../k8s/api.js";
import { describeError, isConflict, isNotFound } from "../k8s/errors.js";
import { planFor, type Plans } from "../mediajob/plans.js";

export class AccountLimits {
  constructor(
    private readonly api: Pick<KubeApi, "replaceStatus">,
    private readonly plans: Plans,
    private readonly log: Logger,
  ) {}

  /** Writes the plan's limit on the account if it shows another (or none while a plan applies). */
  async sync(account: BillingAccount): Promise<void> {
    const usage = account.status?.usage;
    if (!usage) return;
    const want = planFor(this.plans, account.status?.priceIds ?? [])?.gpuSecondsPerPeriod;
    if (usage.limitSeconds === want) return;
    const { limitSeconds: _old, ...rest } = usage;
    try {
      await this.api.replaceStatus("billingaccounts", {
        ...account,
        status: { ...account.status, usage: { ...rest, ...(want !== undefined && { limitSeconds: want }) } },
      });
    } catch (err) {
      // A newer version is on its way through the watch, and is looked at then.
      if (isConflict(err) || isNotFound(err)) return;
      this.log.warn(
        { account: account.metadata.name, err: describeError(err) },
        "could not write the plan's limit",
      );
    }
  }
}
