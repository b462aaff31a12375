import { describe, expect, it } from "vitest";
import {
  ProviderError,
  bodyMessage,
  errorFromGraphQL,
  errorFromResponse,
  errorFromRestResponse,
  parseRetryAfter,
  redact,
} from "../../src/provider/errors.js";

const SECRET = "sk-test-secret-value";
const ctx = (extra: { jobId?: string; retryAfter?: string } = {}) => ({
  op: "status",
  secret: SECRET,
  ...extra,
});

describe("errorFromResponse", () => {
  it.each([
    [401, "{}", "INVALID_API_KEY", false],
    [402, "{}", "ACCOUNT_PROBLEM", false],
    [403, '{"error":"Account suspended: insufficient balance"}', "ACCOUNT_PROBLEM", false],
    [403, "<html>Attention Required! | Cloudflare</html>", "PROVIDER_UNAVAILABLE", false],
    [400, '{"error":"input is required"}', "BAD_REQUEST", false],
    [409, "{}", "BAD_REQUEST", false],
    [413, "{}", "BAD_REQUEST", false],
    [408, "", "PROVIDER_UNAVAILABLE", true],
    [500, "oops", "PROVIDER_UNAVAILABLE", true],
    [503, "", "PROVIDER_UNAVAILABLE", true],
    [429, "", "RATE_LIMITED", true],
  ] as const)("HTTP %i %s -> %s (retryable %s)", (status, body, code, retryable) => {
    const err = errorFromResponse(status, body, ctx());
    expect(err).toBeInstanceOf(ProviderError);
    expect(err.code).toBe(code);
    expect(err.retryable).toBe(retryable);
    expect(err.status).toBe(status);
  });

  it("tells an unknown endpoint from an unknown job on 404 by the body", () => {
    expect(errorFromResponse(404, '{"error":"endpoint not found"}', ctx({ jobId: "j" })).code).toBe(
      "ENDPOINT_NOT_FOUND",
    );
    expect(errorFromResponse(404, '{"error":"job not found"}', ctx({ jobId: "j" })).code).toBe(
      "JOB_NOT_FOUND",
    );
  });

  it("falls back on the route for a 404 with an unhelpful body", () => {
    expect(errorFromResponse(404, "", ctx({ jobId: "j" })).code).toBe("JOB_NOT_FOUND");
    expect(errorFromResponse(404, "", ctx()).code).toBe("ENDPOINT_NOT_FOUND");
  });

  it("carries Retry-After on 429", () => {
    expect(errorFromResponse(429, "", ctx({ retryAfter: "3" })).retryAfterMs).toBe(3000);
    expect(errorFromResponse(429, "", ctx()).retryAfterMs).toBeUndefined();
  });

  it("never puts the key in the message, even when the provider echoes it", () => {
    const err = errorFromResponse(401, JSON.stringify({ error: `bad key ${SECRET}` }), ctx());
    expect(err.message).not.toContain(SECRET);
    expect(err.message).toContain("[REDACTED]");
  });
});

describe("errorFromGraphQL", () => {
  it.each([
    ["Account suspended: insufficient balance", "ACCOUNT_PROBLEM"],
    ["You have exceeded your quota of workers", "ACCOUNT_PROBLEM"],
    ["Endpoint not found", "ENDPOINT_NOT_FOUND"],
    ["Something went wrong. Please try again later or contact support.", "PROVIDER_UNAVAILABLE"],
    ["workersMin cannot be greater than workersMax", "BAD_REQUEST"],
    ["Unauthorized", "INVALID_API_KEY"],
  ] as const)("%s -> %s", (message, code) => {
    expect(errorFromGraphQL([message], { op: "saveEndpoint", secret: SECRET }).code).toBe(code);
  });
});

describe("parseRetryAfter", () => {
  it("reads delta-seconds, fractions and HTTP dates", () => {
    expect(parseRetryAfter("2")).toBe(2000);
    expect(parseRetryAfter("0.5")).toBe(500);
    expect(parseRetryAfter(["7", "9"])).toBe(7000);
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(parseRetryAfter("Thu, 01 Jan 2026 00:00:05 GMT", now)).toBe(5000);
    expect(parseRetryAfter("Wed, 31 Dec 2025 23:00:00 GMT", now)).toBe(0);
  });

  it("ignores what it cannot read", () => {
    expect(parseRetryAfter(undefined)).toBeUndefined();
    expect(parseRetryAfter("")).toBeUndefined();
    expect(parseRetryAfter("soon")).toBeUndefined();
    expect(parseRetryAfter("-1")).toBeUndefined();
  });
});

describe("helpers", () => {
  it("redacts every occurrence", () => {
    expect(redact(`a ${SECRET} b ${SECRET}`, SECRET)).toBe("a [REDACTED] b [REDACTED]");
    expect(redact("abc", "")).toBe("abc");
  });

  // The message reaches the controller's log and the GpuEndpoint's CredentialsValid condition and
  // Events, which `view` can read: a provider (or a proxy) that echoes the request in its error
  // must not put the key there URL-encoded, cut by the message's length limit, or cut by itself.
  it.each([
    ["URL-encoded", (k: string) => `bad request to /v2/x/health?api_key=${encodeURIComponent(k)}`],
    ["cut at the message's limit", (k: string) => `${"x".repeat(181)} key ${k}`],
    ["cut short by the provider", (k: string) => `bad key ${k.slice(0, 16)}...`],
  ])("never carries the key %s", (_what, echo) => {
    const key = "rp_GPU+key/with=padding_0123456789abcdef";
    const leaks = [key, encodeURIComponent(key), key.slice(0, 12), encodeURIComponent(key).slice(0, 12)];
    const rest = errorFromResponse(400, JSON.stringify({ error: echo(key) }), { op: "health", secret: key });
    const gql = errorFromGraphQL([echo(key)], { op: "health", secret: key });
    for (const err of [rest, gql]) for (const leak of leaks) expect(err.message).not.toContain(leak);
  });

  it("finds the message of the usual error bodies", () => {
    expect(bodyMessage('{"error":"x"}')).toBe("x");
    expect(bodyMessage('{"detail":"resource not found","title":"Not Found"}')).toBe("resource not found");
    expect(bodyMessage('{"errors":[{"message":"a"},{"message":"b"}]}')).toBe("a; b");
    expect(bodyMessage("plain")).toBe("plain");
  });
});

describe("errorFromRestResponse (REST v2, RFC 9457 bodies)", () => {
  const problem = (status: number, detail: string, errors?: string[]) =>
    JSON.stringify({ title: "x", status, detail, ...(errors && { errors }) });
  const rest = (notFound: "ENDPOINT_NOT_FOUND" | "BAD_REQUEST" = "ENDPOINT_NOT_FOUND") => ({
    op: "updateEndpointWorkers",
    secret: SECRET,
    notFound,
  });

  it("a 403 problem is the key's permission (INVALID_API_KEY); a bare 403 is still a WAF", () => {
    const e = errorFromRestResponse(403, problem(403, "access denied"), rest());
    expect(e.code).toBe("INVALID_API_KEY");
    expect(e.message).toContain("lacks a permission");
    expect(errorFromRestResponse(403, "<html>blocked</html>", rest()).code).toBe("PROVIDER_UNAVAILABLE");
    expect(errorFromRestResponse(403, problem(403, "account suspended: balance"), rest()).code).toBe(
      "ACCOUNT_PROBLEM",
    );
  });

  it("a 404 means what the route addressed", () => {
    expect(errorFromRestResponse(404, problem(404, "resource not found"), rest()).code).toBe(
      "ENDPOINT_NOT_FOUND",
    );
    expect(errorFromRestResponse(404, problem(404, "resource not found"), rest("BAD_REQUEST")).code).toBe(
      "BAD_REQUEST",
    );
  });

  it("a 400 names the fields from `errors`, and 422 is BAD_REQUEST", () => {
    const e = errorFromRestResponse(
      400,
      problem(400, "request validation failed", ["$.workers.min: too small"]),
      rest(),
    );
    expect(e.code).toBe("BAD_REQUEST");
    expect(e.message).toBe(
      "GPU provider updateEndpointWorkers: HTTP 400: request validation failed: $.workers.min: too small",
    );
    expect(errorFromRestResponse(422, problem(422, "Request validation failed."), rest()).code).toBe(
      "BAD_REQUEST",
    );
    expect(
      errorFromRestResponse(429, problem(429, "rate limit exceeded for the minute window"), rest()).code,
    ).toBe("RATE_LIMITED");
  });
});
