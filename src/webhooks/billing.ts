// Subscription events -> BillingAccount status. The provider does not order its deliveries, so
// the account remembers the `created` time of the event that set its state and refuses older ones.
// Two events of the same second are ordered by event id (any fixed order will do: every replica
// and every delivery order then converges on the same winner).
import { setCondition } from "../controller/conditions.js";
import {
  ADMITTING_STATES,
  API_VERSION,
  billingAccountName,
  type BillingAccount,
  type BillingAccountStatus,
  type SubscriptionStatus,
} from "../crds/index.js";
import type { KubeApi } from "../k8s/api.js";
import { isAlreadyExists } from "../k8s/errors.js";
import type { WebhookMetrics } from "./metrics.js";

export interface SubscriptionChange {
  customerId: string;
  subscriptionId?: string;
  subscriptionStatus: SubscriptionStatus;
  eventId: string;
  /** event.created, seconds since the epoch. */
  created: number;
}

/** Whether an event may set the account's state: strictly newer than the one that set it. */
export function supersedes(
  event: { eventId: string; created: number },
  status?: BillingAccountStatus,
): boolean {
  const lastCreated = status?.lastEventCreated;
  if (lastCreated === undefined) return true;
  if (event.created !== lastCreated) return event.created > lastCreated;
  const lastId = status?.lastEventId ?? "";
  return event.eventId > lastId; // the same event again (a replay) is not newer than itself
}

const pascal = (s: string): string =>
  s
    .split("_")
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join("");

/** The account's status after applying the change (the caller checked `supersedes`). */
export function accountStatusAfter(
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
  return status;
}

export interface ApplyResult {
  applied: boolean;
  account: string;
  /** The state the account holds afterwards. */
  subscriptionStatus?: string;
  /** When not applied: the event that set the (newer) state. */
  supersededBy?: string;
}

/**
 * Creates the customer's BillingAccount if missing, then applies the change unless a newer event
 * already set the state. Read-modify-write with the object's resourceVersion, retried on conflict.
 */
export async function applySubscriptionChange(
  api: KubeApi,
  namespace: string,
  change: SubscriptionChange,
  nowIso: string,
  metrics?: WebhookMetrics,
): Promise<ApplyResult> {
  const name = billingAccountName(change.customerId);
  for (let round = 0; round < 3; round++) {
    const res = await api.updateStatusWithRetry<BillingAccount>(
      "billingaccounts",
      namespace,
      name,
      (current) =>
        supersedes(change, current.status)
          ? { ...current, status: accountStatusAfter(current, change, nowIso) }
          : undefined,
    );
    if (res.conflicts) metrics?.conflicts.inc({ resource: "billingaccounts" }, res.conflicts);
    if (res.object) {
      return {
        applied: res.written,
        account: name,
        subscriptionStatus: res.object.status?.subscriptionStatus,
        ...(res.written ? {} : { supersededBy: res.object.status?.lastEventId }),
      };
    }
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
  }
  throw new Error(`BillingAccount ${namespace}/${name} disappeared while being updated`);
}
