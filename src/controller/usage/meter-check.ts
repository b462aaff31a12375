// The payment provider's meters, checked against what the usage reporter sends them. At start and
// then periodically (the meters can change at the provider at any time) every configured event
// name's meter is read (GET /v1/billing/meters, https://docs.stripe.com/api/billing/meter/list)
// and judged by the pure rule (src/config/meter-rule.ts). A meter that would bill something else
// than what is sent (other payload keys, not `sum`, pre-aggregation, no active meter) is:
// - a gauge, media_orchestrator_usage_meter_misconfigured{event_name} = 1 (the chart's alert);
// - a condition, MetersConfigured=False, on every BillingAccount, naming the meter and its problems;
// - held: the reporter skips that event name's groups (held()), so their attempts stay Pending in
//   their jobs' outbox, unstamped, until a check finds the meter right and wakes the reporter; the
//   sender is gated too (gate(): "retry"), and a send before the first read waits for it.
import type { Logger } from "pino";
import type { Gauge } from "prom-client";
import { describeVerdict, judgeMeters, type MeterVerdict } from "../../config/meter-rule.js";
import type { BillingAccount } from "../../crds/billingaccount.js";
import { getCondition, setCondition } from "../../crds/conditions.js";
import type { KubeApi } from "../../k8s/api.js";
import { describeError } from "../../k8s/errors.js";
import { failureKind, keepAlivePools, poolFor, send, text as readText } from "../../http/client.js";
import type { MeterBatchResult, MeterEvent, MeterSender, MeterSendResult } from "./meter-client.js";

const METERS_CONDITION = "MetersConfigured";
/** How often meters are read while all are right, and while one is not (or the read failed). */
const CHECK_INTERVAL_MS = 5 * 60_000;
const RECHECK_INTERVAL_MS = 30_000;

interface AccountCache {
  list(namespace?: string): BillingAccount[];
}

export interface MeterCheckDeps {
  baseUrl: string;
  /** Read per call: a rotated key file takes effect without a restart. */
  apiKey: () => string;
  /** The configured event names (USAGE_METER_EVENT_NAME and USAGE_METER_EVENT_NAMES). */
  eventNames: readonly string[];
  log: Logger;
  /** media_orchestrator_usage_meter_misconfigured (metrics.ts: exposed whether or not metering is on). */
  misconfigured?: Gauge<"event_name">;
  /** Where the MetersConfigured condition is written; absent: no condition. */
  accounts?: { api: KubeApi; cache: AccountCache; namespace: string };
  /** Conditions are written by the leader only. */
  leading?: () => boolean;
  /** Called when a check finds every meter right after one was not (the reporter sends again). */
  onFixed?: () => void;
  intervalMs?: number;
  recheckMs?: number;
  timeoutMs?: number;
  now?: () => Date;
}

export class MeterCheck {
  readonly #pools = keepAlivePools();
  #verdicts?: Map<string, MeterVerdict>;
  #running?: Promise<void>;
  #timer?: NodeJS.Timeout;
  #stopped = true;

  constructor(private readonly d: MeterCheckDeps) {}

  /** The last verdicts (undefined before the first read answered). */
  verdicts(): ReadonlyMap<string, MeterVerdict> | undefined {
    return this.#verdicts;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule(0);
  }

  stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    return this.#running ?? Promise.resolve();
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      void this.check().finally(() => {
        const allRight = this.#verdicts !== undefined && [...this.#verdicts.values()].every((v) => v.ok);
        this.#schedule(
          allRight ? (this.d.intervalMs ?? CHECK_INTERVAL_MS) : (this.d.recheckMs ?? RECHECK_INTERVAL_MS),
        );
      });
    }, ms);
    this.#timer.unref();
  }

  /** Reads and judges the meters now (one read at a time: a caller during one waits for it). */
  check(): Promise<void> {
    this.#running ??= this.#check().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #check(): Promise<void> {
    const meters = await this.#readMeters();
    if ("failed" in meters) {
      this.d.log.warn({ reason: meters.failed }, "could not read the payment provider's meters");
      return;
    }
    const before = this.#verdicts;
    const next = judgeMeters(meters, this.d.eventNames);
    this.#verdicts = next;
    for (const [name, v] of next) {
      this.d.misconfigured?.set({ event_name: name }, v.ok ? 0 : 1);
      const prior = before?.get(name);
      const changed = prior === undefined || JSON.stringify(prior) !== JSON.stringify(v);
      if (changed && !v.ok)
        this.d.log.warn(
          { eventName: name, problems: v.problems },
          `meter misconfigured: ${describeVerdict(name, v)}`,
        );
      else if (changed && prior !== undefined && v.ok)
        this.d.log.info({ eventName: name }, "meter configuration fixed");
    }
    await this.#writeConditions(next).catch((err: unknown) =>
      this.d.log.warn({ err: describeError(err) }, "could not write the MetersConfigured condition"),
    );
    if (before !== undefined && [...next].some(([name, v]) => v.ok && before.get(name)?.ok === false))
      this.d.onFixed?.();
  }

  /** Every meter, following pages (100 per page, as Stripe's list allows). */
  async #readMeters(): Promise<unknown[] | { failed: string }> {
    const out: unknown[] = [];
    let after: string | undefined;
    for (let page = 0; page < 100; page++) {
      const q = new URLSearchParams({ limit: "100", ...(after !== undefined && { starting_after: after }) });
      const url = `${this.d.baseUrl}/v1/billing/meters?${q}`;
      let status: number;
      let text: string;
      try {
        const res = await send(url, {
          agent: poolFor(this.#pools, url),
          method: "GET",
          headers: { authorization: `Bearer ${this.d.apiKey()}`, accept: "application/json" },
          signal: AbortSignal.timeout(this.d.timeoutMs ?? 10_000),
        });
        status = res.statusCode;
        text = await readText(res.body).catch(() => "");
      } catch (err) {
        // Never the key: the reason reaches logs.
        return { failed: `payment provider unreachable (${failureKind(err)})` };
      }
      if (status !== 200) return { failed: `listing meters: payment provider answered HTTP ${status}` };
      let body: { data?: unknown; has_more?: unknown };
      try {
        body = JSON.parse(text) as typeof body;
      } catch {
        return { failed: "listing meters: the payment provider's answer is not JSON" };
      }
      const data = Array.isArray(body.data) ? (body.data as unknown[]) : [];
      out.push(...data);
      const last = (data.at(-1) as { id?: unknown } | undefined)?.id;
      if (body.has_more !== true || typeof last !== "string") break;
      after = last;
    }
    return out;
  }

  /** MetersConfigured on every BillingAccount, written only where it differs. */
  async #writeConditions(verdicts: Map<string, MeterVerdict>): Promise<void> {
    const a = this.d.accounts;
    if (a === undefined || (this.d.leading !== undefined && !this.d.leading())) return;
    const wrong = [...verdicts].filter(([, v]) => !v.ok);
    const input =
      wrong.length === 0
        ? {
            type: METERS_CONDITION,
            status: "True" as const,
            reason: "MetersMatch",
            message: `The payment provider's meters bill what is sent: ${[...verdicts.keys()].join(", ")}`,
          }
        : {
            type: METERS_CONDITION,
            status: "False" as const,
            reason: "MeterMisconfigured",
            message: `Usage is not sent to these meters until they are fixed: ${wrong
              .map(([name, v]) => describeVerdict(name, v))
              .join(" | ")}`,
          };
    const now = (this.d.now?.() ?? new Date()).toISOString();
    for (const account of a.cache.list(a.namespace)) {
      const c = getCondition(account.status?.conditions, METERS_CONDITION);
      if (c && c.status === input.status && c.reason === input.reason && c.message === input.message)
        continue;
      await a.api.updateStatusWithRetry<BillingAccount>(
        "billingaccounts",
        a.namespace,
        account.metadata.name ?? "",
        (cur) => {
          const cc = getCondition(cur.status?.conditions, METERS_CONDITION);
          if (cc && cc.status === input.status && cc.reason === input.reason && cc.message === input.message)
            return undefined;
          return {
            ...cur,
            status: { ...cur.status, conditions: setCondition(cur.status?.conditions, input, now) },
          };
        },
      );
    }
  }

  /**
   * Why usage under this event name is held now, from the last read (undefined: not held, or not
   * read yet). The reporter skips held groups before it stamps or sends anything.
   */
  held(eventName: string): string | undefined {
    const v = this.#verdicts?.get(eventName);
    return v === undefined || v.ok
      ? undefined
      : `meter misconfigured, usage held: ${describeVerdict(eventName, v)}`;
  }

  /** Why nothing may be sent under this event name now; undefined: send. Waits for a first read. */
  async blocked(eventName: string): Promise<string | undefined> {
    if (this.#verdicts === undefined) await this.check();
    if (this.#verdicts === undefined) return "the payment provider's meters could not be read yet";
    return this.held(eventName);
  }

  /** The sender, with nothing sent under an event name whose meter is not right ("retry": kept Pending). */
  gate(sender: MeterSender): MeterSender {
    const gated: MeterSender = {
      send: async (e: MeterEvent): Promise<MeterSendResult> => {
        const reason = await this.blocked(e.eventName);
        return reason === undefined ? sender.send(e) : { outcome: "retry", reason };
      },
    };
    const batch = sender.sendBatch?.bind(sender);
    if (batch)
      gated.sendBatch = async (events: readonly MeterEvent[]): Promise<MeterBatchResult> => {
        for (const name of new Set(events.map((e) => e.eventName))) {
          const reason = await this.blocked(name);
          if (reason !== undefined) return { outcome: "retry", reason };
        }
        return batch(events);
      };
    return gated;
  }
}
