// Each resource's rules that its schema cannot say (a spec frozen once the job was submitted, a
// cancel that cannot be undone, maxWorkers >= minWorkers) as a ValidatingAdmissionPolicy that ships
// with the CRDs, not as CEL in the CRD schema. Why: when a CRD has any x-kubernetes-validations,
// the apiserver adds to every refusal with a schema error (a required field missing, a wrong type,
// a value not in the enum) the line `<nil>: Invalid value: "null": some validation rules were not
// checked because the object was invalid` (apiextensions-apiserver,
// pkg/registry/customresource/strategy.go, hasBlockingErr). Admission policies run only once the
// object passed its schema, so a bad spec gets its own message alone, and a rule's refusal names
// the policy that refused it. Policies are GA since Kubernetes 1.30, the chart's floor
// (https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/).
import { GROUP, type AdmissionRule, type ResourceDefinition } from "./common.js";

const ADMISSION = "admissionregistration.k8s.io/v1";

/** The policy's and its binding's name: media-orchestrator-<singular>-rules. */
function rulesPolicyName(def: ResourceDefinition): string {
  return `media-orchestrator-${def.singular}-rules`;
}

/** A rule as a policy validation: a transition rule admits every CREATE. */
function validation(rule: AdmissionRule): Record<string, unknown> {
  return {
    expression: rule.onUpdate ? `request.operation != 'UPDATE' || (${rule.expression})` : rule.expression,
    message: rule.message,
    // Evaluated only when the rule refused, so never on a CREATE a transition rule admits.
    ...(rule.messageExpression && { messageExpression: rule.messageExpression }),
    reason: "Invalid",
  };
}

/**
 * The policies and their bindings for one resource, or none when it has no rules: its rules, and
 * its fail-open limits apart (`media-orchestrator-<singular>-limits`, failurePolicy Ignore: an
 * object a limit cannot judge within CEL's cost limit is admitted, and etcd's own limit still
 * holds). They match the resource and its status subresource: a status write (the reset of a
 * job) is checked too.
 */
export function rulesPolicy(def: ResourceDefinition): Record<string, unknown>[] {
  const rules = def.admissionRules ?? [];
  const strict = rules.filter((r) => !r.failOpen);
  const limits = rules.filter((r) => r.failOpen);
  return [
    ...policyOf(def, rulesPolicyName(def), "Fail", strict),
    ...policyOf(def, `media-orchestrator-${def.singular}-limits`, "Ignore", limits),
  ];
}

function policyOf(
  def: ResourceDefinition,
  name: string,
  failurePolicy: "Fail" | "Ignore",
  rules: AdmissionRule[],
): Record<string, unknown>[] {
  if (!rules.length) return [];
  return [
    {
      apiVersion: ADMISSION,
      kind: "ValidatingAdmissionPolicy",
      metadata: { name },
      spec: {
        failurePolicy,
        matchConstraints: {
          resourceRules: [
            {
              apiGroups: [GROUP],
              apiVersions: ["*"],
              operations: ["CREATE", "UPDATE"],
              resources: [def.plural, `${def.plural}/status`],
            },
          ],
        },
        validations: rules.map(validation),
      },
    },
    {
      apiVersion: ADMISSION,
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name },
      spec: { policyName: name, validationActions: ["Deny"] },
    },
  ];
}
