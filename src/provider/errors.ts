// Typed errors for the GPU provider client, and the pure mapping from an HTTP answer to one.
// Callers switch on `code`; the retry loop looks only at `retryable`.

export type ProviderErrorCode =
  | "INVALID_API_KEY"
  | "ACCOUNT_PROBLEM"
  | "ENDPOINT_NOT_FOUND"
  | "JOB_NOT_FOUND"
  | "RATE_LIMITED"
  | "PROVIDER_UNAVAILABLE"
  | "BAD_REQUEST"
  | "BAD_RESPONSE";

export interface ProviderErrorDetails {
  status?: number;
  retryAfterMs?: number;
  /** Defaults to true for RATE_LIMITED and PROVIDER_UNAVAILABLE, false otherwise. */
  retryable?: boolean;
  /**
   * The request may have reached the provider and been acted on: a 5xx, a timeout, a connection
   * reset after sending, a 2xx whose body could not be read. For a submission this means "maybe
   * running": it must never be sent again blindly. Default false (a 4xx, or nothing was sent).
   */
  mayHaveBeenAccepted?: boolean;
}

export class ProviderError extends Error {
  override readonly name = "ProviderError";
  readonly code: ProviderErrorCode;
  readonly retryable: boolean;
  readonly status?: number;
  readonly retryAfterMs?: number;
  readonly mayHaveBeenAccepted: boolean;

  constructor(code: ProviderErrorCode, message: string, details: ProviderErrorDetails = {}) {
    super(message);
    this.code = code;
    this.mayHaveBeenAccepted = details.mayHaveBeenAccepted ?? false;
    this.retryable = details.retryable ?? (code === "RATE_LIMITED" || code === "PROVIDER_UNAVAILABLE");
    if (details.status !== undefined) this.status = details.status;
    if (details.retryAfterMs !== undefined) this.retryAfterMs = details.retryAfterMs;
  }
}

export function isProviderError(err: unknown, code?: ProviderErrorCode): err is ProviderError {
  return err instanceof ProviderError && (code === undefined || err.code === code);
}

/** What a cut-off copy of the key must have of it to be removed: shorter, it says nothing. */
const KEY_PREFIX_CHARS = 8;

/**
 * Removes the secret from text a provider sent back, so a provider (or a proxy in front of it)
 * that echoes the request cannot leak the key into logs, conditions or Events: every occurrence,
 * as it is and URL-encoded (an echoed query string), and every cut-off copy (any run of at least
 * 8 characters the key, or its encoding, starts with: an echo cut short, or cut by a length limit).
 */
export function redact(text: string, secret: string): string {
  if (secret.length === 0) return text;
  let out = text;
  for (const form of new Set([secret, encodeURIComponent(secret)])) {
    out = out.split(form).join("[REDACTED]");
    const head = form.slice(0, KEY_PREFIX_CHARS);
    for (let i = out.indexOf(head); i !== -1; i = out.indexOf(head, i + "[REDACTED]".length)) {
      let n = head.length;
      while (n < form.length && out[i + n] === form[n]) n++;
      out = `${out.slice(0, i)}[REDACTED]${out.slice(i + n)}`;
    }
  }
  return out;
}

/** Retry-After is either delta-seconds (possibly fractional from lenient servers) or an HTTP date. */
export function parseRetryAfter(
  value: string | string[] | undefined,
  nowMs = Date.now(),
): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined || raw.trim() === "") return undefined;
  const trimmed = raw.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  // An HTTP date names its day and month; Date.parse alone would read "-1" as a year.
  const date = /[a-z]{3}/i.test(trimmed) ? Date.parse(trimmed) : Number.NaN;
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - nowMs);
}

// Words the provider uses when the key is fine but the account cannot run work.
const ACCOUNT_WORDS =
  /billing|balance|quota|suspend|insufficient|credit|payment required|account (is )?(locked|disabled|banned)/i;
// GraphQL messages that mean "our side broke, try again" (runpodctl#45, runpod-python#150).
const TRANSIENT_WORDS = /something went wrong|try again|internal|temporar|timeout|unavailable/i;

function mentionsAccountProblem(text: string): boolean {
  return ACCOUNT_WORDS.test(text);
}

/** The human-readable part of an error body: {error}, {message}, {detail}, or the text itself. */
export function bodyMessage(body: string): string {
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed !== null && typeof parsed === "object") {
      const o = parsed as Record<string, unknown>;
      // RFC 9457 (REST v2): the detail, then the validation failures that name the field.
      if (typeof o.detail === "string" && Array.isArray(o.errors) && o.errors.length > 0) {
        return `${o.detail}: ${o.errors.map(String).join("; ")}`;
      }
      for (const key of ["error", "message", "detail", "title"]) {
        if (typeof o[key] === "string") return o[key];
      }
      // GraphQL envelope on a non-200 answer.
      if (Array.isArray(o.errors)) {
        return o.errors
          .map((e: unknown) => String((e as { message?: unknown } | null)?.message ?? ""))
          .join("; ");
      }
    }
  } catch {
    // not JSON: use the raw text
  }
  return body;
}

export interface ResponseContext {
  /** Operation name for messages, e.g. "status". */
  op: string;
  /** Set when the route addresses a job: a bare 404 then means the job, not the endpoint. */
  jobId?: string;
  retryAfter?: string | string[];
  secret: string;
}

/** Maps a non-2xx answer of the job API (or of /graphql at the HTTP level) to a ProviderError. */
export function errorFromResponse(status: number, body: string, ctx: ResponseContext): ProviderError {
  // Redacted before it is cut to length: a cut through the key would leave a part the redaction misses.
  const detail = redact(bodyMessage(body).slice(0, 4096), ctx.secret)
    .slice(0, 200)
    .replace(/\s+/g, " ")
    .trim();
  const message = `GPU provider ${ctx.op}: HTTP ${status}${detail ? `: ${detail}` : ""}`;
  if (status === 401) return new ProviderError("INVALID_API_KEY", message, { status });
  if (status === 402 || (status === 403 && mentionsAccountProblem(detail))) {
    return new ProviderError("ACCOUNT_PROBLEM", message, { status });
  }
  // A bare 403 may come from a WAF in front of the provider (runpod-mcp credential-check): it says
  // nothing about the key, and hammering it does not help.
  if (status === 403) return new ProviderError("PROVIDER_UNAVAILABLE", message, { status, retryable: false });
  if (status === 404) {
    // The simulator answers {"error":"endpoint not found"} or {"error":"job not found"}; RunPod's
    // body is undocumented, so fall back on what the route addressed.
    const code = /endpoint/i.test(detail)
      ? "ENDPOINT_NOT_FOUND"
      : /job|request/i.test(detail) || ctx.jobId !== undefined
        ? "JOB_NOT_FOUND"
        : "ENDPOINT_NOT_FOUND";
    return new ProviderError(code, message, { status });
  }
  if (status === 429) {
    const retryAfterMs = parseRetryAfter(ctx.retryAfter);
    return new ProviderError(
      "RATE_LIMITED",
      message,
      retryAfterMs === undefined ? { status } : { status, retryAfterMs },
    );
  }
  // 408: the server gave up waiting for the request, so it did not act on it. A 5xx may come after
  // the work was done (a proxy's 502/504 in front of a provider that accepted the job).
  if (status === 408) return new ProviderError("PROVIDER_UNAVAILABLE", message, { status });
  if (status >= 500)
    return new ProviderError("PROVIDER_UNAVAILABLE", message, { status, mayHaveBeenAccepted: true });
  return new ProviderError("BAD_REQUEST", message, { status });
}

/** Maps GraphQL `errors[]` carried by an HTTP 200 answer. */
export function errorFromGraphQL(messages: string[], ctx: { op: string; secret: string }): ProviderError {
  const text = redact(messages.join("; ").slice(0, 4096), ctx.secret).slice(0, 300);
  const message = `GPU provider ${ctx.op}: ${text}`;
  if (mentionsAccountProblem(text)) return new ProviderError("ACCOUNT_PROBLEM", message);
  if (/unauthori[sz]ed|invalid api key|api key is invalid/i.test(text)) {
    return new ProviderError("INVALID_API_KEY", message);
  }
  if (/endpoint.*not found|not found.*endpoint/i.test(text))
    return new ProviderError("ENDPOINT_NOT_FOUND", message);
  if (TRANSIENT_WORDS.test(text)) return new ProviderError("PROVIDER_UNAVAILABLE", message);
  return new ProviderError("BAD_REQUEST", message);
}

/**
 * Maps a non-2xx answer of the REST v2 management API. Its bodies are RFC 9457 problems, so a 403
 * with one comes from RunPod itself ("access denied": the key lacks the permission), not from a
 * WAF; a 404 means what the route addressed (`notFound`).
 */
export function errorFromRestResponse(
  status: number,
  body: string,
  ctx: ResponseContext & { notFound: ProviderErrorCode },
): ProviderError {
  const err = errorFromResponse(status, body, ctx);
  if (status === 404) return new ProviderError(ctx.notFound, err.message, { status });
  if (status === 403 && err.code !== "ACCOUNT_PROBLEM" && isProblem(body)) {
    return new ProviderError(
      "INVALID_API_KEY",
      `${err.message} (the key lacks a permission this call needs)`,
      {
        status,
      },
    );
  }
  return err;
}

function isProblem(body: string): boolean {
  try {
    const o: unknown = JSON.parse(body);
    return (
      o !== null &&
      typeof o === "object" &&
      typeof (o as Record<string, unknown>).title === "string" &&
      typeof (o as Record<string, unknown>).status === "number"
    );
  } catch {
    return false;
  }
}
