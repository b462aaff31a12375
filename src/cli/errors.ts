// Exit codes scripts can trust, and the two kinds of failure the CLI reports.
//   0: fine. 1: a problem was found (or the command could not do its job). 2: usage error.
import { ProviderError, type ProviderErrorCode } from "../provider/errors.js";

export const EXIT_OK = 0;
export const EXIT_PROBLEM = 1;
export const EXIT_USAGE = 2;

/** A problem found or an operation refused: exit 1. `hint` says what to do next. */
export class CliError extends Error {
  override readonly name = "CliError";
  constructor(
    message: string,
    readonly hint?: string,
  ) {
    super(message);
  }
}

/** The command line itself is wrong: exit 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
  constructor(
    message: string,
    readonly command?: string,
  ) {
    super(message);
  }
}

/** What each provider error code means, in words that hold whatever the provider's body said. */
const PROVIDER_PROBLEMS: Record<ProviderErrorCode, string> = {
  INVALID_API_KEY: "the provider rejected the API key",
  ACCOUNT_PROBLEM: "the provider account cannot run work (billing, quota or suspension)",
  ENDPOINT_NOT_FOUND: "the provider does not know the endpoint",
  JOB_NOT_FOUND: "the provider does not know the job",
  RATE_LIMITED: "the provider is limiting the rate of requests",
  PROVIDER_UNAVAILABLE: "the provider is unavailable",
  BAD_REQUEST: "the provider refused the request",
  BAD_RESPONSE: "the provider's answer could not be read",
};

/**
 * A provider failure as the CLI prints it: what the code means, the HTTP status, and for a request
 * that got no answer the network error's code. Never the provider's own words: an error body can
 * echo the request, and with it the API key URL-encoded or cut short, which no masking of the key's
 * exact text catches. (The client's message keeps the body's gist for the controller's logs.)
 */
export function providerProblem(err: unknown): string {
  if (!(err instanceof ProviderError)) {
    const code = (err as { code?: unknown } | null)?.code;
    return typeof code === "string" && /^E[A-Z0-9_]+$/.test(code)
      ? `the provider could not be reached (${code})`
      : "the provider could not be asked (unexpected error)";
  }
  const text = PROVIDER_PROBLEMS[err.code];
  if (err.status !== undefined) return `${text} (HTTP ${err.status}, ${err.code})`;
  // No answer at all: the client's message names the network error or the timeout, nothing else.
  const network = /network error: (E[A-Z0-9_]+)$/.exec(err.message)?.[1];
  if (network) return `the provider could not be reached (${network})`;
  const timeout = /no answer within \d+ ms$/.exec(err.message)?.[0];
  if (timeout) return `the provider gave ${timeout}`;
  return `${text} (${err.code})`;
}

/** The reason the key check fell back from GraphQL, reduced to its HTTP status. */
export function graphqlProblemSummary(problem: string): string {
  const status = /HTTP (\d{3})/.exec(problem)?.[1];
  return status ? `HTTP ${status}` : "no usable answer";
}
