// check-key: the runbook's credential check, GraphQL `query { myself { id } }` with the key; once
// RunPod's GraphQL API is gone (retired, moved, down), the key is checked over REST v2 instead.
import { managementUrl } from "../config/env.js";
import { FIX_KEY } from "../gpuendpoint/fixes.js";
import { isProviderError, type ManagementApi } from "../provider/index.js";
import type { CliContext } from "./context.js";
import { EXIT_OK, EXIT_PROBLEM, graphqlProblemSummary, providerProblem } from "./errors.js";

export type KeyVerdict = "valid" | "invalid" | "account-problem" | "unknown" | "missing";

export interface KeyCheck {
  result: KeyVerdict;
  accountId?: string;
  /** Which management API answered the check. */
  api?: ManagementApi;
  /** Why GraphQL was not used, when the check fell back to REST v2. */
  graphqlProblem?: string;
  message: string;
  fix?: string;
}

const API_NAMES: Record<ManagementApi, string> = { graphql: "GraphQL", rest: "REST v2" };

export const FIX_ACCOUNT =
  "resolve the billing, balance, quota or suspension in the provider's account settings; the key itself is fine";
export const FIX_UNREACHABLE =
  "check GPU_PROVIDER_API_URL (and GPU_PROVIDER_MANAGEMENT_URL), the network, and the provider's status page; then run check-key again";

/** The key check as a verdict; never throws for provider answers. */
export async function checkKey(ctx: CliContext): Promise<KeyCheck> {
  const { env } = await ctx.config();
  if (!env.GPU_PROVIDER_API_KEY) {
    return {
      result: "missing",
      message: "GPU_PROVIDER_API_KEY is not set",
      fix: "export GPU_PROVIDER_API_KEY, or pass --secret <namespace>/<name> naming the operator's Secret",
    };
  }
  const gpu = await ctx.gpu();
  try {
    const { accountId, via, graphqlProblem } = await gpu.checkKeyAnyApi();
    const account = accountId !== undefined ? ` (account ${accountId})` : "";
    const problem = graphqlProblem !== undefined ? graphqlProblemSummary(graphqlProblem) : undefined;
    const why = problem !== undefined ? `, as GraphQL is unavailable (${problem})` : "";
    return {
      result: "valid",
      ...(accountId !== undefined && { accountId }),
      api: via,
      ...(problem !== undefined && { graphqlProblem: problem }),
      message: `the GPU provider API key is valid${account}, checked over ${API_NAMES[via]}${why}`,
    };
  } catch (err) {
    if (isProviderError(err, "INVALID_API_KEY")) {
      return { result: "invalid", message: "the GPU provider rejects the API key", fix: FIX_KEY };
    }
    if (isProviderError(err, "ACCOUNT_PROBLEM")) {
      return {
        result: "account-problem",
        message: `the key is valid, but the provider account cannot run work (billing, quota or suspension${err.status !== undefined ? `; HTTP ${err.status}` : ""})`,
        fix: FIX_ACCOUNT,
      };
    }
    return {
      result: "unknown",
      message: `could not check the key: ${providerProblem(err)}`,
      fix: FIX_UNREACHABLE,
    };
  }
}

export async function run(ctx: CliContext): Promise<number> {
  const check = await checkKey(ctx);
  const { env, sources } = await ctx.config();
  if (ctx.out.machine) {
    ctx.out.data({
      ...check,
      apiUrl: managementUrl(env),
      keySource: sources.GPU_PROVIDER_API_KEY ?? null,
    });
  } else {
    const label = {
      valid: "valid",
      invalid: "INVALID",
      "account-problem": "ACCOUNT PROBLEM",
      unknown: "UNKNOWN",
      missing: "MISSING",
    }[check.result];
    ctx.out.line(`GPU provider API key: ${label}`);
    ctx.out.line(`  ${check.message}`);
    if (check.fix) ctx.out.line(`  Fix: ${check.fix}`);
  }
  return check.result === "valid" ? EXIT_OK : EXIT_PROBLEM;
}
