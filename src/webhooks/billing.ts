// Subscription events -> BillingAccount status. The provider does not order its deliveries, so
// the account remembers the `created` time of the event that set its state and refuses older ones.
// Two different events of the same second cannot be ordered from the events themselves (their ids
// are random), so on such a tie the provider is asked for the subscription's current state, and
// that is what the account keeps. Without a provider key (or a subscription id) the tie falls back
// to a fixed order by event id: every replica then converges on the same, possibly stale, winner.
import { setCondition } from "../crds/conditions.js";
import {
  ADMITTING_STATES,
  API_VERSION,
  billingAccountName,
  customerAccount,
  type BillingAccount,
  type BillingAccountStatus,
  type SubscriptionStatus,
} from "../crds/index.js";
import type { KubeApi } from "../k8s/api.js";
import { isAlreadyExists, isConflict } from "../k8s/errors.js";
import type { WebhookMetrics } from "./metrics.js";
import type { CurrentSubscription, SubscriptionLookup, SubscriptionPeriod } from "./paymentapi.js";

const samePrices = (a: readonly string[] | undefined, b: readonly string[] | undefined): boolean =>
  a === undefined || (b !== undefined && a.length === b.length && a.every((p, i) => p === b[i]));
/** Whether the provider's period is the one the account holds (absent from the provider: nothing to change). */
const samePeriod = (a: SubscriptionPeriod | undefined, b: SubscriptionPeriod | undefined): boolean =>
  a === undefined ||
  (b !== undefined && Date.parse(a.start) === Date.parse(b.start) && Date.parse(a.end) === Date.parse(b.end));

export interface SubscriptionChange {
  customerId: string;
  subscriptionId?: string;
  subscriptionStatus: SubscriptionStatus;
  /**
   * The subscription's price ids (its items' prices, sorted), which select the account's plan.
   * Undefined: the event does not list them, and the account keeps those it has.
   */
  priceIds?: string[];
  /** The subscription's current billing period; undefined: the event does not say, the account keeps its own. */
  period?: SubscriptionPeriod;
  eventId: string;
  /** event.created, seconds since the epoch. */
  created: number;
}

/**
 * How an event compares with the one that set the account's state: newer, older, the same event
 * again (a replay), or a different event of the same second (a tie event order cannot break).
 */
function ordering(
  event: { eventId: string; created: number },
  status?: BillingAccountStatus,
): "newer" | "older" | "same" | "tie" {
  const lastCreated = status?.lastEventCreated;
  if (lastCreated === undefined) return "newer";
  if (event.created !== lastCreated) return event.created > lastCreated ? "newer" : "older";
  return event.eventId === (status?.lastEventId ?? "") ? "same" : "tie";
}

/** Whether an event may set the account's state without asking anyone (ties by event id). */
function supersedes(event: { eventId: string; created: number }, status?: BillingAccountStatus): boolean {
  const o = ordering(event, status);
  if (o === "tie") return event.eventId > (status?.lastEventId ?? "");
  return o === "newer";
}

const pascal = (s: string): string =>
  s
    .split("_")
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join("");

/** The account's status after applying the change (the caller checked `supersedes`). */
function accountStatusAfter(
  account: BillingAccount,
  change: SubscriptionChange,
  nowIso: string,
): BillingAccountStatus {
  const admitting = ADMITTING_STATES.has(change.subscriptionStatus);
  const sub = change.subscriptionId ? `subscription ${change.subscriptionId}` : "the subscription";
  const status: BillingAccountStatus = {
    ...account.status,
    subscriptionStatus: change.subscriptionStatus,
    lastEventId: change.eventId,
    lastEventCreated: change.created,
    updatedAt: nowIso,
    conditions: setCondition(
      account.status?.conditions,
      {
        type: "Active",
        status: admitting ? "True" : "False",
        reason: `Subscription${pascal(change.subscriptionStatus)}`,
        message: admitting
          ? `${sub} is ${change.subscriptionStatus}: jobs naming this account are admitted`
          : `${sub} is ${change.subscriptionStatus}: jobs naming this account wait in Pending`,
      },
      nowIso,
      typeof account.metadata.generation === "number" ? account.metadata.generation : undefined,
    ),
  };
  if (change.subscriptionId !== undefined) status.subscriptionId = change.subscriptionId;
  if (change.priceIds !== undefined) status.priceIds = change.priceIds;
  if (change.period !== undefined) status.subscriptionPeriod = change.period;
  return status;
}

export interface ApplyResult {
  applied: boolean;
  account: string;
  /** The state the account holds afterwards. */
  subscriptionStatus?: string;
  /** When not applied: the event that set the (newer) state. */
  supersededBy?: string;
  /** A same-second tie settled by the provider's current state. */
  askedProvider?: boolean;
}

export interface BillingDeps {
  api: KubeApi;
  namespace: string;
  metrics?: WebhookMetrics;
  /** Settles same-second ties; without it ties fall back to the order of event ids. */
  subscriptions?: SubscriptionLookup;
}

/**
 * Creates the customer's BillingAccount if missing, then applies the change unless a newer event
 * already set the state. Read-modify-write with the object's resourceVersion, retried on conflict.
 */
export async function applySubscriptionChange(
  deps: BillingDeps,
  change: SubscriptionChange,
  nowIso: string,
): Promise<ApplyResult> {
  const { api, namespace, metrics } = deps;
  const name = billingAccountName(change.customerId);
  let provider: CurrentSubscription | undefined;
  for (let round = 0; round < 8; round++) {
    const found = await api.get<BillingAccount>("billingaccounts", namespace, name);
    // An object of this name that is another customer's is not this customer's account: never
    // written for this event (the event is answered 503 and the provider retries until an operator
    // resolves the collision; the log names both customers).
    if (found && !customerAccount(found, change.customerId))
      throw new Error(
        `BillingAccount ${namespace}/${name} is customer ${found.spec.customerId}'s, not ${change.customerId}'s: not applied`,
      );
    const current = found;
    if (!current) {
      try {
        await api.create("billingaccounts", namespace, {
          apiVersion: API_VERSION,
          kind: "BillingAccount",
          metadata: { name, namespace },
          spec: { customerId: change.customerId },
        });
      } catch (err) {
        if (!isAlreadyExists(err)) throw err; // another event for this customer created it: fine
      }
      continue;
    }
    const order = ordering(change, current.status);
    let next: SubscriptionChange | undefined;
    const lookup = deps.subscriptions;
    if (order === "tie" && lookup && change.subscriptionId) {
      // Asked once per delivery, then kept across conflict retries: the answer is "now" either way.
      provider ??= await lookup.current(change.subscriptionId);
      // The provider's state (and prices) win; a write only when it changes what the account holds.
      if (
        provider.status !== current.status?.subscriptionStatus ||
        !samePrices(provider.priceIds, current.status?.priceIds) ||
        !samePeriod(provider.period, current.status?.subscriptionPeriod)
      ) {
        const { priceIds: _event, period: _eventPeriod, ...rest } = change;
        next = {
          ...rest,
          subscriptionStatus: provider.status,
          ...(provider.priceIds && { priceIds: provider.priceIds }),
          ...(provider.period && { period: provider.period }),
        };
      }
    } else if (order === "newer" || (order === "tie" && supersedes(change, current.status))) {
      next = change;
    }
    if (!next) {
      return {
        applied: false,
        account: name,
        subscriptionStatus: current.status?.subscriptionStatus,
        ...(order === "same" || order === "tie" ? {} : { supersededBy: current.status?.lastEventId }),
        ...(provider !== undefined && { askedProvider: true }),
      };
    }
    try {
      const written = await api.replaceStatus<BillingAccount>("billingaccounts", {
        ...current,
        status: accountStatusAfter(current, next, nowIso),
      });
      return {
        applied: true,
        account: name,
        subscriptionStatus: written.status?.subscriptionStatus,
        ...(provider !== undefined && { askedProvider: true }),
      };
    } catch (err) {
      if (!isConflict(err)) throw err;
      metrics?.conflicts.inc({ resource: "billingaccounts" });
      // Jittered, so writers that collided do not collide again in lockstep.
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(200, 10 * 2 ** round)));
    }
  }
  throw new Error(`BillingAccount ${namespace}/${name} kept changing while being updated`);
}
