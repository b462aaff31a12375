// What the sidecar logs, and what it never does. Callback URLs carry a token in the query, payment
// deliveries carry a signature header and a body; none of them reaches a log line. The server's
// logger is a child of the process logger whose serializers keep only safe fields: Fastify's own
// lines (client errors at trace level carry the raw packet, URL included) go through them too.
import type { Logger } from "pino";

/** Query parameters whose values are credentials. */
const SECRET_PARAMS = new Set(["token"]);

/** The request URL with credential query values replaced: `...&token=REDACTED`. */
export function redactUrl(url: string): string {
  const q = url.indexOf("?");
  if (q < 0) return url.length > 2048 ? `${url.slice(0, 2048)}...` : url;
  const path = url.slice(0, q);
  const parts = url
    .slice(q + 1)
    .split("&")
    .map((pair) => {
      const eq = pair.indexOf("=");
      const rawKey = eq < 0 ? pair : pair.slice(0, eq);
      let key = rawKey;
      try {
        key = decodeURIComponent(rawKey.replace(/\+/g, " "));
      } catch {
        /* undecodable: compared as written */
      }
      return SECRET_PARAMS.has(key.trim().toLowerCase()) ? `${rawKey}=REDACTED` : pair;
    });
  const out = `${path}?${parts.join("&")}`;
  return out.length > 2048 ? `${out.slice(0, 2048)}...` : out;
}

/** An error reduced to what helps an operator; never the raw packet, body, headers or payload. */
function safeError(err: unknown): Record<string, unknown> {
  if (!err || typeof err !== "object") return { message: String(err).slice(0, 500) };
  const e = err as { name?: unknown; code?: unknown; message?: unknown; statusCode?: unknown };
  return {
    type: typeof e.name === "string" ? e.name : "Error",
    ...(typeof e.code === "string" || typeof e.code === "number" ? { code: e.code } : {}),
    ...(typeof e.statusCode === "number" ? { statusCode: e.statusCode } : {}),
    message: typeof e.message === "string" ? e.message.slice(0, 500) : "",
  };
}

function safeRequest(req: unknown): Record<string, unknown> {
  const r = (req ?? {}) as { method?: unknown; url?: unknown; id?: unknown };
  return {
    method: typeof r.method === "string" ? r.method : undefined,
    url: typeof r.url === "string" ? redactUrl(r.url) : undefined,
    id: r.id,
  };
}

function safeResponse(res: unknown): Record<string, unknown> {
  const r = (res ?? {}) as { statusCode?: unknown };
  return { statusCode: r.statusCode };
}

/** The sidecar's logger: the process logger's redaction plus the safe serializers above. */
export function webhookLogger(log: Logger): Logger {
  return log.child(
    { component: "webhooks" },
    {
      serializers: { err: safeError, error: safeError, req: safeRequest, res: safeResponse },
      redact: {
        paths: [
          "token",
          "*.token",
          "secret",
          "*.secret",
          "headers",
          "*.headers",
          "rawPacket",
          "*.rawPacket",
          "body",
          "*.body",
        ],
        censor: "[REDACTED]",
      },
    },
  );
}
