// POST /reports/gpu_provider?ns=&name=&job=&token=: the GPU provider's job status callback.
//
// The provider does not sign callbacks; the URL the controller submitted carries an HMAC token over
// (namespace, name, job id). The token is checked before the body is even read (401), then the body
// is validated (400), then the provider's terminal status is applied with the lifecycle shared with
// the controller (applyProviderResult), read-modify-write with the resourceVersion, retried on
// conflict. Duplicate, late and out-of-order callbacks change nothing: a finished job never moves.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { CALLBACK_PATH, verifyCallbackToken, type CallbackTarget } from "../callback/token.js";
import {
  applyProviderResult,
  effectiveJobId,
  isTerminal,
  withPhaseConditions,
} from "../controller/mediajob/lifecycle.js";
import type { MediaJob } from "../crds/mediajob.js";
import type { KubeApi } from "../k8s/api.js";
import { isConflict } from "../k8s/errors.js";
import { ProviderJob } from "../provider/schemas.js";
import type { WebhookMetrics } from "./metrics.js";
import type { TokenBuckets } from "./ratelimit.js";
import { refuse, send } from "./replies.js";

export { CALLBACK_PATH };

const CallbackQuery = z.object({
  ns: z.string().min(1).max(253),
  name: z.string().min(1).max(253),
  job: z.string().min(1).max(256),
  token: z.string().min(1).max(256),
});

export interface CallbackRouteDeps {
  api: KubeApi;
  /** CALLBACK_SECRET; without one every callback is refused (an empty HMAC key is guessable). */
  secret: string | undefined;
  now: () => Date;
  metrics: WebhookMetrics;
  globalLimiter: TokenBuckets;
  perJobLimiter: TokenBuckets;
  conflictAttempts?: number;
}

const targets = new WeakMap<FastifyRequest, CallbackTarget>();

export function registerCallbackRoute(app: FastifyInstance, deps: CallbackRouteDeps): void {
  app.post(
    CALLBACK_PATH,
    {
      onRequest: [
        async (req, reply) => {
          const t = deps.globalLimiter.take("callbacks");
          if (!t.ok)
            return send(
              req,
              reply,
              refuse(429, "rate_limited", { "retry-after": String(t.retryAfterSeconds) }),
            );
        },
        async (req, reply) => {
          const q = CallbackQuery.safeParse(req.query);
          const target = q.success
            ? { namespace: q.data.ns, name: q.data.name, jobId: q.data.job }
            : undefined;
          if (!target || !deps.secret || !verifyCallbackToken(deps.secret, target, q.data?.token)) {
            req.log.warn(
              target
                ? { namespace: target.namespace, name: target.name, jobId: target.jobId, remote: req.ip }
                : {
                    remote: req.ip,
                    reason: deps.secret ? "missing or malformed query" : "no callback secret",
                  },
              "gpu callback refused: bad or missing token",
            );
            return send(req, reply, refuse(401, "unauthorized"));
          }
          targets.set(req, target);
        },
        async (req, reply) => {
          const target = targets.get(req)!;
          const t = deps.perJobLimiter.take(`${target.namespace}/${target.name}/${target.jobId}`);
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
      const body = ProviderJob.safeParse(req.body);
      if (!body.success) {
        const fields = [...new Set(body.error.issues.map((i) => i.path.join(".") || "body"))].join(", ");
        req.log.warn({ namespace: target.namespace, name: target.name, fields }, "gpu callback body invalid");
        return send(req, reply, refuse(400, "bad_request"));
      }
      const result = body.data;
      const nowIso = deps.now().toISOString();
      let foreign = false;
      let terminal = false;
      let res: Awaited<ReturnType<KubeApi["updateStatusWithRetry"]>> & { object?: MediaJob };
      try {
        res = await deps.api.updateStatusWithRetry<MediaJob>(
          "mediajobs",
          target.namespace,
          target.name,
          (current) => {
            // Before the controller's first status write the job's id is still its effective one.
            foreign = (current.status?.jobId ?? effectiveJobId(current)) !== target.jobId;
            if (foreign) return undefined;
            terminal = isTerminal(current.status?.phase);
            const next = applyProviderResult(current, result, nowIso);
            return next
              ? { ...current, status: withPhaseConditions(next, current.metadata.generation, nowIso) }
              : undefined;
          },
          deps.conflictAttempts ?? 8,
        );
      } catch (err) {
        if (isConflict(err))
          deps.metrics.conflicts.inc({ resource: "mediajobs" }, deps.conflictAttempts ?? 8);
        throw err; // the error handler answers 503: the provider (or the controller's poll) tries again
      }
      if (res.conflicts) deps.metrics.conflicts.inc({ resource: "mediajobs" }, res.conflicts);
      if (!res.object || foreign) {
        req.log.info(
          { namespace: target.namespace, name: target.name, jobId: target.jobId, exists: !!res.object },
          "gpu callback for an unknown job",
        );
        return send(req, reply, refuse(404, "not_found"));
      }
      const phase = res.object.status?.phase;
      if (!res.written && terminal) deps.metrics.duplicates.inc({ route: CALLBACK_PATH });
      req.log.info(
        {
          namespace: target.namespace,
          name: target.name,
          jobId: target.jobId,
          providerJobId: result.id,
          providerStatus: result.status,
          applied: res.written,
          phase,
          conflicts: res.conflicts,
        },
        res.written ? "gpu callback applied" : "gpu callback changed nothing",
      );
      return send(req, reply, {
        statusCode: 200,
        body: { received: true, applied: res.written },
        outcome: res.written ? "applied" : terminal ? "duplicate" : "unchanged",
      });
    },
  );
}
