// The admission side of tenancy (docs/design.md, "Tenancy"), as ValidatingAdmissionPolicies
// (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30:
// https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/). The
// apiserver evaluates them in-process: no webhook to run, nothing to call when the operator is
// down. The controller checks the binding again (src/mediajob/tenancy.ts), for clusters without
// the policies.
//  - accountBindingPolicy: a MediaJob bills only an account its Namespace is bound to (the
//    Namespace's annotation, read through `namespaceObject`). It knows no identity, so it ships
//    with the CRDs (the chart's CRD templates, `make install`).
//  - operatorOnlyPolicy: what changes billing, cancellation or trust (the product's annotations
//    and labels on a MediaJob, the removal of its finalizers, a Namespace's binding) is refused
//    unless the request comes from an operator: a group or user named in the chart, the
//    release's own ServiceAccounts always. It knows the release's identities, so each release
//    renders its own, scoped to the namespaces it watches.
import { GROUP } from "./common.js";
import { ACCOUNTS_ANNOTATION } from "../mediajob/tenancy.js";
import { FINALIZER } from "../mediajob/job.js";
import { USAGE_FINALIZER } from "../mediajob/usage-hold.js";

const ADMISSION = "admissionregistration.k8s.io/v1";
/** The product's own annotations and labels: set by the controller, the CLI's operators, the chart. */
const PRODUCT_PREFIX = `${GROUP}/`;
/** The finalizers the controller puts on a MediaJob and takes off itself. */
const CONTROLLER_FINALIZERS = [FINALIZER, USAGE_FINALIZER] as const;

const ACCOUNT_BINDING_POLICY = "media-orchestrator-account-binding";

const q = (s: string): string => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

const MEDIAJOB_WRITES = {
  resourceRules: [
    {
      apiGroups: [GROUP],
      apiVersions: ["*"],
      operations: ["CREATE", "UPDATE"],
      resources: ["mediajobs"],
    },
  ],
};

/**
 * The binding rule. `requireAccount` (CEL text, "true" or "false", or a Helm expression that
 * renders one): every job must bill an account, as when plans or metering are configured.
 */
export function accountBindingPolicy(requireAccount = "false"): Record<string, unknown>[] {
  const ns = "namespaceObject.metadata.name";
  const created = "(request.operation == 'CREATE')";
  return [
    {
      apiVersion: ADMISSION,
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: ACCOUNT_BINDING_POLICY },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: MEDIAJOB_WRITES,
        variables: [
          {
            name: "bound",
            expression:
              `namespaceObject.metadata.?annotations[?${q(ACCOUNTS_ANNOTATION)}].orValue('')` +
              ".split(',').map(a, a.trim()).filter(a, a != '')",
          },
          { name: "named", expression: "object.spec.?account.orValue('')" },
          { name: "requireAccount", expression: requireAccount },
          // An update is checked only when it changes the account (spec.account is frozen once
          // submitted, by the CRD's own rule): a binding taken away does not lock existing jobs.
          {
            name: "changed",
            expression: `${created} || oldObject.spec.?account.orValue('') != variables.named`,
          },
        ],
        validations: [
          {
            expression: "!variables.changed || variables.named == '' || variables.named in variables.bound",
            messageExpression:
              `'namespace ' + ${ns} + ' is not bound to account ' + variables.named + ` +
              `': ask an operator to run \\'kubectl media bind ' + ${ns} + ' ' + variables.named + '\\''`,
            reason: "Forbidden",
          },
          {
            expression: `!variables.requireAccount || !${created} || variables.named != '' || size(variables.bound) <= 1`,
            messageExpression:
              `'namespace ' + ${ns} + ' is bound to several accounts (' + ` +
              `variables.bound.join(', ') + '): name one in spec.account'`,
            reason: "Forbidden",
          },
          {
            expression: `!variables.requireAccount || !${created} || variables.named != '' || size(variables.bound) >= 1`,
            messageExpression:
              `'namespace ' + ${ns} + ' is bound to no account, and this installation bills every job: ' + ` +
              `'ask an operator to run \\'kubectl media bind ' + ${ns} + ' ACCOUNT\\''`,
            reason: "Forbidden",
          },
        ],
      },
    },
    {
      apiVersion: ADMISSION,
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name: ACCOUNT_BINDING_POLICY },
      spec: { policyName: ACCOUNT_BINDING_POLICY, validationActions: ["Deny"] },
    },
  ];
}

export interface OperatorPolicyOptions {
  /** The policy's and its binding's name (one per release). */
  name: string;
  /** CEL list literals (JSON arrays of strings are), or Helm expressions that render them. */
  operatorGroups: string;
  operatorUsers: string;
  /** Only these namespaces (a release that watches one); absent: every namespace. */
  namespaces?: string;
}

/** The operator-only rule of one release. */
export function operatorOnlyPolicy(o: OperatorPolicyOptions): Record<string, unknown>[] {
  const created = "(request.operation == 'CREATE')";
  const ours = (map: string) => `${map}.filter(k, k.startsWith(${q(PRODUCT_PREFIX)}))`;
  // The product's keys of a map (annotations or labels) are the same before and after.
  const unchanged = (field: "annotations" | "labels") => {
    const now = `object.metadata.?${field}.orValue({})`;
    const before = `(${created} ? {} : oldObject.metadata.?${field}.orValue({}))`;
    return (
      `${ours(now)}.all(k, k in ${before} && ${before}[k] == ${now}[k]) && ` +
      `${ours(before)}.all(k, k in ${now})`
    );
  };
  const finalizers = `[${CONTROLLER_FINALIZERS.map(q).join(", ")}]`;
  const isNamespace = "(request.resource.resource == 'namespaces')";
  return [
    {
      apiVersion: ADMISSION,
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: o.name },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          resourceRules: [
            ...MEDIAJOB_WRITES.resourceRules,
            {
              apiGroups: [""],
              apiVersions: ["v1"],
              operations: ["CREATE", "UPDATE"],
              resources: ["namespaces"],
            },
          ],
        },
        variables: [
          { name: "operatorGroups", expression: o.operatorGroups },
          { name: "operatorUsers", expression: o.operatorUsers },
          {
            name: "operator",
            expression:
              "request.userInfo.username in variables.operatorUsers || " +
              "request.userInfo.groups.exists(g, g in variables.operatorGroups)",
          },
        ],
        validations: [
          {
            expression:
              `variables.operator || ${isNamespace} || ` +
              `(${unchanged("annotations")} && ${unchanged("labels")})`,
            message:
              `the ${PRODUCT_PREFIX} annotations and labels of a MediaJob change how it is billed, ` +
              "cancelled or trusted: only an operator may set, change or remove them",
            reason: "Forbidden",
          },
          {
            expression:
              `variables.operator || ${isNamespace} || ${created} || ` +
              `${finalizers}.all(f, !(f in oldObject.metadata.?finalizers.orValue([])) || ` +
              "f in object.metadata.?finalizers.orValue([]))",
            message:
              "the controller's finalizers stay until the job has stopped at the provider and its usage " +
              "is reported (the controller takes them off): only an operator may remove them",
            reason: "Forbidden",
          },
          {
            expression: `variables.operator || !${isNamespace} || (${unchanged("annotations")})`,
            message:
              `the ${PRODUCT_PREFIX} annotations of a Namespace (${ACCOUNTS_ANNOTATION} binds it to the ` +
              "accounts it may bill; the controller writes their usage): only an operator may change them " +
              "(kubectl media bind)",
            reason: "Forbidden",
          },
        ],
      },
    },
    {
      apiVersion: ADMISSION,
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name: o.name },
      spec: {
        policyName: o.name,
        validationActions: ["Deny"],
        ...(o.namespaces !== undefined && {
          matchResources: {
            namespaceSelector: {
              matchExpressions: [
                { key: "kubernetes.io/metadata.name", operator: "In", values: [o.namespaces] },
              ],
            },
          },
        }),
      },
    },
  ];
}
