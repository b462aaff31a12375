// Retention of PaymentEvents. A record must outlive the provider's redeliveries (automatic retries
// for 3 days; manual resends later), so the default retention is 7 days, counted from the record's
// last activity (creation, last processing attempt, outcome). Every replica may run this: deletes
// carry the record's uid and resourceVersion as preconditions, so a record claimed again between the
// list and the delete is kept, and two replicas deleting one record is harmless (404).
import type { Logger } from "pino";
import { GROUP, VERSION } from "../crds/common.js";
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
  log: Logger;
  metrics?: WebhookMetrics;
  now?: () => Date;
}

/** The last time anything happened to the record: what retention counts from. */
export function lastActivityMs(ev: PaymentEvent): number {
  const stamps = [ev.metadata.creationTimestamp, ev.status?.lastDeliveryAt, ev.status?.processedAt];
  let latest = Number.NaN;
  for (const s of stamps) {
    const ms = s instanceof Date ? s.getTime() : typeof s === "string" ? Date.parse(s) : Number.NaN;
    if (!Number.isNaN(ms) && !(ms <= latest)) latest = ms;
  }
  return latest;
}

export function startPaymentEventGc(opts: PaymentEventGcOptions): {
  stop(): void;
  runOnce(): Promise<number>;
} {
  const log = opts.log.child({ component: "paymentevent-gc" });
  const now = opts.now ?? (() => new Date());
  const intervalMs = opts.intervalMs ?? 10 * 60_000;
  let running: Promise<number> | undefined;
  let stopped = false;

  async function collect(): Promise<number> {
    const { items } = await opts.api.list<PaymentEvent>("paymentevents", opts.namespace);
    const cutoff = now().getTime() - opts.retentionMs;
    let deleted = 0;
    for (const ev of items) {
      if (stopped) break;
      const last = lastActivityMs(ev);
      if (Number.isNaN(last) || last > cutoff) continue;
      const { name, namespace, uid, resourceVersion } = ev.metadata;
      if (!namespace) continue;
      try {
        await opts.api.rawJson(
          "DELETE",
          `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/paymentevents/${encodeURIComponent(name)}`,
          { apiVersion: "v1", kind: "DeleteOptions", preconditions: { uid, resourceVersion } },
        );
        deleted++;
        opts.metrics?.gcDeleted.inc();
      } catch (err) {
        // 404: another replica deleted it; 409: it changed since the list (redelivered): keep it.
        if (!isNotFound(err) && !isConflict(err)) throw err;
      }
    }
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
