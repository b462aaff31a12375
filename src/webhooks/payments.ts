// POST /webhooks/payment_provider: verify, dedupe, process, record the outcome.
//
// The PaymentEvent named from a hash of event.id is the dedupe record and the claim. Its status
// keeps the outcome, not just "seen", so a replay of a processed event is answered 200 without
// any write, while a redelivery of an event whose processing failed runs again. Concurrent
// deliveries of one event share the work: in one replica they join the in-flight attempt; across
// replicas the create (AlreadyExists) and the status write with a resourceVersion (409) decide who
// processes, and the others wait for the outcome. docs/webhooks.md has the whole table.
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import { z } from "zod";
import {
  API_VERSION,
  SubscriptionStatus,
  paymentEventName,
  type PaymentEvent,
  type PaymentEventSpec,
  type PaymentEventStatus,
  type PaymentOutcome,
} from "../crds/index.js";
import type { KubeApi } from "../k8s/api.js";
import { describeError, isAlreadyExists, isConflict, isNotFound } from "../k8s/errors.js";
import { applySubscriptionChange, type SubscriptionChange } from "./billing.js";
import type { WebhookMetrics } from "./metrics.js";
import type { TokenBuckets } from "./ratelimit.js";
import { refuse, send, type Answer } from "./replies.js";
import { verifyStripeSignature } from "./signature.js";

export const PAYMENT_PATH = "/webhooks/payment_provider";

export const SUBSCRIPTION_EVENT_TYPES: ReadonlySet<string> = new Set([
  "customer.subscription.created",
  "customer.subscription.updated",
  "customer.subscription.deleted",
  "customer.subscription.paused",
  "customer.subscription.resumed",
  "customer.subscription.trial_will_end",
]);

/** The parts of the provider's event envelope we rely on; the rest is ignored. */
const EventEnvelope = z.object({
  id: z.string().min(1).max(255),
  type: z.string().min(1).max(255),
  created: z.int().min(0),
  livemode: z.boolean().optional(),
  data: z.object({ object: z.record(z.string(), z.unknown()) }).optional(),
});
export type EventEnvelope = z.infer<typeof EventEnvelope>;

const IdRef = z.union([z.string().min(1).max(255), z.object({ id: z.string().min(1).max(255) })]);
const refId = (v: z.infer<typeof IdRef>): string => (typeof v === "string" ? v : v.id);

const Subscription = z.object({
  id: z.string().min(1).max(255).optional(),
  customer: IdRef,
  status: SubscriptionStatus,
});

/** A subscription event whose object we cannot apply: recorded Failed, answered 400. */
class UnprocessableEvent extends Error {}

function customerOf(event: EventEnvelope): string | undefined {
  const c = IdRef.safeParse(event.data?.object.customer);
  return c.success ? refId(c.data) : undefined;
}

function subscriptionChange(event: EventEnvelope): SubscriptionChange {
  const object = event.data?.object ?? {};
  // A deleted subscription is canceled whatever the object says.
  const candidate =
    event.type === "customer.subscription.deleted" ? { ...object, status: "canceled" } : object;
  const sub = Subscription.safeParse(candidate);
  if (!sub.success) {
    const fields = [...new Set(sub.error.issues.map((i) => i.path.join(".") || "object"))].join(", ");
    throw new UnprocessableEvent(`the subscription object is not usable (${fields})`);
  }
  return {
    customerId: refId(sub.data.customer),
    ...(sub.data.id ? { subscriptionId: sub.data.id } : {}),
    subscriptionStatus: sub.data.status,
    eventId: event.id,
    created: event.created,
  };
}

type RecordState = "done" | "claimable" | "busy";

export interface PaymentDeps {
  api: KubeApi;
  namespace: string;
  metrics: WebhookMetrics;
  now: () => Date;
  log: FastifyBaseLogger;
  /** A Processing record older than this belongs to a crashed attempt and may be claimed again. */
  staleClaimMs: number;
  /** How long a concurrent duplicate waits for the attempt in flight before answering 409. */
  duplicateWaitMs: number;
  pollMs?: number;
}

export class PaymentEvents {
  readonly #inflight = new Map<string, Promise<Answer>>();

  constructor(private readonly d: PaymentDeps) {}

  /** Handles one verified event. Concurrent calls for one id in this process share one attempt. */
  async deliver(event: EventEnvelope, log: FastifyBaseLogger): Promise<Answer> {
    const running = this.#inflight.get(event.id);
    if (running) {
      this.d.metrics.duplicates.inc({ route: PAYMENT_PATH });
      const answer = await running;
      return answer.statusCode < 300
        ? { ...answer, body: { ...answer.body, duplicate: true }, outcome: "duplicate" }
        : answer;
    }
    const attempt = this.#deliver(event, log).finally(() => this.#inflight.delete(event.id));
    this.#inflight.set(event.id, attempt);
    return attempt;
  }

  #state(rec: PaymentEvent): RecordState {
    const outcome = rec.status?.outcome;
    if (outcome === "Processed" || outcome === "Ignored") return "done";
    if (outcome === "Failed") return "claimable";
    // Processing, or created a moment ago and not yet claimed by its creator.
    const stamp = rec.status?.lastDeliveryAt ?? rec.metadata.creationTimestamp;
    const since = stamp instanceof Date ? stamp.getTime() : Date.parse(stamp ?? "");
    if (Number.isNaN(since)) return "claimable";
    return this.d.now().getTime() - since > this.d.staleClaimMs ? "claimable" : "busy";
  }

  async #deliver(event: EventEnvelope, log: FastifyBaseLogger): Promise<Answer> {
    const { api, namespace } = this.d;
    const name = paymentEventName(event.id);
    const deadline = Date.now() + this.d.duplicateWaitMs;
    const pollMs = this.d.pollMs ?? 100;
    // Rounds beyond the polling ones mean the record keeps changing under us (or keeps
    // vanishing): let the provider retry later rather than spin.
    const maxRounds = 20 + Math.ceil(this.d.duplicateWaitMs / pollMs);
    let waited = false;
    for (let round = 0; ; round++) {
      if (round >= maxRounds) return refuse(503, "unavailable", { "retry-after": "10" });
      let rec = await api.get<PaymentEvent>("paymentevents", namespace, name);
      if (!rec) {
        try {
          rec = await api.create<PaymentEvent>("paymentevents", namespace, this.#record(event, name));
        } catch (err) {
          if (isAlreadyExists(err)) continue; // another delivery created it first: look again
          throw err;
        }
        const claimed = await this.#claim(rec);
        if (claimed) return this.#process(claimed, event, log);
        continue;
      }
      if (rec.spec.eventId !== event.id) {
        // Two ids hashing to one name (160 bits: not expected in practice). Refuse loudly.
        log.error({ eventId: event.id, record: name }, "payment event name collision");
        return refuse(503, "name_collision");
      }
      const state = this.#state(rec);
      if (state === "done") {
        if (!waited) this.d.metrics.duplicates.inc({ route: PAYMENT_PATH }); // counted once per delivery
        log.info(
          { eventId: event.id, type: event.type, outcome: rec.status?.outcome, waited },
          "payment event already handled: replay answered without changes",
        );
        return {
          statusCode: 200,
          body: { received: true, duplicate: true },
          outcome: "duplicate",
        };
      }
      if (state === "claimable") {
        const claimed = await this.#claim(rec);
        if (claimed) return this.#process(claimed, event, log);
        continue; // another delivery claimed it in between
      }
      // busy: another delivery (in another replica) is processing it right now.
      if (!waited) this.d.metrics.duplicates.inc({ route: PAYMENT_PATH });
      waited = true;
      if (Date.now() >= deadline) {
        log.warn({ eventId: event.id }, "payment event still being processed by another delivery");
        return refuse(409, "in_progress", { "retry-after": "10" });
      }
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }

  #record(event: EventEnvelope, name: string): PaymentEvent {
    const customerId = customerOf(event);
    const spec: PaymentEventSpec = {
      eventId: event.id,
      type: event.type,
      created: event.created,
      ...(customerId !== undefined ? { customerId } : {}),
      ...(event.livemode !== undefined ? { livemode: event.livemode } : {}),
    };
    return {
      apiVersion: API_VERSION,
      kind: "PaymentEvent",
      metadata: { name, namespace: this.d.namespace },
      spec,
    };
  }

  /** Takes the record for this delivery: a status write guarded by its resourceVersion. */
  async #claim(rec: PaymentEvent): Promise<PaymentEvent | undefined> {
    const nowIso = this.d.now().toISOString();
    const status: PaymentEventStatus = {
      ...rec.status,
      outcome: "Processing",
      message: "processing",
      attempts: (rec.status?.attempts ?? 0) + 1,
      deliveries: (rec.status?.deliveries ?? 0) + 1,
      lastDeliveryAt: nowIso,
    };
    try {
      return await this.d.api.replaceStatus<PaymentEvent>("paymentevents", { ...rec, status });
    } catch (err) {
      if (isConflict(err)) {
        this.d.metrics.conflicts.inc({ resource: "paymentevents" });
        return undefined;
      }
      if (isNotFound(err)) return undefined; // garbage-collected in between: start over
      throw err;
    }
  }

  async #process(claimed: PaymentEvent, event: EventEnvelope, log: FastifyBaseLogger): Promise<Answer> {
    const nowIso = this.d.now().toISOString();
    let outcome: PaymentOutcome;
    let message: string;
    let answer: Answer;
    try {
      if (SUBSCRIPTION_EVENT_TYPES.has(event.type)) {
        const change = subscriptionChange(event);
        const res = await applySubscriptionChange(
          this.d.api,
          this.d.namespace,
          change,
          nowIso,
          this.d.metrics,
        );
        outcome = "Processed";
        message = res.applied
          ? `BillingAccount ${res.account}: subscription ${res.subscriptionStatus ?? "unknown"}`
          : `BillingAccount ${res.account} unchanged: newer event ${res.supersededBy ?? "?"} already applied`;
        log.info(
          {
            eventId: event.id,
            type: event.type,
            account: res.account,
            applied: res.applied,
            subscriptionStatus: res.subscriptionStatus,
          },
          res.applied ? "subscription state applied" : "subscription event older than the account state",
        );
      } else {
        outcome = "Ignored";
        message = `event type ${event.type} needs no action`;
        log.info({ eventId: event.id, type: event.type }, "payment event recorded, no action for its type");
      }
      answer = { statusCode: 200, body: { received: true }, outcome: outcome.toLowerCase() };
    } catch (err) {
      outcome = "Failed";
      message = describeError(err).slice(0, 1024);
      if (err instanceof UnprocessableEvent) {
        log.warn(
          { eventId: event.id, type: event.type, reason: err.message },
          "payment event not processable",
        );
        answer = refuse(400, "unprocessable");
      } else {
        log.error({ eventId: event.id, type: event.type, error: message }, "payment event processing failed");
        answer = refuse(503, "failed", { "retry-after": "30" });
      }
    }
    this.d.metrics.paymentOutcomes.inc({ outcome });
    try {
      await this.#finish(claimed, outcome, message, nowIso);
    } catch (err) {
      // The effect is done (or failed) but the record still says Processing: a redelivery after
      // the stale-claim delay runs it again, which is harmless (every effect is idempotent).
      log.error(
        { eventId: event.id, error: describeError(err) },
        "could not record the payment event outcome",
      );
      if (answer.statusCode < 300) answer = refuse(503, "record_failed", { "retry-after": "30" });
    }
    return answer;
  }

  async #finish(
    claimed: PaymentEvent,
    outcome: PaymentOutcome,
    message: string,
    nowIso: string,
  ): Promise<void> {
    const ours = claimed.status?.lastDeliveryAt;
    const res = await this.d.api.updateStatusWithRetry<PaymentEvent>(
      "paymentevents",
      this.d.namespace,
      claimed.metadata.name,
      (current) => {
        // Someone claimed it after us (we were slower than the stale delay): theirs is the record.
        if (current.status?.outcome !== "Processing" || current.status.lastDeliveryAt !== ours)
          return undefined;
        return {
          ...current,
          status: {
            ...current.status,
            outcome,
            message,
            ...(outcome === "Failed" ? {} : { processedAt: nowIso }),
          },
        };
      },
    );
    if (res.conflicts) this.d.metrics.conflicts.inc({ resource: "paymentevents" }, res.conflicts);
  }
}

export interface PaymentRouteDeps {
  events: PaymentEvents;
  secrets: string[];
  toleranceSeconds: number;
  now: () => Date;
  metrics: WebhookMetrics;
  limiter: TokenBuckets;
  bodyLimit: number;
}

/**
 * Registers the route in a scope of its own whose JSON parser hands over the raw bytes (the
 * signature is over them); other routes keep Fastify's parsed JSON.
 */
export async function registerPaymentRoute(app: FastifyInstance, deps: PaymentRouteDeps): Promise<void> {
  await app.register(async (scope) => {
    scope.addContentTypeParser(
      "application/json",
      { parseAs: "buffer", bodyLimit: deps.bodyLimit },
      (_req, body, done) => done(null, body),
    );
    scope.post(
      PAYMENT_PATH,
      {
        onRequest: async (req, reply) => {
          const t = deps.limiter.take("payment");
          if (!t.ok)
            return send(
              req,
              reply,
              refuse(429, "rate_limited", { "retry-after": String(t.retryAfterSeconds) }),
            );
        },
      },
      async (req, reply) => {
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const h = req.headers["stripe-signature"];
        const header = Array.isArray(h) ? h.join(",") : h;
        const check = verifyStripeSignature(
          raw,
          header,
          deps.secrets,
          deps.toleranceSeconds,
          Math.floor(deps.now().getTime() / 1000),
        );
        if (!check.ok) {
          deps.metrics.signatureFailures.inc({ reason: check.reason });
          req.log.warn(
            { reason: check.reason, bytes: raw.length, remote: req.ip },
            "payment webhook signature rejected",
          );
          return send(req, reply, refuse(400, "bad_signature"));
        }
        let json: unknown;
        try {
          json = JSON.parse(raw.toString("utf8"));
        } catch {
          req.log.warn({ bytes: raw.length }, "signed payment webhook is not JSON");
          return send(req, reply, refuse(400, "bad_request"));
        }
        const event = EventEnvelope.safeParse(json);
        if (!event.success) {
          const fields = [...new Set(event.error.issues.map((i) => i.path.join(".") || "body"))].join(", ");
          req.log.warn({ fields }, "signed payment webhook is not an event");
          return send(req, reply, refuse(400, "bad_request"));
        }
        return send(req, reply, await deps.events.deliver(event.data, req.log));
      },
    );
  });
}
