// Keeps Markdown readable as plain text: no line over MAX_LINE characters (test/docs/docs.test.ts).
// A paragraph or list item on one long line is wrapped; a table with a row over the limit becomes
// a list, one item per row, each cell after the first labelled with its column's header. Code
// blocks are left alone. bench/report.ts passes the page it generates through it;
// `tsx scripts/markdown-fit.ts FILE...` rewrites hand-written pages in place.
import { readFileSync, writeFileSync } from "node:fs";

export const MAX_LINE = 200;
const WIDTH = 100;

/** Words of `text` joined into lines of at most `width` (a longer word stands alone). */
export function wrap(text: string, first: string, rest: string, width = WIDTH): string[] {
  const words = text.split(/\s+/).filter(Boolean);
  const lines: string[] = [];
  let line = first;
  let empty = true;
  for (const w of words) {
    if (!empty && line.length + 1 + w.length > width) {
      lines.push(line);
      line = rest + w;
    } else {
      line = empty ? line + w : `${line} ${w}`;
    }
    empty = false;
  }
  lines.push(line);
  return lines;
}

/** The cells of a table row (`| a | b \| c |`), trimmed, escaped pipes kept as pipes. */
function cells(row: string): string[] {
  const inner = row.trim().replace(/^\|/, "").replace(/\|$/, "");
  return inner.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

function tableAsList(rows: string[]): string[] {
  const header = cells(rows[0]!);
  const out: string[] = [];
  for (const row of rows.slice(2)) {
    const c = cells(row);
    const rest = c
      .slice(1)
      .map((v, i) => ({ label: header[i + 1] ?? "", v }))
      .filter(({ v }) => v !== "");
    const text =
      header.length === 2
        ? `${c[0]}: ${rest.map(({ v }) => v).join("")}`
        : `${c[0]}: ${rest.map(({ label, v }) => (label ? `*${label}*: ${v}` : v)).join("; ")}`;
    out.push(...wrap(text, "- ", "  "));
  }
  return out;
}

/** `text` with every line at most MAX_LINE characters, outside code blocks. */
export function fitMarkdown(text: string): string {
  const lines = text.split("\n");
  const out: string[] = [];
  let inCode = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^\s*```/.test(line)) inCode = !inCode;
    if (inCode || /^\s*```/.test(line)) {
      out.push(line);
      continue;
    }
    if (line.startsWith("|") && /^\|[\s:|-]+\|?$/.test(lines[i + 1] ?? "")) {
      let end = i + 2;
      while (end < lines.length && lines[end]!.startsWith("|")) end++;
      const table = lines.slice(i, end);
      out.push(...(table.some((l) => l.length > MAX_LINE) ? tableAsList(table) : table));
      i = end - 1;
      continue;
    }
    if (line.length <= MAX_LINE) {
      out.push(line);
      continue;
    }
    const item = /^(\s*)([-*]|\d+\.) /.exec(line);
    if (item) {
      const marker = item[0];
      out.push(...wrap(line.slice(marker.length), marker, " ".repeat(marker.length)));
    } else {
      const indent = /^\s*/.exec(line)![0];
      out.push(...wrap(line.slice(indent.length), indent, indent));
    }
  }
  return out.join("\n");
}

if (process.argv[1]?.endsWith("markdown-fit.ts")) {
  for (const file of process.argv.slice(2)) writeFileSync(file, fitMarkdown(readFileSync(file, "utf8")));
}
