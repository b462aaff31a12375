// One source for the field reference: docs/api.md is generated from the CRD schemas, so a field
// added, removed or described anew in src/crds shows there, and docs/design.md keeps no copy.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { API_PAGE, apiReference } from "../../scripts/api-reference.js";
import { REPO_ROOT } from "../support/controlplane.js";

describe("the API reference", () => {
  it("docs/api.md is what the schemas generate (tsx scripts/api-reference.ts rewrites it)", () => {
    expect(readFileSync(API_PAGE, "utf8")).toBe(apiReference());
  });

  it("names the fields, their limits, the rules with their messages and the columns", () => {
    const page = apiReference();
    expect(page).toMatch(/- `spec\.workload` \(string, one of `asr`, `tts`, `render`, required\)/);
    expect(page).toContain("`status.phase`: only a Processing job can be reset to Pending");
    expect(page).toMatch(/`kubectl get mediajobs`: NAME, WORKLOAD, PHASE, REASON, ENDPOINT, ATTEMPTS, AGE;/);
  });

  it("docs/design.md links it instead of listing the fields itself", () => {
    const design = readFileSync(join(REPO_ROOT, "docs/design.md"), "utf8");
    expect(design).toContain("(api.md#mediajob)");
    expect(design).not.toMatch(/^[-|] `spec\.workload`/m);
    expect(design).not.toMatch(/^[-|] `status\.conditions`/m);
  });
});
