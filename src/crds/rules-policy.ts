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
 * The policies and their bindings for one resource, or none when it has no rules: its spec rules,
 * its fail-open limits apart (`media-orchestrator-<singular>-limits`, failurePolicy Ignore: an
 * object a limit cannot judge within CEL's cost limit is admitted, and etcd's own limit still
 * holds), and its status rules (`media-orchestrator-<singular>-status-rules`: the reset of a job).
 *
 * Each policy matches only the writes its rules can refuse. The API server plans every validation
 * of a matching policy anew at each request (it tracks CEL's cost per evaluation), whatever the
 * expression then short-circuits to: a spec rule matched on status writes made every status write
 * plan tens of KB of CEL, the larger part of the API server's CPU for a job. So spec rules match the
 * resource (a status write cannot change the spec) and, through a match condition, only a create
 * or a write that changes the spec (a finalizer or a label leaves nothing to judge again); status
 * rules match the status subresource, the only place a status changes.
 */
export function rulesPolicy(def: ResourceDefinition): Record<string, unknown>[] {
  const rules = def.admissionRules ?? [];
  const onStatus = (r: AdmissionRule) => r.field.startsWith("status");
  const spec = rules.filter((r) => !onStatus(r));
  return [
    ...policyOf(
      rulesPolicyName(def),
      "Fail",
      SPEC_WRITES(def),
      spec.filter((r) => !r.failOpen),
    ),
    ...policyOf(
      `media-orchestrator-${def.singular}-limits`,
      "Ignore",
      SPEC_WRITES(def),
      spec.filter((r) => r.failOpen),
    ),
    ...policyOf(
      `media-orchestrator-${def.singular}-status-rules`,
      "Fail",
      STATUS_WRITES(def),
      rules.filter(onStatus),
    ),
  ];
}

interface Match {
  matchConstraints: Record<string, unknown>;
  matchConditions?: Array<{ name: string; expression: string }>;
}

const writesTo = (resource: string) => ({
  resourceRules: [
    { apiGroups: [GROUP], apiVersions: ["*"], operations: ["CREATE", "UPDATE"], resources: [resource] },
  ],
});

/** A create, or an update that changes the spec: the writes a spec rule can refuse. */
const SPEC_WRITES = (def: ResourceDefinition): Match => ({
  matchConstraints: writesTo(def.plural),
  matchConditions: [
    { name: "spec-written", expression: "request.operation == 'CREATE' || object.spec != oldObject.spec" },
  ],
});

const STATUS_WRITES = (def: ResourceDefinition): Match => ({
  matchConstraints: writesTo(`${def.plural}/status`),
});

function policyOf(
  name: string,
  failurePolicy: "Fail" | "Ignore",
  match: Match,
  rules: AdmissionRule[],
): Record<string, unknown>[] {
  if (!rules.length) return [];
  return [
    {
      apiVersion: ADMISSION,
      kind: "ValidatingAdmissionPolicy",
      metadata: { name },
      spec: { failurePolicy, ...match, validations: rules.map(validation) },
    },
    {
      apiVersion: ADMISSION,
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name },
      spec: { policyName: name, validationActions: ["Deny"] },
    },
  ];
}
