// The facts of one GpuEndpoint pass (src/gpuendpoint/facts.ts), read through the provider view:
// the key check, the endpoint listing, and the health of the endpoint the listing resolves to.
// Reads only; each answer is kept as a value (a failure too) for the plan to read. The view's
// caches decide what reaches the provider: at rest, one health check per endpoint per tick.
import type { GpuEndpoint } from "../../crds/gpuendpoint.js";
import type { Env } from "../../config/env.js";
import { conventionalEndpointName, endpointFromEnv } from "../../config/env.js";
import type { EndpointFacts, ProviderFailure } from "../../gpuendpoint/facts.js";
import { resolveEndpoint } from "../../gpuendpoint/resolution.js";
import { describeError } from "../../k8s/errors.js";
import { isProviderError } from "../../provider/index.js";
import type { GpuEndpointDeps } from "./deps.js";

export async function gatherFacts(
  d: Pick<GpuEndpointDeps, "view" | "env" | "tickMs">,
  ep: GpuEndpoint,
  now: Date,
): Promise<EndpointFacts> {
  const env = d.env as Env;
  const fromEnv = endpointFromEnv(env, ep.spec.workload);
  const facts: EndpointFacts = {
    endpoint: ep,
    now,
    mediaEnv: d.env.MEDIA_ENV,
    naming: {
      ...(fromEnv && { fromEnv }),
      conventionalName: conventionalEndpointName(env, ep.spec.workload),
    },
    tickMs: d.tickMs,
    key: { valid: true },
  };
  // A self-hosted endpoint (spec.baseUrl) has nothing at the provider to read.
  if (ep.spec.baseUrl !== undefined) return facts;
  // 1. The key (checked once for every endpoint; the health check below uses it every tick).
  try {
    const { accountId } = await d.view.checkKey();
    facts.key = { valid: true, ...(accountId !== undefined && { accountId }) };
  } catch (err) {
    facts.key = { failed: failureOf(err) };
    return facts;
  }
  // 2. The endpoints. A new or edited spec is compared with the provider's settings as they are
  // now, not as the last drift check saw them.
  if (ep.metadata.generation !== ep.status?.observedGeneration) d.view.invalidateEndpoints();
  try {
    facts.listing = { endpoints: await d.view.listEndpoints() };
  } catch (err) {
    facts.listing = { failed: failureOf(err) };
    return facts;
  }
  // 3. The health of the endpoint this is, when the listing has it.
  const resolved = resolveEndpoint(ep, facts.naming, facts.listing.endpoints);
  if ("found" in resolved) {
    try {
      facts.health = { report: await d.view.endpointHealth(resolved.found.id) };
    } catch (err) {
      facts.health = { failed: failureOf(err) };
    }
  }
  return facts;
}

/** A provider call's failure as the diagnosis reads it (the message carries no secret). */
export function failureOf(err: unknown): ProviderFailure {
  const refused = isProviderError(err, "INVALID_API_KEY")
    ? "INVALID_API_KEY"
    : isProviderError(err, "ACCOUNT_PROBLEM")
      ? "ACCOUNT_PROBLEM"
      : undefined;
  return {
    message: describeError(err),
    ...(refused && { refused }),
    ...(isProviderError(err) && err.status === 404 && { notFound: true }),
  };
}
