// The leader's follow-up of runs left at the provider by deleted MediaJobs (src/mediajob/orphan.ts):
// each BillingAccount's status.orphans is asked about at the provider until the run ends, then
// billed and counted into the account's period usage in one write (the record and the count change
// together, so a crash counts it once), then metered with the job's own identifier (the payment
// provider keeps one event per identifier: a report the job made before is not made twice), and
// the record goes. Runs only on the leader, with the usage reporter's interval.
import type { Logger } from "pino";
import type { BillingAccount, OrphanedRun } from "../../crds/billingaccount.js";
import type { KubeApi } from "../../k8s/api.js";
import { describeError } from "../../k8s/errors.js";
import { endedOrphan, orphanSettled, type OrphanEnd } from "../../mediajob/orphan.js";
import { meterSendVerdict, type UsageSettings } from "../../mediajob/usage.js";
import { isProviderError, type GpuProviderClient } from "../../provider/index.js";
import { countedUsage } from "../../billing/period.js";
import type { MeterSender } from "./meter-client.js";

export interface OrphanFollowerDeps {
  api: Pick<KubeApi, "updateStatusWithRetry">;
  accounts: { list(namespace?: string): BillingAccount[] };
  accountNamespace: string;
  provider: Pick<GpuProviderClient, "status">;
  /** Undefined: metering is off (the runs are still counted into the accounts' usage). */
  meter: () => MeterSender | undefined;
  settings: UsageSettings;
  log: Logger;
  leading: () => boolean;
  now?: () => Date;
  /** The records being followed, after each pass (a gauge). */
  onFollowed?: (count: number) => void;
}

/** A change of one record, applied to the account's current copy in a read-modify-write. */
type Change = (o: OrphanedRun) => OrphanedRun;

export class OrphanFollower {
  constructor(private readonly d: OrphanFollowerDeps) {}

  private now(): Date {
    return this.d.now?.() ?? new Date();
  }

  async pass(): Promise<void> {
    let followed = 0;
    for (const acct of this.d.accounts.list(this.d.accountNamespace)) {
      const orphans = acct.status?.orphans ?? [];
      if (!orphans.length) continue;
      if (!this.d.leading()) return;
      try {
        followed += await this.follow(acct, orphans);
      } catch (err) {
        this.d.log.warn(
          { account: acct.spec.customerId, err: describeError(err) },
          "could not follow the account's runs left at the provider",
        );
      }
    }
    this.d.onFollowed?.(followed);
  }

  /** One account's records: ended ones billed and counted, pending reports sent, settled ones gone. */
  private async follow(acct: BillingAccount, orphans: readonly OrphanedRun[]): Promise<number> {
    const now = this.now().toISOString();
    const changes = new Map<string, Change>();
    for (const o of orphans) {
      if (o.usage) continue;
      const end = await this.endOf(o);
      const ended = end && endedOrphan(o, end, this.d.settings, now);
      if (ended?.usage) {
        const usage = ended.usage;
        changes.set(keyOf(o), (cur) => (cur.usage ? cur : { ...cur, usage }));
      }
    }
    let current = await this.write(acct, changes);
    const meter = this.d.meter();
    for (const o of current?.status?.orphans ?? []) {
      if (o.usage?.meter !== "Pending" || !this.d.leading()) continue;
      if (!meter) break; // metering off here: the reports wait for a controller that meters
      const change = await this.report(meter, o);
      if (change) current = (await this.write(current!, new Map([[keyOf(o), change]]))) ?? current;
    }
    return (current?.status?.orphans ?? []).length;
  }

  /** The run's end at the provider, "lost" when it answers 404; undefined while it runs. */
  private async endOf(o: OrphanedRun): Promise<OrphanEnd | undefined> {
    try {
      const result = await this.d.provider.status(o.endpointId, o.providerJobId);
      return result;
    } catch (err) {
      if (isProviderError(err, "JOB_NOT_FOUND")) return "lost";
      this.d.log.info(
        { providerJobId: o.providerJobId, err: describeError(err) },
        "run left at the provider not read",
      );
      return undefined;
    }
  }

  /** Sends one ended run's report; the change it makes to the record, or undefined to try later. */
  private async report(meter: MeterSender, o: OrphanedRun): Promise<Change | undefined> {
    const u = o.usage!;
    const nowS = Math.floor(this.now().getTime() / 1000);
    const verdict = meterSendVerdict(Math.floor(Date.parse(u.endedAt) / 1000), undefined, nowS);
    if (verdict.send === "never") return (cur) => withMeter(cur, "Refused", verdict.reason);
    const result = await meter.send({
      eventName: u.eventName!,
      customer: o.account,
      value: u.billedSeconds!,
      identifier: u.identifier!,
      timestamp: verdict.timestamp,
    });
    if (result.outcome === "retry") return undefined;
    if (result.outcome === "refused") return (cur) => withMeter(cur, "Refused", result.reason);
    return (cur) => withMeter(cur, "Reported");
  }

  /**
   * Applies the changes to the account's records, counts the runs that ended into its usage, and
   * drops the settled records, in one write (re-read on conflict). The account as written.
   */
  private async write(
    acct: BillingAccount,
    changes: ReadonlyMap<string, Change>,
  ): Promise<BillingAccount | undefined> {
    const res = await this.d.api.updateStatusWithRetry<BillingAccount>(
      "billingaccounts",
      this.d.accountNamespace,
      acct.metadata.name,
      (cur) => {
        if (cur.metadata.uid !== acct.metadata.uid) return undefined;
        let usage = cur.status?.usage;
        const kept: OrphanedRun[] = [];
        let changed = false;
        for (const before of cur.status?.orphans ?? []) {
          let o = changes.get(keyOf(before))?.(before) ?? before;
          // Counted in the write that marks it counted: never twice.
          const count = (u: NonNullable<OrphanedRun["usage"]>, kind: "used" | "reported") => {
            const id = u.identifier ?? keyOf(o);
            usage = countedUsage({
              current: usage,
              uncounted: [
                {
                  id: kind === "used" ? id : `${id}+reported`,
                  kind,
                  seconds: u.billedSeconds ?? 0,
                  endedAt: u.endedAt,
                },
              ],
              live: new Set(usage?.counting ?? []),
              now: this.now(),
              subscriptionPeriod: cur.status?.subscriptionPeriod,
            });
          };
          if (o.usage && o.usage.counted !== true) {
            count(o.usage, "used");
            o = { ...o, usage: { ...o.usage, counted: true } };
          }
          if (o.usage?.meter === "Reported" && o.usage.countedReported !== true) {
            count(o.usage, "reported");
            o = { ...o, usage: { ...o.usage, countedReported: true } };
          }
          if (o !== before) changed = true;
          if (orphanSettled(o) && (o.usage?.meter !== "Reported" || o.usage.countedReported)) {
            changed = true;
            continue;
          }
          kept.push(o);
        }
        if (!changed) return undefined;
        const { orphans: _old, ...rest } = cur.status ?? {};
        return {
          ...cur,
          status: { ...rest, ...(usage && { usage }), ...(kept.length > 0 && { orphans: kept }) },
        };
      },
    );
    return res.object;
  }
}

const keyOf = (o: OrphanedRun): string => `${o.uid}/${o.attempt}`;

function withMeter(o: OrphanedRun, meter: "Reported" | "Refused", message?: string): OrphanedRun {
  if (!o.usage || o.usage.meter !== "Pending") return o;
  return {
    ...o,
    usage: { ...o.usage, meter, ...(message !== undefined && { message: message.slice(0, 1024) }) },
  };
}
