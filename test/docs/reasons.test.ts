// One source for the reason table: docs/reasons.md is generated from the domain's table
// (src/mediajob/reasons.ts), which the CLI reads its fixes from, in the admission chain's order.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REASONS_PAGE, reasonsPage } from "../../scripts/reason-table.js";
import { REASONS } from "../../src/mediajob/reasons.js";
import { REPO_ROOT } from "../support/controlplane.js";

describe("the reason table", () => {
  it("docs/reasons.md is what the domain's table generates (tsx scripts/reason-table.ts rewrites it)", () => {
    expect(readFileSync(REASONS_PAGE, "utf8")).toBe(reasonsPage());
  });

  it("lists every reason with its meaning and fix, and the chain's order", () => {
    const page = reasonsPage();
    for (const reason of Object.keys(REASONS)) expect(page).toContain(`- \`${reason}\` (`);
    expect(page.replace(/\s+/g, " ")).toContain(
      "(`cancel`, `suspend`, `deadline`, `binding`, `subscription`, `plan`, `endpoint`)",
    );
    expect(page).toMatch(
      /- `EndpointMissing` \(condition `EndpointReady=False`\): [^]*?\n {2}Fix: apply a GpuEndpoint/,
    );
  });

  it("docs/design.md links it", () => {
    const design = readFileSync(join(REPO_ROOT, "docs/design.md"), "utf8");
    expect(design).toContain("(reasons.md)");
  });
});
