// The sidecar's answers: short generic bodies (the reason goes to the log, never to the caller, so
// a forger learns nothing), and the outcome word each request ends with (for metrics and logs).
import type { FastifyReply, FastifyRequest } from "fastify";

const GENERIC: Record<number, string> = {
  400: "bad request",
  401: "unauthorized",
  404: "not found",
  405: "method not allowed",
  408: "request timeout",
  409: "in progress, retry later",
  413: "payload too large",
  415: "unsupported media type",
  429: "too many requests",
  431: "request header fields too large",
  503: "unavailable, retry later",
};

export function genericBody(code: number): { error: string } {
  return { error: GENERIC[code] ?? (code >= 500 ? GENERIC[503]! : "bad request") };
}

/** An answer decided by a route: status, body, outcome word, extra headers. */
export interface Answer {
  statusCode: number;
  body: Record<string, unknown>;
  outcome: string;
  headers?: Record<string, string>;
}

export const refuse = (statusCode: number, outcome: string, headers?: Record<string, string>): Answer => ({
  statusCode,
  body: genericBody(statusCode),
  outcome,
  ...(headers ? { headers } : {}),
});

const outcomes = new WeakMap<FastifyRequest, string>();

export function setOutcome(req: FastifyRequest, outcome: string): void {
  outcomes.set(req, outcome);
}

/** The outcome a route recorded, else one derived from the status code. */
export function outcomeOf(req: FastifyRequest, statusCode: number): string {
  return outcomes.get(req) ?? defaultOutcome(statusCode);
}

function defaultOutcome(code: number): string {
  switch (code) {
    case 400:
      return "bad_request";
    case 401:
      return "unauthorized";
    case 404:
      return "not_found";
    case 413:
      return "too_large";
    case 415:
      return "unsupported_media_type";
    case 429:
      return "rate_limited";
    case 503:
      return "unavailable";
    default:
      return code < 400 ? "ok" : code < 500 ? "client_error" : "server_error";
  }
}

export function send(req: FastifyRequest, reply: FastifyReply, answer: Answer): FastifyReply {
  setOutcome(req, answer.outcome);
  if (answer.headers) void reply.headers(answer.headers);
  return reply.code(answer.statusCode).send(answer.body);
}
