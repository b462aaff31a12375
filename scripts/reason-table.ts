// The reason table of docs/reasons.md, generated from the domain's table (src/mediajob/reasons.ts)
// and the admission chain's order (src/mediajob/admission-chain.ts). `tsx scripts/reason-table.ts`
// rewrites the page; test/docs/reasons.test.ts fails when the page differs from what this generates.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { CHECKS } from "../src/mediajob/admission-chain.js";
import { REASONS, type FixSubject, type ReasonEntry } from "../src/mediajob/reasons.js";
import { REPO_ROOT } from "../test/support/controlplane.js";
import { wrap } from "./markdown-fit.js";

export const REASONS_PAGE = join(REPO_ROOT, "docs/reasons.md");

/** The names a fix is written with on the page: placeholders in capitals. */
const PLACEHOLDERS: FixSubject = {
  namespace: "NAMESPACE",
  name: "NAME",
  workload: "WORKLOAD",
  account: "ACCOUNT",
};

const SECTIONS: Array<{ by: ReasonEntry["by"]; title: string; intro: string }> = [
  {
    by: "admission chain",
    title: "Held by the admission chain",
    intro:
      `A Pending job is asked these checks in this order (${CHECKS.map((c) => `\`${c}\``).join(", ")}); the first ` +
      "that fails gives the reason, so when several hold, the earlier one shows. A cancelled job, and one past " +
      "its deadline, end (see the last section).",
  },
  {
    by: "in-flight window",
    title: "Waiting for a slot of the endpoint's in-flight window",
    intro:
      "A job the chain lets go still waits in Kubernetes, Pending, until its endpoint's window has a slot for it.",
  },
  {
    by: "provider",
    title: "Submitted, waiting in the provider's queue",
    intro:
      "A Processing job that waits in its endpoint's queue at the provider says why, from the endpoint's last " +
      "`/health` reading, until a worker starts it.",
  },
  { by: "end", title: "Ends", intro: "A job that ends for one of these reasons is not submitted again." },
];

/** Where the reason shows: a condition, or the phase the job ends in. */
const shown = (entry: ReasonEntry): string =>
  entry.shownAs.includes("=") ? `condition \`${entry.shownAs}\`` : `phase \`${entry.shownAs}\``;

const cell = (entry: ReasonEntry): string[] => [
  `(${shown(entry)}${entry.byDesign ? "; by design, nothing to fix" : ""}): ${entry.meaning}.`,
  `Fix: ${entry.fix(PLACEHOLDERS)}.`,
];

export function reasonsPage(): string {
  const lines = [
    "# Reasons",
    "",
    ...wrap(
      "Every reason a MediaJob can show in the REASON column of `kubectl get mj`, in its conditions and in " +
        "`kubectl media status`, `queue` and `doctor`: what it means and what to do about it. Generated from " +
        "`src/mediajob/reasons.ts` by `scripts/reason-table.ts`; the CLI reads its fixes from the same table. " +
        "Names in capitals stand for the job's own.",
      "",
      "",
    ),
  ];
  for (const s of SECTIONS) {
    lines.push("", `## ${s.title}`, "", ...wrap(s.intro, "", ""), "");
    for (const [reason, entry] of Object.entries(REASONS)) {
      if (entry.by !== s.by) continue;
      const [what, fix] = cell(entry);
      lines.push(...wrap(`\`${reason}\` ${what}`, "- ", "  "), ...wrap(fix!, "  ", "  "));
    }
  }
  return `${lines.join("\n")}\n`;
}

if (process.argv[1]?.endsWith("reason-table.ts")) {
  writeFileSync(REASONS_PAGE, reasonsPage());
  console.log(`wrote ${REASONS_PAGE}`);
}
