// The docs are reference, readable as plain text: no line over 200 characters, no run logs or
// history of earlier runs, and the benchmark analysis in one place (docs/benchmarks-notes.md),
// linked from the generated page rather than repeated in it.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fitMarkdown, MAX_LINE } from "../../scripts/markdown-fit.js";
import { REPO_ROOT } from "../support/controlplane.js";

const DOCS = join(REPO_ROOT, "docs");
const pages = [
  ...readdirSync(DOCS)
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
  "README.md",
];
const read = (page: string) => readFileSync(join(REPO_ROOT, page), "utf8");

describe("the docs", () => {
  it.each(pages)(`%s: no line over ${MAX_LINE} characters`, (page) => {
    const long = read(page)
      .split("\n")
      .map((line, i) => ({ line: i + 1, length: line.length }))
      .filter((l) => l.length > MAX_LINE);
    expect(long, `${page}: tsx scripts/markdown-fit.ts ${page} wraps them`).toEqual([]);
  });

  it.each(pages)("%s: no run log, no history of earlier runs", (page) => {
    const text = read(page);
    expect(text).not.toMatch(/^#+ .*\b(Last run|The run before)\b/im);
    expect(text).not.toMatch(/\b(The run before|Earlier runs|earlier runs)\b/);
    expect(text).not.toMatch(/\b(Found (on the way )?and fixed|fixed on the way)\b/i);
    expect(text).not.toMatch(/\((the (image|product) now|before|now)\)/);
  });

  it("docs/benchmarks.md links the analysis instead of repeating it", () => {
    const page = read("docs/benchmarks.md");
    expect(page).toContain("[benchmarks-notes.md](benchmarks-notes.md)");
    const paragraphs = read("docs/benchmarks-notes.md")
      .split(/\n\n+/)
      .filter((p) => p.length > 120 && !p.startsWith("|"));
    expect(paragraphs.length).toBeGreaterThan(10);
    for (const p of paragraphs) expect(page.includes(p), p.slice(0, 80)).toBe(false);
  });
});

describe("markdown-fit", () => {
  it("wraps a long paragraph and turns a wide table into a list, leaving code alone", () => {
    const word = "word ";
    const code = `\`\`\`\n${"x".repeat(300)}\n\`\`\``;
    const text = [
      word.repeat(60).trim(),
      "",
      "| name | meaning |",
      "|---|---|",
      `| \`A\` | ${word.repeat(50).trim()} |`,
      "",
      code,
    ].join("\n");
    const fitted = fitMarkdown(text);
    expect(fitted).toContain(code);
    const outside = fitted.replace(code, "");
    expect(Math.max(...outside.split("\n").map((l) => l.length))).toBeLessThanOrEqual(100);
    expect(fitted).toContain("- `A`: word word");
    expect(fitted).not.toContain("| name | meaning |");
  });
});
