// Which writes each resource's rules policies match (src/crds/rules-policy.ts). The API server plans
// every validation of a matching policy at each request, whatever the expression then decides, so
// a policy that matches a write its rules cannot refuse costs the API server CPU on every such write:
// the MediaJob limits (tens of KB of CEL) on each status write were most of a job's apiserver CPU.
// That the rules still refuse what they should is tested on the real API server (test/crds).
import { describe, expect, it } from "vitest";
import { allRulesPolicies, RESOURCE_DEFINITIONS } from "../../src/crds/index.js";

interface Policy {
  kind: string;
  metadata: { name: string };
  spec: {
    matchConstraints: { resourceRules: Array<{ resources: string[]; operations: string[] }> };
    matchConditions?: Array<{ name: string; expression: string }>;
    validations: Array<{ expression: string }>;
  };
}

const policies = (allRulesPolicies() as unknown as Policy[]).filter(
  (p) => p.kind === "ValidatingAdmissionPolicy",
);
const resources = (p: Policy) => p.spec.matchConstraints.resourceRules.flatMap((r) => r.resources);

describe("the rules policies match only the writes their rules can refuse", () => {
  it("spec rules: the resource, never its status subresource, and only a create or a spec change", () => {
    const spec = policies.filter((p) => !p.metadata.name.endsWith("-status-rules"));
    expect(spec.length).toBeGreaterThan(0);
    for (const p of spec) {
      expect(
        resources(p).every((r) => !r.endsWith("/status")),
        p.metadata.name,
      ).toBe(true);
      expect(p.spec.matchConditions, p.metadata.name).toEqual([
        {
          name: "spec-written",
          expression: "request.operation == 'CREATE' || object.spec != oldObject.spec",
        },
      ]);
    }
  });

  it("status rules (a MediaJob's reset): the status subresource only, in a policy of their own", () => {
    const status = policies.filter((p) => p.metadata.name.endsWith("-status-rules"));
    expect(status.map((p) => p.metadata.name)).toEqual(["media-orchestrator-mediajob-status-rules"]);
    expect(resources(status[0]!)).toEqual(["mediajobs/status"]);
    expect(status[0]!.spec.validations).toHaveLength(1);
  });

  it("every rule of every resource is in exactly one policy", () => {
    const expressions = policies.flatMap((p) => p.spec.validations.map((v) => v.expression));
    const rules = RESOURCE_DEFINITIONS.flatMap((d) => d.admissionRules ?? []);
    expect(expressions).toHaveLength(rules.length);
    for (const r of rules)
      expect(
        expressions.some((e) => e.includes(r.expression)),
        r.field,
      ).toBe(true);
  });
});
