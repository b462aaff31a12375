// redeliver <delivery-id>: the payment provider's redeliver call (the runbook's "Replay a payment
// webhook", step 1), with PAYMENT_PROVIDER_API_KEY as the bearer credential.
import { send, text as readText } from "../http/client.js";
import type { CliContext } from "./context.js";
import { CliError, EXIT_OK } from "./errors.js";

interface RedeliverAnswer {
  id?: string;
  eventId?: string;
  attempt?: { ok?: boolean; httpStatus?: number; error?: string };
}

export const FIX_WEBHOOK_SECRET =
  "make PAYMENT_PROVIDER_WEBHOOK_SECRET (in the operator's Secret) equal the signing secret of the webhook endpoint in the payment provider's dashboard, then restart the webhooks sidecar";

export async function run(ctx: CliContext): Promise<number> {
  const id = ctx.inv.args[0]!;
  const { env } = await ctx.config();
  if (!env.PAYMENT_PROVIDER_API_KEY) {
    throw new CliError(
      "no payment provider API key: PAYMENT_PROVIDER_API_KEY is not set",
      "export PAYMENT_PROVIDER_API_KEY, or pass --secret <namespace>/<name> naming the operator's Secret",
    );
  }
  const url = `${env.PAYMENT_PROVIDER_API_URL}/v1/webhooks/deliveries/${encodeURIComponent(id)}/redeliver`;
  let status: number;
  let text: string;
  try {
    const res = await send(url, {
      method: "POST",
      headers: { authorization: `Bearer ${env.PAYMENT_PROVIDER_API_KEY}`, accept: "application/json" },
      signal: AbortSignal.timeout(ctx.inv.requestTimeoutMs),
    });
    status = res.statusCode;
    text = await readText(res.body);
  } catch (err) {
    throw new CliError(
      `could not reach the payment provider at ${env.PAYMENT_PROVIDER_API_URL}: ${err instanceof Error ? err.message : String(err)}`,
      "check PAYMENT_PROVIDER_API_URL and the network, or redeliver from the provider's dashboard (webhook endpoint -> failed events -> redeliver)",
    );
  }
  // The status code only: an error body can echo the request, the key with it (URL-encoded or cut
  // short, past any masking of its exact text).
  if (status === 401 || status === 403) {
    throw new CliError(
      `the payment provider rejected PAYMENT_PROVIDER_API_KEY (HTTP ${status})`,
      "check the key in the payment provider's API-key settings and update PAYMENT_PROVIDER_API_KEY",
    );
  }
  if (status === 404) {
    throw new CliError(
      `the payment provider knows no webhook delivery "${id}" (HTTP 404)`,
      "find the delivery id in the provider's dashboard: webhook endpoint -> failed events (filter by status or date)",
    );
  }
  if (status < 200 || status > 299) {
    throw new CliError(
      `the payment provider refused the redelivery (HTTP ${status})`,
      "try again later, or redeliver from the provider's dashboard",
    );
  }
  let answer: RedeliverAnswer = {};
  try {
    answer = JSON.parse(text) as RedeliverAnswer;
  } catch {
    /* an answer without a body we understand: the provider accepted it, that is all we know */
  }
  const what = `webhook delivery ${answer.id ?? id}${answer.eventId ? ` (event ${answer.eventId})` : ""}`;
  const attempt = answer.attempt;
  if (attempt && attempt.ok === false) {
    const got =
      attempt.httpStatus !== undefined ? `HTTP ${attempt.httpStatus}` : (attempt.error ?? "an error");
    throw new CliError(
      `the payment provider redelivered ${what}, but our webhook endpoint answered ${got}`,
      attempt.httpStatus === 400
        ? `a 400 means the signature did not verify: ${FIX_WEBHOOK_SECRET}. 'kubectl media doctor' checks it`
        : "check that the webhooks sidecar is healthy (its logs, its deployment status); 'kubectl media doctor' checks it",
    );
  }
  ctx.out.line(`redelivered ${what}`);
  if (attempt?.ok) ctx.out.line(`  our webhook endpoint accepted it (HTTP ${attempt.httpStatus ?? "2xx"})`);
  else ctx.out.line("  the provider accepted the request; check the endpoint's delivery log for the result");
  return EXIT_OK;
}
