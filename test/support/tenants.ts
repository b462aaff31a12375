// Tenants as the chart makes them: the rules its CRD release aggregates into the built-in `view`
// or `edit` ClusterRole (deploy/helm/templates/aggregated-clusterroles.yaml, rendered by helm),
// given as a Role in the tenant's namespace to a user or ServiceAccount. The shared control plane
// runs no clusterrole-aggregation controller and other test files share its built-in roles, so
// the aggregated rules are bound per namespace instead; what they grant is the same.
import { RbacAuthorizationV1Api, type KubeConfig, type RbacV1Subject } from "@kubernetes/client-node";
import { KubeApi } from "../../src/k8s/api.js";
import { impersonating } from "../../src/k8s/config.js";
import { helmTemplate } from "./helm.js";

interface ClusterRole {
  metadata: { name: string; labels?: Record<string, string> };
  rules?: Array<{ apiGroups?: string[]; resources?: string[]; verbs: string[] }>;
}

/** The rules the chart aggregates into the built-in `role`. */
export function chartAggregatedRules(role: "view" | "edit"): NonNullable<ClusterRole["rules"]> {
  const roles = helmTemplate("media-orchestrator-crds", "media-system", ["--set", "crds.only=true"]).filter(
    (m) => m.kind === "ClusterRole",
  ) as unknown as ClusterRole[];
  return roles
    .filter((r) => r.metadata.labels?.[`rbac.authorization.k8s.io/aggregate-to-${role}`] === "true")
    .flatMap((r) => r.rules ?? []);
}

/** Binds the chart's `role` rules in `namespace` to `subject`. */
export async function bindChartRole(
  kc: KubeConfig,
  namespace: string,
  role: "view" | "edit",
  subject: RbacV1Subject,
): Promise<void> {
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const name = `chart-${role}-${subject.name}`;
  await rbac.createNamespacedRole({
    namespace,
    body: { metadata: { name }, rules: chartAggregatedRules(role) },
  });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
      subjects: [subject],
    },
  });
}

/** A user with the chart's `edit` in `namespace`, as an API client impersonating them. */
export async function chartEditUser(kc: KubeConfig, namespace: string, user: string): Promise<KubeApi> {
  await bindChartRole(kc, namespace, "edit", {
    kind: "User",
    name: user,
    apiGroup: "rbac.authorization.k8s.io",
  });
  return new KubeApi(impersonating(kc, user));
}
