// POST /reports/gpu_provider?ns=&name=&uid=&job=&attempt=&sub=&exp=&kid=&token=: the GPU
// provider's job status callback.
//
// RunPod does not sign callbacks (https://docs.runpod.io/serverless/endpoints/send-requests), so
// the URL the controller submitted carries an HMAC token over the object's uid, the one submission
// it was made for, an expiry and the signing key's id (src/callback/token.ts). The sidecar's memory
// must not depend on what a caller sends, so everything that can refuse a request is decided before
// its body is read. In order:
//   1. onRequest, no I/O: the token, its key and its expiry (401); then the route's rate limit;
//   2. onRequest, one read of the MediaJob (from the API server's watch cache when that settles
//      it, src/callback/read.ts; else from etcd): a job that is gone (404), re-created or of another
//      attempt (401), or finished (200, a duplicate) is answered at once, its body never read. A
//      submission seen finished is remembered (FinishedSubmissions), so its duplicates, and the
//      requests of whoever holds a leaked URL of it, cost no read at all;
//   3. onRequest, one in flight per job: a second callback for a job whose first is still being
//      handled is answered 429 with Retry-After (RunPod retries it 10 s later);
//   4. the body, streamed and capped (callback-body.ts): only its top-level `id` and `status` are
//      kept, and only when the provider's id is not recorded yet; otherwise it is discarded unread;
//   5. the body is a hint, never the truth: the provider's status API is asked about the recorded
//      job (or, for an unconfirmed submission, the one the hint names, once its id has the shape of
//      a provider job id and no other MediaJob holds it: the apiserver is asked, by the CRD's
//      selectable field .status.providerJobId), and only that answer is written. An adopted id is
//      marked (AdoptedByCallback, a Warning Event, a metric) and holds the next pipeline step back;
//   6. the result is written with the lifecycle shared with the controller and the CLI
//      (writeProviderResult) over the read of step 2, with its resourceVersion; on a conflict it is
//      read again and retried. One read and one write per callback.
// One piece: the token check, the replay memory and the status patch share one callback's state.
import type { IncomingMessage } from "node:http";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Counter } from "prom-client";
import { z } from "zod";
import { CALLBACK_PATH, parseCallbackQuery, verifyCallback, type CallbackTarget } from "../callback/token.js";
import type { MediaJob } from "../crds/mediajob.js";
import type { KubeApi } from "../k8s/api.js";
import { isConflict } from "../k8s/errors.js";
import type { EventSink } from "../k8s/events.js";
import { writeProviderResult } from "../controller/mediajob/result-write.js";
import { matchSubmission, type SubmissionRef } from "../mediajob/result.js";
import type { UsageSettings } from "../mediajob/usage.js";
import { isTerminal } from "../mediajob/job.js";
import { isProviderError, type GpuProviderClient } from "../provider/index.js";
import { PROVIDER_JOB_ID } from "../provider/job-id.js";
import { ProviderJobStatusSchema, type ProviderJob } from "../provider/schemas.js";
import { holderKey, providerJobHolders } from "../callback/holders.js";
import { readCallbackJob } from "../callback/read.js";
import { discardBody, readCallbackHint } from "./callback-body.js";
import type { WebhookMetrics } from "./metrics.js";
import type { TokenBuckets, VerifyThenLimit } from "./ratelimit.js";
import { refuse, send, type Answer } from "./replies.js";

export interface CallbackRouteDeps {
  api: KubeApi;
  /** CALLBACK_SECRET; without one every callback is refused (an empty HMAC key is guessable). */
  secret: string | undefined;
  /** CALLBACK_SECRET_PREVIOUS: still accepted during a rotation, for the URLs it signed. */
  previousSecret?: string | undefined;
  /** The provider's status API: every callback is confirmed there before anything is written. */
  provider: Pick<GpuProviderClient, "status"> | undefined;
  now: () => Date;
  metrics: WebhookMetrics;
  /** Failures per source address, then genuine traffic: a forged flood cannot crowd out real callbacks. */
  guard: VerifyThenLimit;
  perJobLimiter: TokenBuckets;
  /** Submissions seen finished (tests share one between sidecars). Default: a new one. */
  finishedSubmissions?: FinishedSubmissions;
  /**
   * The namespace the operator watches (WATCH_NAMESPACE); undefined: every namespace. Where the
   * MediaJobs that may hold a provider job are looked for before a callback adopts it.
   */
  watchNamespace?: string | undefined;
  /** Where the Warning Event of an adoption goes. Without it, only the log and the metric tell. */
  events?: EventSink;
  conflictAttempts?: number;
  /** The billing rule (USAGE_*): an ended attempt is billed in the write that records it. */
  billing?: UsageSettings;
  /** Default CALLBACK_BODY_LIMIT. */
  bodyLimit?: number;
}

/**
 * The most bytes of one callback body read. RunPod's callback echoes the job's input and output,
 * each up to the provider's 10 MB, and the body is streamed (only `id` and `status` are kept), so
 * this caps the bytes and the time a request costs, not what it holds in memory.
 */
export const CALLBACK_BODY_LIMIT = 24 * 1024 * 1024;

/** What RunPod waits between two attempts of a callback: the Retry-After of a busy job. */
const CALLBACK_RETRY_AFTER_SECONDS = 10;

/** The submission a callback URL was made for, as the domain's checks take it. */
const submissionOf = (t: CallbackTarget): SubmissionRef => ({
  uid: t.uid,
  jobId: t.jobId,
  attempt: t.attempt,
  id: t.submission,
});

/** The hint's shape: a provider job id (never a path) and a provider status. */
const Hint = z.object({
  id: z.string().regex(PROVIDER_JOB_ID),
  status: ProviderJobStatusSchema,
});

/** What onRequest learnt, for the body parser and the handler. */
interface Admitted {
  target: CallbackTarget;
  job: MediaJob;
  /** The provider's id is not recorded: the body's `id` is needed. */
  needsHint: boolean;
}

const targets = new WeakMap<FastifyRequest, CallbackTarget>();
const admitted = new WeakMap<FastifyRequest, Admitted>();

/**
 * Provider job ids this replica has seen recorded, by the MediaJob that holds them (bounded, least
 * recently used first out): a callback may not adopt for one job a provider job another job holds.
 */
class RecordedProviderJobs {
  readonly #owners = new Map<string, string>();
  constructor(private readonly max = 50_000) {}

  remember(providerJobId: string, owner: string): void {
    this.#owners.delete(providerJobId);
    this.#owners.set(providerJobId, owner);
    if (this.#owners.size > this.max) this.#owners.delete(this.#owners.keys().next().value!);
  }

  ownerOf(providerJobId: string): string | undefined {
    return this.#owners.get(providerJobId);
  }
}

/**
 * Submissions (uid and submission id) this replica has seen finished, least recently used first.
 * A finished submission never becomes unfinished (a reset or a retry makes a new submission id),
 * so remembering it is always right; the bound only decides how many duplicates skip the read.
 */
class FinishedSubmissions {
  readonly #keys = new Set<string>();

  constructor(private readonly max = 10_000) {}

  has(t: CallbackTarget): boolean {
    const key = `${t.uid}/${t.submission}`;
    if (!this.#keys.has(key)) return false;
    this.#keys.delete(key);
    this.#keys.add(key);
    return true;
  }

  add(t: CallbackTarget): void {
    const key = `${t.uid}/${t.submission}`;
    this.#keys.delete(key);
    this.#keys.add(key);
    if (this.#keys.size > this.max) this.#keys.delete(this.#keys.values().next().value!);
  }
}

/**
 * Who holds a provider job: the MediaJob's namespace and name. Not its uid: an object re-created
 * under the same name (restored from a backup, with its job id) is the same user's job, and a
 * provider that honours client ids answers it with the same provider job.
 */
const ownerKey = holderKey;

function adoptionCounter(metrics: WebhookMetrics): Counter<"outcome"> {
  const name = "media_orchestrator_webhooks_callback_adoptions_total";
  const existing = metrics.registry.getSingleMetric(name) as Counter<"outcome"> | undefined;
  if (existing) return existing;
  const counter = new Counter({
    name,
    help:
      "Callbacks that named the provider job of a submission whose /run answer was not recorded: " +
      "adopted (marked AdoptedByCallback, next step held) or refused",
    labelNames: ["outcome"] as const,
    registers: [metrics.registry],
  });
  // Both series from the start, so the alert's increase() has a series to read before the first.
  for (const outcome of ["adopted", "refused_recorded_elsewhere"]) counter.inc({ outcome }, 0);
  return counter;
}

export function registerCallbackRoute(app: FastifyInstance, deps: CallbackRouteDeps): void {
  const bodyLimit = deps.bodyLimit ?? CALLBACK_BODY_LIMIT;
  const inFlight = new Set<string>();
  const finished = deps.finishedSubmissions ?? new FinishedSubmissions();
  const recorded = new RecordedProviderJobs();
  const adoptions = adoptionCounter(deps.metrics);

  /** An answer decided before the body was read: the connection is closed, the body never read. */
  const early = (req: FastifyRequest, reply: FastifyReply, answer: Answer) => {
    void reply.header("connection", "close");
    return send(req, reply, answer);
  };

  const checkToken = async (req: FastifyRequest, reply: FastifyReply) => {
    const parsed = parseCallbackQuery(req.query as Record<string, unknown>);
    const verdict = parsed
      ? verifyCallback([deps.secret, deps.previousSecret], parsed, deps.now().getTime())
      : ({ ok: false, reason: "malformed" } as const);
    if (!verdict.ok) {
      // An expired URL was genuine once: it is refused, but does not count against its source.
      const failing = verdict.reason === "expired" ? undefined : deps.guard.failed(req);
      req.log.warn(
        {
          ...(parsed && { namespace: parsed.target.namespace, name: parsed.target.name }),
          remote: req.ip,
          reason: verdict.reason,
        },
        "gpu callback refused: bad, expired or missing token",
      );
      return early(
        req,
        reply,
        failing ?? refuse(401, verdict.reason === "expired" ? "expired" : "unauthorized"),
      );
    }
    targets.set(req, parsed!.target);
  };

  const admitJob = async (req: FastifyRequest, reply: FastifyReply) => {
    const target = targets.get(req)!;
    const who = { namespace: target.namespace, name: target.name, attempt: target.attempt };
    // A duplicate of a submission seen finished is answered from memory: no read, no budget.
    if (finished.has(target)) return early(req, reply, duplicate(req, who));
    // Spent only by callbacks with a valid token: forged floods cannot crowd out real ones.
    const shed = deps.guard.admit("callbacks");
    if (shed) return early(req, reply, shed);
    const t = deps.perJobLimiter.take(`${target.namespace}/${target.name}/${target.attempt}`);
    if (!t.ok)
      return early(req, reply, refuse(429, "rate_limited", { "retry-after": String(t.retryAfterSeconds) }));

    const job = await readCallbackJob(deps.api, target.namespace, target.name, submissionOf(target));
    if (!job) {
      req.log.info(who, "gpu callback for a MediaJob that no longer exists");
      return early(req, reply, refuse(404, "not_found"));
    }
    const status = job.status;
    if (status?.providerJobId) recorded.remember(status.providerJobId, ownerKey(job));
    switch (matchSubmission(job, submissionOf(target))) {
      case "recreated":
        req.log.warn(who, "gpu callback refused: the MediaJob was re-created under the same name");
        return early(req, reply, refuse(401, "superseded"));
      case "earlier":
        req.log.info(
          { ...who, current: status?.submission?.attempt },
          "gpu callback refused: an earlier attempt",
        );
        return early(req, reply, refuse(401, "superseded"));
      case "finished":
        finished.add(target);
        return early(req, reply, duplicate(req, who));
      case "current":
        break;
    }

    // One callback per job at a time reads its body and asks the provider: a second one waits for
    // the provider's retry (a finished job's duplicates were answered above, side by side).
    const slot = `${target.namespace}/${target.name}`;
    if (inFlight.has(slot)) {
      req.log.info(who, "gpu callback refused: another callback for this job is in flight");
      return early(
        req,
        reply,
        refuse(429, "in_flight", { "retry-after": String(CALLBACK_RETRY_AFTER_SECONDS) }),
      );
    }
    inFlight.add(slot);
    reply.raw.once("close", () => inFlight.delete(slot));
    admitted.set(req, { target, job, needsHint: !status?.providerJobId });
  };

  app.register(async (scope) => {
    // The body is streamed, never parsed whole (callback-body.ts); JSON is the only type taken.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("application/json", async (req: FastifyRequest, payload: IncomingMessage) => {
      const declared = Number(req.headers["content-length"] ?? 0);
      if (declared > bodyLimit)
        throw Object.assign(new Error("body too large"), {
          statusCode: 413,
          code: "FST_ERR_CTP_BODY_TOO_LARGE",
        });
      if (admitted.get(req)?.needsHint) return readCallbackHint(payload, bodyLimit);
      await discardBody(payload, bodyLimit);
      return null;
    });

    scope.post(CALLBACK_PATH, { onRequest: [checkToken, admitJob] }, async (req, reply) => {
      const { target, job, needsHint } = admitted.get(req)!;
      const who = { namespace: target.namespace, name: target.name, attempt: target.attempt };
      const status = job.status!;
      let providerJobId = status.providerJobId;
      let hinted: string | undefined;
      if (needsHint) {
        const hint = Hint.safeParse(req.body);
        if (!hint.success) {
          const fields = [...new Set(hint.error.issues.map((i) => i.path.join(".") || "body"))].join(", ");
          req.log.warn({ ...who, fields }, "gpu callback body invalid");
          return send(req, reply, refuse(400, "bad_request"));
        }
        providerJobId = hint.data.id;
        hinted = hint.data.status;
        if (await heldElsewhere(req, job, providerJobId)) {
          adoptions.inc({ outcome: "refused_recorded_elsewhere" });
          req.log.warn(
            { ...who, named: providerJobId },
            "gpu callback names a provider job another MediaJob holds; not adopted",
          );
          return send(req, reply, {
            statusCode: 200,
            body: { received: true, applied: false },
            outcome: "refused_adoption",
          });
        }
      }
      if (!deps.provider || !status.endpointId || !providerJobId) {
        req.log.error(who, "gpu callback cannot be confirmed: no provider client or no endpoint id");
        return send(req, reply, refuse(503, "unavailable"));
      }

      // The provider says what became of the job: the recorded one, or the one the hint names.
      let confirmed: ProviderJob;
      try {
        confirmed = await deps.provider.status(status.endpointId, providerJobId);
      } catch (err) {
        if (isProviderError(err, "JOB_NOT_FOUND") || isProviderError(err, "ENDPOINT_NOT_FOUND")) {
          req.log.warn(
            { ...who, named: providerJobId },
            "gpu callback names a job the provider does not know; ignored",
          );
          return send(req, reply, {
            statusCode: 200,
            body: { received: true, applied: false },
            outcome: "unconfirmed",
          });
        }
        req.log.warn(
          { ...who, err: isProviderError(err) ? err.code : "error" },
          "gpu callback: provider status unavailable",
        );
        return send(req, reply, refuse(503, "unavailable"));
      }
      let res: Awaited<ReturnType<typeof writeProviderResult>>;
      try {
        res = await writeProviderResult(deps.api, target.namespace, target.name, {
          result: confirmed,
          now: deps.now().toISOString(),
          submission: submissionOf(target),
          adopt: true,
          conflictAttempts: deps.conflictAttempts ?? 8,
          ...(deps.billing && { billing: deps.billing }),
          // The read the checks above made: a conflict (the job changed while the provider was
          // asked) re-reads, so one read and one write is the usual cost of a callback.
          read: job,
        });
      } catch (err) {
        if (isConflict(err))
          deps.metrics.conflicts.inc({ resource: "mediajobs" }, deps.conflictAttempts ?? 8);
        throw err; // the error handler answers 503: the provider (or the controller's poll) tries again
      }
      if (res.conflicts) deps.metrics.conflicts.inc({ resource: "mediajobs" }, res.conflicts);
      if (res.outcome === "gone") return send(req, reply, refuse(404, "not_found"));
      if (res.outcome === "superseded") return send(req, reply, refuse(401, "superseded"));
      if (res.outcome === "terminal" || isTerminal(res.job?.status?.phase)) finished.add(target);
      if (res.outcome === "terminal") return send(req, reply, duplicate(req, who));
      if (res.job?.status?.providerJobId) recorded.remember(res.job.status.providerJobId, ownerKey(res.job));
      if (res.adopted && res.job) await adopted(req, res.job, confirmed);
      const applied = res.outcome === "applied" || res.outcome === "adopted";
      req.log.info(
        {
          ...who,
          providerJobId: confirmed.id,
          hinted,
          confirmed: confirmed.status,
          outcome: res.outcome,
          phase: res.job?.status?.phase,
          conflicts: res.conflicts,
        },
        applied ? "gpu callback applied" : "gpu callback changed nothing",
      );
      return send(req, reply, {
        statusCode: 200,
        body: { received: true, applied: res.outcome === "applied" },
        outcome: res.outcome === "applied" ? "applied" : res.outcome,
      });
    });
  });

  /**
   * Whether a MediaJob other than `job` holds `providerJobId`: this replica's memory first, then
   * the apiserver (a fresh replica has seen nothing). Where the apiserver cannot filter on the
   * field (before Kubernetes 1.31), only the memory answers, and an adoption stays marked and held.
   */
  let unsupportedLogged = false;
  async function heldElsewhere(req: FastifyRequest, job: MediaJob, providerJobId: string): Promise<boolean> {
    const mine = ownerKey(job);
    const owner = recorded.ownerOf(providerJobId);
    if (owner !== undefined && owner !== mine) return true;
    const holders = await providerJobHolders(deps.api, deps.watchNamespace, providerJobId);
    if (holders === "unsupported") {
      if (!unsupportedLogged)
        req.log.warn(
          "the apiserver cannot list MediaJobs by status.providerJobId (selectableFields needs Kubernetes 1.31 or later): callbacks adopt on this replica's memory of recorded ids only",
        );
      unsupportedLogged = true;
      return false;
    }
    for (const h of holders) recorded.remember(providerJobId, h);
    return holders.some((h) => h !== mine);
  }

  async function adopted(req: FastifyRequest, job: MediaJob, confirmed: ProviderJob): Promise<void> {
    adoptions.inc({ outcome: "adopted" });
    const ref = `${job.metadata.name} -n ${job.metadata.namespace}`;
    const message =
      `provider job ${confirmed.id} (${confirmed.status}) adopted from this submission's callback: its /run ` +
      "answer was never recorded, so nothing but the callback ties that job to this one. The next pipeline " +
      `step waits for the submission's answer, or for: kubectl media accept ${ref}`;
    req.log.warn(
      { namespace: job.metadata.namespace, name: job.metadata.name, providerJobId: confirmed.id },
      "gpu callback adopted a provider job without a recorded /run answer",
    );
    await deps.events?.record(job, "Warning", "AdoptedByCallback", message);
  }

  function duplicate(req: FastifyRequest, who: Record<string, unknown>): Answer {
    deps.metrics.duplicates.inc({ route: CALLBACK_PATH });
    req.log.info(who, "gpu callback for a finished job changed nothing");
    return { statusCode: 200, body: { received: true, applied: false }, outcome: "duplicate" };
  }
}
