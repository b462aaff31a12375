// The usage loop's decisions for one key, a customer's meter (src/controller/usage/reporter.ts is
// the executor): which of its outbox attempts are settled without a send (the account proves the
// acceptance), refused, sent and in which batches, or counted into the account now; and what a
// meter's answer makes of a batch. Pure: the executor gathers the facts from the caches and does
// what the plan says, nothing else.
import type { UsageAttempt } from "../crds/mediajob.js";
import { meterSendVerdict } from "../mediajob/usage.js";
import { reportedCountId } from "./identifier.js";
import { FORGOTTEN_IDENTIFIER } from "./refusals.js";

/** The usage loop's key: a customer and a meter event name ("" for the account's own work). */
export interface UsageKey {
  customer: string;
  eventName: string;
}

const SEP = "\u0000";

export const usageKeyString = (k: UsageKey): string => `${k.customer}${SEP}${k.eventName}`;

export function parseUsageKey(key: string): UsageKey {
  const i = key.indexOf(SEP);
  return i < 0
    ? { customer: key, eventName: "" }
    : { customer: key.slice(0, i), eventName: key.slice(i + 1) };
}

/**
 * The key an attempt's work belongs to: its customer's meter when it has one, else the account's
 * own key (attempts never metered are only counted).
 */
export const keyOfAttempt = (customer: string, a: Pick<UsageAttempt, "eventName">): UsageKey => ({
  customer,
  eventName: a.eventName ?? "",
});

/** One attempt in the outbox, as the cache shows it: its job, the attempt, its meter identifier. */
export interface OutboxEntry {
  job: { namespace: string; name: string; uid: string };
  attempt: UsageAttempt;
  /** The meter identifier it is sent and counted under (identifier.ts, attemptIdentifier). */
  id: string;
  /** Whether its seconds still wait to be counted into its account (mediajob/usage-hold.ts, awaitsCount). */
  awaitsCount: boolean;
  /** When this process first called the meter with it, unix seconds (undefined: never). */
  triedAt?: number | undefined;
}

export interface UsageKeyFacts {
  key: UsageKey;
  /** The key's attempts still to meter or count (for the account's own key, also those of its meters backing off). */
  entries: readonly OutboxEntry[];
  /** The customer's BillingAccount; undefined: it does not exist. */
  account: { counting: ReadonlySet<string>; periodEnded: boolean } | undefined;
  /** Every count id the customer's outstanding attempts may have listed (outbox.ts, liveCountIds). */
  live: ReadonlySet<string>;
  /** Whether a meter client is there to send with (metering on and loaded). */
  metering: boolean;
  /** Why the key's meter is held (misconfigured, meter-check.ts); undefined: it may send. */
  held: string | undefined;
  /** Events per call the meter takes at once; 1: one by one (no stream). */
  batchMax: number;
  /** When this process began to lead, unix seconds (sendWindowStart). */
  leadingSinceS: number;
  nowS: number;
}

/**
 * Attempts that ended (our clocks) less than this after this process began to lead may have been
 * written before it led, and so sent by an earlier leader: the margin covers the clocks of the
 * controller's and the sidecar's pods, which write endedAt.
 */
const EARLIER_LEADER_MARGIN_S = 5 * 60;

/**
 * Since when a send of the attempt may have happened, unix seconds, or undefined when none can have
 * (the payment provider keeps an identifier at least 24 hours from its first receipt, so this
 * bounds how long the same identifier may be sent again blindly): `firstSentAt` when an operator
 * set it; else this process's own first call; else, for an attempt an earlier leader may have sent
 * (ended before this process led, with a margin), its end, the earliest any send can have been;
 * else none (only this process sends it, and never has). No write is needed before a send: this
 * bound is as safe as a stamp written before each first call.
 */
export function sendWindowStart(entry: OutboxEntry, leadingSinceS: number): number | undefined {
  const a = entry.attempt;
  if (a.firstSentAt !== undefined) return seconds(a.firstSentAt);
  if (entry.triedAt !== undefined) return entry.triedAt;
  const ended = seconds(a.endedAt);
  return ended < leadingSinceS + EARLIER_LEADER_MARGIN_S ? ended : undefined;
}

/** An attempt to send, at the timestamp its event carries. */
export interface Send {
  entry: OutboxEntry;
  timestamp: number;
}

export interface UsageKeyPlan {
  /** Accepted before (their reported count is in the account): settled as accepted, never sent again. */
  found: OutboxEntry[];
  /** Refused without a send, with the reason kept for the user. */
  refuse: Array<{ entry: OutboxEntry; reason: string }>;
  /** Sent in this order: a batch of one goes alone (v1), a larger one through the stream. */
  batches: Send[][];
  /** Counted into the account now, then marked counted (those sent are counted after the answer). */
  count: OutboxEntry[];
  /** Waiting for their BillingAccount, which does not exist: told, kept. */
  accountMissing: OutboxEntry[];
  /**
   * The account is written even with nothing to count: to drop ids of `counting` no job owes any
   * more, or to start the new period at 0 (a customer held at its plan's limit is admitted again
   * when the period rolls over, with no job ending to trigger it).
   */
  touchAccount: boolean;
}

export function planUsageKey(f: UsageKeyFacts): UsageKeyPlan {
  const plan: UsageKeyPlan = {
    found: [],
    refuse: [],
    batches: [],
    count: [],
    accountMissing: [],
    touchAccount: false,
  };
  const sending = f.metering && f.key.eventName !== "" && f.held === undefined;
  const toSend: Send[] = [];
  const leaving = new Set<OutboxEntry>();
  for (const entry of f.entries) {
    const a = entry.attempt;
    if (!sending || a.meter !== "Pending") continue;
    leaving.add(entry);
    // The reported count is written only after the provider's acceptance: a job write after it
    // was lost (a crash, a leader change). Settled as accepted, never sent again nor refused.
    if (f.account?.counting.has(reportedCountId(entry.id))) {
      plan.found.push(entry);
      continue;
    }
    const verdict = meterSendVerdict(seconds(a.endedAt), sendWindowStart(entry, f.leadingSinceS), f.nowS);
    if (verdict.send === "never") plan.refuse.push({ entry, reason: verdict.reason });
    else if (verdict.send === "reconcileFirst") plan.refuse.push({ entry, reason: FORGOTTEN_IDENTIFIER });
    else toSend.push({ entry, timestamp: verdict.timestamp });
  }
  toSend.sort((x, y) => Date.parse(x.entry.attempt.endedAt) - Date.parse(y.entry.attempt.endedAt));
  const size = Math.max(1, f.batchMax);
  for (let i = 0; i < toSend.length; i += size) plan.batches.push(toSend.slice(i, i + size));
  // Attempts sent now are counted with their reported seconds after the answer (one job write);
  // a refused one is counted once its refusal shows.
  const counted = f.entries.filter((e) => e.awaitsCount && !leaving.has(e));
  if (f.account) plan.count = counted;
  else plan.accountMissing = counted;
  plan.touchAccount =
    f.account !== undefined &&
    plan.count.length === 0 &&
    (f.account.periodEnded || [...f.account.counting].some((id) => !f.live.has(id)));
  return plan;
}

/** A meter's answer to one call: one event (v1) or a batch (the v2 stream). */
export type MeterAnswer =
  | { outcome: "recorded"; duplicate?: boolean }
  | { outcome: "retry"; reason: string }
  | { outcome: "refused"; reason: string }
  | { outcome: "unstreamable"; reason: string };

export interface AfterSend {
  /** Taken by the provider: settled (counted, marked Reported); `fresh` unless it already had them. */
  accepted: Array<{ send: Send; fresh: boolean }>;
  refuse: Array<{ entry: OutboxEntry; reason: string }>;
  /** Sent again one at a time (v1), whose answer says for each. */
  oneByOne: Send[];
  /** The meter did not take them now: the key backs off, the rest of its batches wait. */
  backOff?: string;
}

export function afterSend(batch: readonly Send[], answer: MeterAnswer): AfterSend {
  const out: AfterSend = { accepted: [], refuse: [], oneByOne: [] };
  switch (answer.outcome) {
    case "recorded":
      out.accepted = batch.map((send) => ({ send, fresh: answer.duplicate !== true }));
      break;
    case "refused":
      out.refuse = batch.map((s) => ({ entry: s.entry, reason: answer.reason }));
      break;
    case "unstreamable":
      out.oneByOne = batch.length > 1 ? [...batch] : [];
      if (batch.length === 1) out.backOff = answer.reason; // one event is never streamed
      break;
    case "retry":
      out.backOff = answer.reason;
  }
  return out;
}

/**
 * What a key backing off counts before it waits: the attempts of the batches not sent that await
 * a count (their used seconds hold the customer's plan, whatever the meter's state).
 */
export const countOnBackOff = (plan: UsageKeyPlan, fromBatch: number): OutboxEntry[] =>
  plan.batches
    .slice(fromBatch)
    .flat()
    .map((s) => s.entry)
    .filter((e) => e.awaitsCount);

const seconds = (iso: string): number => Math.floor(Date.parse(iso) / 1000);
