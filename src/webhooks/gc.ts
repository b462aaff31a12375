// Retention of PaymentEvents. A record must outlive the provider's redeliveries (automatic retries
// for 3 days; manual resends later), so the default retention is 7 days, counted from the record's
// last activity (creation, last processing attempt, outcome).
//
// One replica does it: the one whose controller holds the leader Lease (the sidecar runs in the
// controller's pod, so the Lease's holder identity starts with this pod's name). When nobody holds
// the Lease (leader election off, or the Lease expired) every replica runs it; that is harmless:
// deletes carry the record's uid and resourceVersion as preconditions, so a record redelivered
// between the list and the delete is kept, and two replicas deleting one record get a 404.
// The list is read a page at a time (limit/continue) and each page is handled before the next is
// read, so memory holds one page, whatever the number of records.
import type { Logger } from "pino";
import type { PaymentEvent } from "../crds/paymentevent.js";
import type { KubeApi } from "../k8s/api.js";
import { describeError, isConflict, isNotFound } from "../k8s/errors.js";
import type { WebhookMetrics } from "./metrics.js";

export interface PaymentEventGcOptions {
  api: KubeApi;
  retentionMs: number;
  /** Default 10 minutes. The first run happens after min(interval, 1 min). */
  intervalMs?: number;
  /** Default: all namespaces the credentials can list. */
  namespace?: string;
  /** Records per list page. Default 500. */
  pageSize?: number;
  /** Whether this replica is the one to collect now. Default: always. */
  shouldRun?: () => Promise<boolean>;
  log: Logger;
  metrics?: WebhookMetrics;
  now?: () => Date;
}

/** The last time anything happened to the record: what retention counts from. */
function lastActivityMs(ev: PaymentEvent): number {
  const stamps = [ev.metadata.creationTimestamp, ev.status?.lastDeliveryAt, ev.status?.processedAt];
  let latest = Number.NaN;
  for (const s of stamps) {
    const ms = s instanceof Date ? s.getTime() : typeof s === "string" ? Date.parse(s) : Number.NaN;
    if (!Number.isNaN(ms) && !(ms <= latest)) latest = ms;
  }
  return latest;
}

interface Lease {
  spec?: { holderIdentity?: string; renewTime?: string; leaseDurationSeconds?: number };
}

/**
 * shouldRun for the controller's leader Lease: true when this pod's controller holds it, or when
 * nobody does (missing or expired), false when another pod's controller does.
 */
export function whileControllerLeads(
  api: KubeApi,
  lease: { namespace: string; name: string },
  podName: string,
  now: () => Date = () => new Date(),
): () => Promise<boolean> {
  return async () => {
    let l: Lease;
    try {
      l = await api.rawJson<Lease>(
        "GET",
        `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(lease.namespace)}/leases/${encodeURIComponent(lease.name)}`,
      );
    } catch (err) {
      if (isNotFound(err)) return true;
      throw err;
    }
    const holder = l.spec?.holderIdentity;
    if (!holder) return true;
    if (holder === podName || holder.startsWith(`${podName}_`)) return true;
    const renewed = Date.parse(l.spec?.renewTime ?? "");
    const durationMs = (l.spec?.leaseDurationSeconds ?? 15) * 1000;
    return Number.isNaN(renewed) || now().getTime() > renewed + durationMs;
  };
}

export function startPaymentEventGc(opts: PaymentEventGcOptions): {
  stop(): void;
  runOnce(): Promise<number>;
} {
  const log = opts.log.child({ component: "paymentevent-gc" });
  const now = opts.now ?? (() => new Date());
  const intervalMs = opts.intervalMs ?? 10 * 60_000;
  const { api } = opts;
  const collection = api.objectPath("paymentevents", opts.namespace);
  let running: Promise<number> | undefined;
  let stopped = false;

  async function collect(): Promise<number> {
    if (opts.shouldRun && !(await opts.shouldRun())) {
      log.debug("another replica collects PaymentEvents");
      return 0;
    }
    const cutoff = now().getTime() - opts.retentionMs;
    let deleted = 0;
    let continueToken: string | undefined;
    do {
      const query = new URLSearchParams({ limit: String(opts.pageSize ?? 500) });
      if (continueToken) query.set("continue", continueToken);
      // One page at a time, each with its own deadline.
      const page = await api.rawJson<{ items: PaymentEvent[]; metadata?: { continue?: string } }>(
        "GET",
        `${collection}?${query.toString()}`,
      );
      for (const ev of page.items) {
        if (stopped) return deleted;
        const last = lastActivityMs(ev);
        if (Number.isNaN(last) || last > cutoff) continue;
        const { name, namespace, uid, resourceVersion } = ev.metadata;
        if (!namespace) continue;
        try {
          await api.rawJson("DELETE", api.objectPath("paymentevents", namespace, name), {
            apiVersion: "v1",
            kind: "DeleteOptions",
            preconditions: { uid, resourceVersion },
          });
          deleted++;
          opts.metrics?.gcDeleted.inc();
        } catch (err) {
          // 404: another replica deleted it; 409: it changed since the list (redelivered): keep it.
          if (!isNotFound(err) && !isConflict(err)) throw err;
        }
      }
      continueToken = page.metadata?.continue || undefined;
    } while (continueToken && !stopped);
    if (deleted)
      log.info({ deleted, retentionHours: opts.retentionMs / 3_600_000 }, "expired PaymentEvents deleted");
    return deleted;
  }

  const runOnce = (): Promise<number> => {
    running ??= collect().finally(() => (running = undefined));
    return running;
  };

  const tick = () => {
    runOnce().catch((err: unknown) =>
      log.warn({ error: describeError(err) }, "PaymentEvent GC failed; retrying later"),
    );
  };
  const first = setTimeout(tick, Math.min(intervalMs, 60_000));
  const timer = setInterval(tick, intervalMs);
  first.unref();
  timer.unref();

  return {
    stop() {
      stopped = true;
      clearTimeout(first);
      clearInterval(timer);
    },
    runOnce,
  };
}
