export * from "./common.js";
export * from "./mediajob.js";
export * from "./gpuendpoint.js";
export * from "./paymentevent.js";
export * from "./billingaccount.js";

import { billingAccountDefinition } from "./billingaccount.js";
import { gpuEndpointDefinition } from "./gpuendpoint.js";
import { mediaJobDefinition } from "./mediajob.js";
import { customResourceDefinition } from "./openapi.js";
import { paymentEventDefinition } from "./paymentevent.js";
import { rulesPolicy } from "./rules-policy.js";

export const RESOURCE_DEFINITIONS = [
  mediaJobDefinition,
  gpuEndpointDefinition,
  paymentEventDefinition,
  billingAccountDefinition,
] as const;

/** The CRD objects, generated from the zod schemas: the one source of the manifests. */
export function allCustomResourceDefinitions(): Record<string, unknown>[] {
  return RESOURCE_DEFINITIONS.map(customResourceDefinition);
}

/** Each resource's admission rules (src/crds/rules-policy.ts): policies and bindings, with the CRDs. */
export function allRulesPolicies(): Record<string, unknown>[] {
  return RESOURCE_DEFINITIONS.flatMap(rulesPolicy);
}
