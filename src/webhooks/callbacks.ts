// POST /reports/gpu_provider?ns=&name=&uid=&job=&attempt=&sub=&token=: the GPU provider's job
// status callback.
//
// RunPod does not sign callbacks (https://docs.runpod.io/serverless/endpoints/send-requests), so
// the URL the controller submitted carries an HMAC token over the object's uid and the one
// submission it was made for (src/callback/token.ts). In order:
//   1. the token is checked before anything else, without I/O (401), so forged traffic spends no
//      rate limit and no apiserver read;
//   2. then the rate limits (global, per job), then the body (400);
//   3. the MediaJob is read: a re-created object or an older attempt is refused (401), a finished
//      job answers 200 at once (a duplicate);
//   4. the body is a hint, never the truth: the provider's status API is asked about the job it
//      names, and only that answer is written (a forged body cannot complete a job or feed the next
//      pipeline step). An unconfirmed submission (its /run answer was lost) is adopted here;
//   5. the result is written with the lifecycle shared with the controller and the CLI
//      (writeProviderResult) over the read of step 3, with its resourceVersion; on a conflict it is
//      read again and retried. One read and one write per callback.
import type { FastifyInstance, FastifyRequest } from "fastify";
import {
  CALLBACK_PATH,
  parseCallbackQuery,
  verifyCallbackToken,
  type CallbackTarget,
} from "../callback/token.js";
import type { MediaJob } from "../crds/mediajob.js";
import type { KubeApi } from "../k8s/api.js";
import { isConflict } from "../k8s/errors.js";
import { isTerminal } from "../mediajob/lifecycle.js";
import { writeProviderResult } from "../mediajob/result.js";
import { isProviderError, type GpuProviderClient } from "../provider/index.js";
import { ProviderJob } from "../provider/schemas.js";
import type { WebhookMetrics } from "./metrics.js";
import type { TokenBuckets, VerifyThenLimit } from "./ratelimit.js";
import { refuse, send } from "./replies.js";

export { CALLBACK_PATH };

export interface CallbackRouteDeps {
  api: KubeApi;
  /** CALLBACK_SECRET; without one every callback is refused (an empty HMAC key is guessable). */
  secret: string | undefined;
  /** The provider's status API: every callback is confirmed there before anything is written. */
  provider: Pick<GpuProviderClient, "status"> | undefined;
  now: () => Date;
  metrics: WebhookMetrics;
  /** Failures per source address, then genuine traffic: a forged flood cannot crowd out real callbacks. */
  guard: VerifyThenLimit;
  perJobLimiter: TokenBuckets;
  conflictAttempts?: number;
  /** Default CALLBACK_BODY_LIMIT. */
  bodyLimit?: number;
}

const targets = new WeakMap<FastifyRequest, CallbackTarget>();

/**
 * A callback carries the job's whole output, and RunPod passes a handler's return value through
 * whatever its size. Only callbacks with a valid token get their body read (the token is checked
 * in onRequest, before the body arrives), and the body is only a hint, re-read from the provider:
 * a large result must still reach the job, not be refused and left to the timeout poll.
 */
export const CALLBACK_BODY_LIMIT = 16 * 1024 * 1024;

export function registerCallbackRoute(app: FastifyInstance, deps: CallbackRouteDeps): void {
  app.post(
    CALLBACK_PATH,
    {
      bodyLimit: deps.bodyLimit ?? CALLBACK_BODY_LIMIT,
      onRequest: [
        deps.guard.refuseFailingSource,
        async (req, reply) => {
          const parsed = parseCallbackQuery(req.query as Record<string, unknown>);
          if (!parsed || !deps.secret || !verifyCallbackToken(deps.secret, parsed.target, parsed.token)) {
            deps.guard.failed(req);
            req.log.warn(
              parsed
                ? { namespace: parsed.target.namespace, name: parsed.target.name, remote: req.ip }
                : {
                    remote: req.ip,
                    reason: deps.secret ? "missing or malformed query" : "no callback secret",
                  },
              "gpu callback refused: bad or missing token",
            );
            return send(req, reply, refuse(401, "unauthorized"));
          }
          targets.set(req, parsed.target);
        },
        async (req, reply) => {
          // Spent only by callbacks with a valid token: forged floods cannot crowd out real ones.
          const shed = deps.guard.admit("callbacks");
          if (shed) return send(req, reply, shed);
          const target = targets.get(req)!;
          const t = deps.perJobLimiter.take(`${target.namespace}/${target.name}/${target.attempt}`);
          if (!t.ok)
            return send(
              req,
              reply,
              refuse(429, "rate_limited", { "retry-after": String(t.retryAfterSeconds) }),
            );
        },
      ],
    },
    async (req, reply) => {
      const target = targets.get(req)!;
      const who = { namespace: target.namespace, name: target.name, attempt: target.attempt };
      const body = ProviderJob.safeParse(req.body);
      if (!body.success) {
        const fields = [...new Set(body.error.issues.map((i) => i.path.join(".") || "body"))].join(", ");
        req.log.warn({ ...who, fields }, "gpu callback body invalid");
        return send(req, reply, refuse(400, "bad_request"));
      }
      const hint = body.data;
      const job = await deps.api.get<MediaJob>("mediajobs", target.namespace, target.name);
      if (!job) {
        req.log.info(who, "gpu callback for a MediaJob that no longer exists");
        return send(req, reply, refuse(404, "not_found"));
      }
      const status = job.status;
      const sub = status?.submission;
      if (job.metadata.uid !== target.uid || status?.jobId !== target.jobId) {
        req.log.warn(who, "gpu callback refused: the MediaJob was re-created under the same name");
        return send(req, reply, refuse(401, "superseded"));
      }
      if (sub?.attempt !== target.attempt || sub.id !== target.submission) {
        if (isTerminal(status.phase) && !sub) return duplicate(req, reply, who);
        req.log.info({ ...who, current: sub?.attempt }, "gpu callback refused: an earlier attempt");
        return send(req, reply, refuse(401, "superseded"));
      }
      if (isTerminal(status.phase)) return duplicate(req, reply, who);
      if (status.providerJobId && hint.id !== status.providerJobId) {
        req.log.warn(
          { ...who, providerJobId: status.providerJobId, named: hint.id },
          "gpu callback names another provider job than this submission's; ignored",
        );
        return send(req, reply, {
          statusCode: 200,
          body: { received: true, applied: false },
          outcome: "unchanged",
        });
      }
      if (!deps.provider || !status.endpointId) {
        req.log.error(who, "gpu callback cannot be confirmed: no provider client or no endpoint id");
        return send(req, reply, refuse(503, "unavailable"));
      }

      // The hint names a job; the provider says what became of it.
      let confirmed: ProviderJob;
      try {
        confirmed = await deps.provider.status(status.endpointId, hint.id);
      } catch (err) {
        if (isProviderError(err, "JOB_NOT_FOUND") || isProviderError(err, "ENDPOINT_NOT_FOUND")) {
          req.log.warn(
            { ...who, named: hint.id },
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
          submission: { uid: target.uid, attempt: target.attempt, id: target.submission },
          adopt: true,
          conflictAttempts: deps.conflictAttempts ?? 8,
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
      if (res.outcome === "terminal") return duplicate(req, reply, who);
      const applied = res.outcome === "applied" || res.outcome === "adopted";
      req.log.info(
        {
          ...who,
          providerJobId: confirmed.id,
          hinted: hint.status,
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
    },
  );

  function duplicate(
    req: FastifyRequest,
    reply: Parameters<typeof send>[1],
    who: Record<string, unknown>,
  ): ReturnType<typeof send> {
    deps.metrics.duplicates.inc({ route: CALLBACK_PATH });
    req.log.info(who, "gpu callback for a finished job changed nothing");
    return send(req, reply, {
      statusCode: 200,
      body: { received: true, applied: false },
      outcome: "duplicate",
    });
  }
}
