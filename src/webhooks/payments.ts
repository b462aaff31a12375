// POST /webhooks/payment_provider: verify, answer replays from memory, apply, record.
//
// Every effect of a payment event is idempotent (a BillingAccount keeps the event that set its
// state and refuses older ones; a replay of that event is "the same" and writes nothing), so an
// event needs no claim before its effect: it is applied, then recorded. The PaymentEvent named from
// a hash of event.id is the record; it is created once, after the effect, with the outcome in a
// label (one write). Deliveries of one event racing in two replicas both apply it (the second is a
// no-op on the account) and both try the create: one wins, the other answers as a duplicate. A
// failed event is recorded Failed and is not finished: its redelivery runs again and rewrites the
// record's status. Finished events are kept in memory (finished.ts): their replays cost no
// Kubernetes call at all. docs/webhooks.md has the whole table.
// One piece: verification, the replay memory, the effect and the record share one delivery's state.
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import {
  paymentEventName,
  type PaymentEvent,
  type PaymentEventStatus,
  type PaymentOutcome,
} from "../crds/index.js";
import type { KubeApi } from "../k8s/api.js";
import { describeError, isAlreadyExists, isConflict } from "../k8s/errors.js";
import { applySubscriptionChange, type SubscriptionChange } from "./billing.js";
import type { FinishedEvents } from "./finished.js";
import { paymentTypeLabel, type WebhookMetrics } from "./metrics.js";
import {
  SubscriptionFields,
  subscriptionPeriod,
  subscriptionPriceIds,
  type SubscriptionLookup,
} from "./paymentapi.js";
import { ignoredMessage, isFinished, newPaymentRecord, recordedOutcome } from "./paymentrecord.js";
import type { InFlight, VerifyThenLimit } from "./ratelimit.js";
import { refuse, send, type Answer } from "./replies.js";
import { precheckStripeHeader, verifyStripeSignature, type SignatureFailure } from "./signature.js";

const PAYMENT_PATH = "/webhooks/payment_provider";

const SUBSCRIPTION_EVENT_TYPES: ReadonlySet<string> = new Set([
  "customer.subscription.created",
  "customer.subscription.updated",
  "customer.subscription.deleted",
  "customer.subscription.paused",
  "customer.subscription.resumed",
  "customer.subscription.trial_will_end",
]);

/**
 * Stripe's meter error reports: meter events it accepted (v1 or the v2 stream answered 200) and
 * refused when it validated them afterwards. Thin events (v2 event destinations), whose payload
 * names the meter only: https://docs.stripe.com/api/v2/core/events/event-types
 */
const METER_ERROR_EVENT_TYPES: ReadonlySet<string> = new Set([
  "v1.billing.meter.error_report_triggered",
  "v1.billing.meter.no_meter_found",
]);

/**
 * When the event was created, in unix seconds: a snapshot event says so in seconds, a thin event
 * (`object: "v2.core.event"`) as an ISO 8601 time (https://docs.stripe.com/api/v2/core/events/object).
 */
const Created = z.union([
  z.int().min(0),
  z.iso
    .datetime({ offset: true })
    .transform((t) => Math.floor(Date.parse(t) / 1000))
    .pipe(z.int().min(0)),
]);

/** The parts of the provider's event envelope we rely on; the rest is ignored. */
const EventEnvelope = z.object({
  id: z.string().min(1).max(255),
  type: z.string().min(1).max(255),
  created: Created,
  livemode: z.boolean().optional(),
  data: z.object({ object: z.record(z.string(), z.unknown()) }).optional(),
  /** A thin event's object (a meter error report's meter). */
  related_object: z.object({ id: z.string().min(1).max(255), type: z.string().max(255) }).nullish(),
});
export type EventEnvelope = z.infer<typeof EventEnvelope>;

const IdRef = z.union([z.string().min(1).max(255), z.object({ id: z.string().min(1).max(255) })]);
const refId = (v: z.infer<typeof IdRef>): string => (typeof v === "string" ? v : v.id);

const Subscription = z.object({
  id: z.string().min(1).max(255).optional(),
  customer: IdRef,
  ...SubscriptionFields,
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
  const period = subscriptionPeriod(sub.data);
  return {
    customerId: refId(sub.data.customer),
    ...(sub.data.id ? { subscriptionId: sub.data.id } : {}),
    subscriptionStatus: sub.data.status,
    ...(sub.data.items && { priceIds: subscriptionPriceIds(sub.data.items) }),
    ...(period && { period }),
    eventId: event.id,
    created: event.created,
  };
}

/**
 * A meter error report: told (a warning log line, the payment events metric by its type, the
 * PaymentEvent record with what to do), never acted on. Its thin payload names the meter, not the
 * events: the identifiers (mj_<uid>_<attempt>) of a sample of the refused ones are in the full
 * event, in the payment provider's Dashboard or at GET /v2/core/events/{id}. Those attempts stay
 * `Reported` on their jobs (docs/design.md, "Refused after acceptance").
 */
function meterErrorReport(
  event: EventEnvelope,
  log: FastifyBaseLogger,
): { outcome: PaymentOutcome; message: string; answer: Answer } {
  const meter = event.related_object?.id ?? "unknown";
  log.warn(
    { eventId: event.id, type: event.type, meter },
    "the payment provider refused meter events it had accepted",
  );
  const what =
    event.type === "v1.billing.meter.no_meter_found"
      ? "meter events naming no active meter"
      : `meter events of meter ${meter}`;
  return {
    outcome: "Processed",
    message:
      `the payment provider refused ${what} after accepting them: they are not billed. Its error report ` +
      `(Dashboard, or GET /v2/core/events/${event.id}) names sample identifiers mj_<job uid>_<attempt>; ` +
      "compare the meter's event summaries with the BillingAccounts' reportedSeconds",
    answer: { statusCode: 200, body: { received: true }, outcome: "processed" },
  };
}

export interface PaymentDeps {
  /** Every call with the client's deadline (KUBE_API_TIMEOUT_SECONDS). */
  api: KubeApi;
  namespace: string;
  metrics: WebhookMetrics;
  now: () => Date;
  log: FastifyBaseLogger;
  finished: FinishedEvents;
  /** Settles same-second subscription events (billing.ts). */
  subscriptions?: SubscriptionLookup;
  /** How long a concurrent duplicate in this replica waits for the attempt in flight (then 409). */
  duplicateWaitMs: number;
}

const duplicateAnswer = (): Answer => ({
  statusCode: 200,
  body: { received: true, duplicate: true },
  outcome: "duplicate",
});

export class PaymentEvents {
  readonly #inflight = new Map<string, Promise<Answer>>();

  constructor(private readonly d: PaymentDeps) {}

  /** A replay of a finished event, answered from memory: no Kubernetes call. */
  replayFromMemory(eventId: string): Answer | undefined {
    if (!this.d.finished.has(eventId)) return undefined;
    this.d.metrics.duplicates.inc({ route: PAYMENT_PATH });
    return duplicateAnswer();
  }

  /** Handles one verified event. Concurrent calls for one id in this process share one attempt. */
  async deliver(event: EventEnvelope, log: FastifyBaseLogger): Promise<Answer> {
    const running = this.#inflight.get(event.id);
    if (running) {
      this.d.metrics.duplicates.inc({ route: PAYMENT_PATH });
      const answer = await this.#within(running, this.d.duplicateWaitMs);
      if (!answer) return refuse(409, "in_progress", { "retry-after": "10" });
      return answer.statusCode < 300 ? duplicateAnswer() : answer;
    }
    const attempt = this.#deliver(event, log).finally(() => this.#inflight.delete(event.id));
    this.#inflight.set(event.id, attempt);
    return attempt;
  }

  /** The attempt's answer, or undefined when it takes longer than `ms`. */
  async #within(attempt: Promise<Answer>, ms: number): Promise<Answer | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), ms);
    });
    // The attempt's own failure is its deliverer's to answer; a joiner only needs an answer.
    const settled = attempt.catch(() => refuse(503, "unavailable", { "retry-after": "5" }));
    return Promise.race([settled, late]).finally(() => clearTimeout(timer));
  }

  async #deliver(event: EventEnvelope, log: FastifyBaseLogger): Promise<Answer> {
    const nowIso = this.d.now().toISOString();
    const result = await this.#apply(event, log);
    return this.#record(event, result, nowIso, log);
  }

  /** Applies the event's effect (idempotent); never throws: a failure is an outcome. */
  async #apply(
    event: EventEnvelope,
    log: FastifyBaseLogger,
  ): Promise<{ outcome: PaymentOutcome; message: string; answer: Answer }> {
    try {
      if (METER_ERROR_EVENT_TYPES.has(event.type)) return meterErrorReport(event, log);
      if (!SUBSCRIPTION_EVENT_TYPES.has(event.type)) {
        return {
          outcome: "Ignored",
          message: ignoredMessage(event.type),
          answer: { statusCode: 200, body: { received: true }, outcome: "ignored" },
        };
      }
      const change = subscriptionChange(event);
      const res = await applySubscriptionChange(
        {
          api: this.d.api,
          namespace: this.d.namespace,
          metrics: this.d.metrics,
          ...(this.d.subscriptions && { subscriptions: this.d.subscriptions }),
        },
        change,
        this.d.now().toISOString(),
      );
      log.info(
        {
          eventId: event.id,
          type: event.type,
          account: res.account,
          applied: res.applied,
          subscriptionStatus: res.subscriptionStatus,
          askedProvider: res.askedProvider,
        },
        res.applied ? "subscription state applied" : "subscription event changed nothing",
      );
      const message = res.applied
        ? `BillingAccount ${res.account}: subscription ${res.subscriptionStatus ?? "unknown"}${res.askedProvider ? " (same-second tie: the provider's current state)" : ""}`
        : res.supersededBy
          ? `BillingAccount ${res.account} unchanged: newer event ${res.supersededBy} already applied`
          : `BillingAccount ${res.account} unchanged: already in this state`;
      return {
        outcome: "Processed",
        message,
        answer: { statusCode: 200, body: { received: true }, outcome: "processed" },
      };
    } catch (err) {
      const message = describeError(err).slice(0, 1024);
      if (err instanceof UnprocessableEvent) {
        log.warn(
          { eventId: event.id, type: event.type, reason: err.message },
          "payment event not processable",
        );
        return { outcome: "Failed", message, answer: refuse(400, "unprocessable") };
      }
      log.error({ eventId: event.id, type: event.type, error: message }, "payment event processing failed");
      return { outcome: "Failed", message, answer: refuse(503, "failed", { "retry-after": "30" }) };
    }
  }

  /**
   * Records the outcome: create the record (one write), or, when it exists, settle with it: a
   * finished record means another delivery finished the event first; a Failed one is rewritten.
   */
  async #record(
    event: EventEnvelope,
    result: { outcome: PaymentOutcome; message: string; answer: Answer },
    nowIso: string,
    log: FastifyBaseLogger,
  ): Promise<Answer> {
    const { api, namespace, finished, metrics } = this.d;
    const name = paymentEventName(event.id);
    const done = isFinished(result.outcome);
    try {
      for (let round = 0; round < 5; round++) {
        let rec: PaymentEvent | undefined;
        try {
          const customerId = customerOf(event);
          rec = await api.create<PaymentEvent>(
            "paymentevents",
            namespace,
            newPaymentRecord(
              { ...event, ...(customerId !== undefined && { customerId }) },
              namespace,
              result.outcome,
              result.message,
            ),
          );
          metrics.paymentOutcomes.inc({ type: paymentTypeLabel(event.type), outcome: result.outcome });
          if (done) finished.add(event.id);
          // A failure keeps its reason on the record (rare: a second write is affordable).
          else await this.#writeStatus(rec, result, nowIso, 1);
          return result.answer;
        } catch (err) {
          if (!isAlreadyExists(err)) throw err;
        }
        rec = await api.get<PaymentEvent>("paymentevents", namespace, name);
        if (!rec) continue; // garbage-collected in between: create again
        if (rec.spec.eventId !== event.id) {
          // Two ids hashing to one name (160 bits: not expected in practice). Refuse loudly.
          log.error({ eventId: event.id, record: name }, "payment event name collision");
          return refuse(503, "name_collision");
        }
        if (isFinished(recordedOutcome(rec))) {
          finished.add(event.id);
          metrics.duplicates.inc({ route: PAYMENT_PATH });
          log.info(
            { eventId: event.id, type: event.type, outcome: recordedOutcome(rec) },
            "payment event already handled: answered as a replay",
          );
          return duplicateAnswer();
        }
        // Failed (or left Processing by an older version): this delivery's outcome replaces it.
        const attempts = (rec.status?.attempts ?? 1) + 1;
        if (await this.#writeStatus(rec, result, nowIso, attempts)) {
          metrics.paymentOutcomes.inc({ type: paymentTypeLabel(event.type), outcome: result.outcome });
          if (done) finished.add(event.id);
          return result.answer;
        }
        // 409: another delivery rewrote it in between: look again.
      }
      return refuse(503, "unavailable", { "retry-after": "10" });
    } catch (err) {
      // The effect is done (or failed) but not recorded: a redelivery runs it again, which is
      // harmless (every effect is idempotent).
      log.error(
        { eventId: event.id, error: describeError(err) },
        "could not record the payment event outcome",
      );
      return result.answer.statusCode < 300
        ? refuse(503, "record_failed", { "retry-after": "30" })
        : result.answer;
    }
  }

  /** Status write guarded by the record's resourceVersion; false on 409 (someone wrote first). */
  async #writeStatus(
    rec: PaymentEvent,
    result: { outcome: PaymentOutcome; message: string },
    nowIso: string,
    attempts: number,
  ): Promise<boolean> {
    const status: PaymentEventStatus = {
      ...rec.status,
      outcome: result.outcome,
      message: result.message,
      attempts,
      deliveries: (rec.status?.deliveries ?? attempts - 1) + 1,
      lastDeliveryAt: nowIso,
      ...(isFinished(result.outcome) ? { processedAt: nowIso } : {}),
    };
    try {
      await this.d.api.replaceStatus<PaymentEvent>("paymentevents", { ...rec, status });
      return true;
    } catch (err) {
      if (isConflict(err)) {
        this.d.metrics.conflicts.inc({ resource: "paymentevents" });
        return false;
      }
      throw err;
    }
  }
}

/**
 * The payment route's body limit. Stripe's events are a few KiB (an event carries one API object);
 * 256 KiB is generous for them, and bounds what an unverified sender can make us buffer.
 */
const PAYMENT_BODY_LIMIT = 256 * 1024;

export interface PaymentRouteDeps {
  events: PaymentEvents;
  secrets: string[];
  toleranceSeconds: number;
  now: () => Date;
  metrics: WebhookMetrics;
  /** Verify first, then limit (ratelimit.ts). */
  guard: VerifyThenLimit;
  /** Deliveries in flight whose signature is not checked yet (their body is still arriving). */
  inFlight: InFlight;
  /** Default PAYMENT_BODY_LIMIT. */
  bodyLimit?: number;
}

/** What a source is charged for: answers to requests that never proved they came from the provider. */
const FAILURE_CODES = new Set([400, 408, 413, 415, 431]);

/**
 * Registers the route in a scope of its own whose JSON parser hands over the raw bytes (the
 * signature is over them); other routes keep Fastify's parsed JSON.
 *
 * Before the body is read (onRequest): the signature header's form and timestamp are checked,
 * then the request takes a place among the unverified deliveries in flight. An unsigned or stale
 * delivery is answered at once and its connection closed, without buffering a byte of its body.
 */
export async function registerPaymentRoute(app: FastifyInstance, deps: PaymentRouteDeps): Promise<void> {
  const authentic = new WeakSet<FastifyRequest>();
  const charged = new WeakSet<FastifyRequest>();
  const header = (req: FastifyRequest): string | undefined => {
    const h = req.headers["stripe-signature"];
    return Array.isArray(h) ? h.join(",") : h;
  };
  const nowSeconds = () => Math.floor(deps.now().getTime() / 1000);
  /** A failed check: the route's 400, or a 429 once the source has spent its failure budget. */
  const unverified = (req: FastifyRequest, reply: FastifyReply, reason: SignatureFailure, bytes?: number) => {
    charged.add(req);
    deps.metrics.signatureFailures.inc({ reason });
    req.log.warn({ reason, bytes, remote: req.ip }, "payment webhook signature rejected");
    return send(req, reply, deps.guard.failed(req) ?? refuse(400, "bad_signature"));
  };

  await app.register(async (scope) => {
    scope.addContentTypeParser(
      "application/json",
      { parseAs: "buffer", bodyLimit: deps.bodyLimit ?? PAYMENT_BODY_LIMIT },
      (_req, body, done) => done(null, body),
    );
    scope.post(
      PAYMENT_PATH,
      {
        onRequest: [
          async (req, reply) => {
            const failure = precheckStripeHeader(
              header(req),
              deps.secrets,
              deps.toleranceSeconds,
              nowSeconds(),
            );
            if (failure) {
              // The body is not wanted: close the connection rather than read it to reuse it.
              void reply.header("connection", "close");
              return unverified(req, reply, failure);
            }
          },
          deps.inFlight.enter,
        ],
        // Charged after the answer when a step before the handler refused it (body limit, parser).
        onResponse: async (req, reply) => {
          if (!authentic.has(req) && !charged.has(req) && FAILURE_CODES.has(reply.statusCode))
            deps.guard.failed(req);
        },
      },
      async (req, reply) => {
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const check = verifyStripeSignature(
          raw,
          header(req),
          deps.secrets,
          deps.toleranceSeconds,
          nowSeconds(),
        );
        if (!check.ok) return unverified(req, reply, check.reason, raw.length);
        authentic.add(req);
        deps.inFlight.verified(req);
        let json: unknown;
        try {
          json = JSON.parse(raw.toString("utf8"));
        } catch {
          req.log.warn({ bytes: raw.length }, "signed payment webhook is not JSON");
          return send(req, reply, refuse(400, "bad_request"));
        }
        // A replay of a finished event costs nothing: answered before the route's limit, and
        // before the envelope is validated again (only the provider can sign, and this id's
        // event was validated when it was processed).
        const id = (json as { id?: unknown } | null)?.id;
        const replay = typeof id === "string" ? deps.events.replayFromMemory(id) : undefined;
        if (replay) return send(req, reply, replay);
        const event = EventEnvelope.safeParse(json);
        if (!event.success) {
          const fields = [...new Set(event.error.issues.map((i) => i.path.join(".") || "body"))].join(", ");
          req.log.warn({ fields }, "signed payment webhook is not an event");
          return send(req, reply, refuse(400, "bad_request"));
        }
        const shed = deps.guard.admit();
        if (shed) return send(req, reply, shed);
        return send(req, reply, await deps.events.deliver(event.data, req.log));
      },
    );
  });
}
