// The runbook's fixes ("Diagnose failing jobs", docs/design.md), by the reason a condition or a
// finding carries. The GpuEndpoint's conditions end their message with the fix of their reason
// (findings.ts composes it), and `kubectl media doctor` prints the fix it finds here for a reason:
// the CLI never reads a fix out of a message.
//
// The reasons of a provider queue's wait (src/mediajob/wait-cause.ts: WorkersUnhealthy,
// WorkersThrottled, WorkersMaxReached; NoWorkersAllowed is shared with the health diagnosis) are
// here too, so doctor's "provider queue" check reads them the same way.

export const FIX_KEY =
  "rotate the key in the provider's API-key settings and update GPU_PROVIDER_API_KEY in the orchestrator's environment";
export const FIX_ENDPOINT =
  "re-deploy the endpoint, then update the id (spec.endpointId or GPU_PROVIDER_ENDPOINT_<WORKLOAD>)";

/** The fix of each reason that has one; a reason absent here has none to give. */
export const FIXES: Readonly<Record<string, string>> = {
  // CredentialsValid (and Ready, which carries the same reason)
  InvalidApiKey: FIX_KEY,
  AccountProblem: "resolve it in the provider's account settings",
  // EndpointFound (and Ready)
  ENDPOINT_NOT_FOUND: FIX_ENDPOINT,
  // WarmWorkers
  ScalesToZero: "set spec.minWorkers to 1; use spec.maxWorkers to cap cost",
  // ScalerKnown, while spec.maxInFlight does not size the window instead
  ScalerUnknown: "set the endpoint's scaler at the provider, or spec.maxInFlight",
  // WorkersHealthy
  NoWorkersAllowed: "raise spec.maxWorkers",
  ThrottledWorkers: "allow more GPU types",
  // Why jobs wait in the provider's queue (src/mediajob/wait-cause.ts)
  WorkersUnhealthy:
    "read the worker logs (a GPU runtime mismatch, a missing model artefact, an import error, out of memory) and fix the worker image",
  WorkersThrottled: "allow more GPU types, or wait",
  WorkersMaxReached: "raise spec.maxWorkers",
};

/** The fix of a reason, if it has one. */
export const fixOf = (reason: string | undefined): string | undefined =>
  reason === undefined ? undefined : FIXES[reason];
