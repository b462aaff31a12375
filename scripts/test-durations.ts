// The slowest test files of a run, from vitest's JSON report (`make test` writes
// .local/test-results.json): where the suite's time goes. A file's time is from the start of its
// first hook to the end of its last test or hook; importing it is not counted.
// Usage: tsx scripts/test-durations.ts [report.json] [how many, default 10]
import { readFileSync } from "node:fs";
import { relative, resolve } from "node:path";

interface Report {
  startTime: number;
  testResults: Array<{ name: string; startTime: number; endTime: number; status: string }>;
}

const [file = ".local/test-results.json", count = "10"] = process.argv.slice(2);
const report = JSON.parse(readFileSync(file, "utf8")) as Report;
const root = resolve(".");
const files = report.testResults
  .map((t) => ({ name: relative(root, t.name), ms: t.endTime - t.startTime, status: t.status }))
  .sort((a, b) => b.ms - a.ms);
const end = Math.max(report.startTime, ...report.testResults.map((t) => t.endTime));
const seconds = (ms: number) => (ms / 1000).toFixed(1).padStart(6);

console.log(
  `slowest test files (of ${files.length}; the run took ${seconds(end - report.startTime).trim()} s):`,
);
for (const f of files.slice(0, Number(count)))
  console.log(`${seconds(f.ms)} s  ${f.name}${f.status === "passed" ? "" : ` (${f.status})`}`);
