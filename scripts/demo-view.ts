// What `make demo` shows: its live table has the columns of `kubectl get mediajobs` (the CRD's
// printer columns, read from the one definition), and its wait for Enter ends by itself.
import { mediaJobDefinition } from "../src/crds/mediajob.js";
import type { MediaJob } from "../src/crds/mediajob.js";

function age(ts: unknown, nowMs: number): string {
  const s = Math.max(0, Math.round((nowMs - Date.parse(String(ts))) / 1000));
  return s < 120 ? `${s}s` : `${Math.round(s / 60)}m`;
}

/** The value at a printer column's simple JSONPath (`.status.phase`), as kubectl prints it. */
function at(obj: unknown, jsonPath: string): string {
  let v: unknown = obj;
  for (const key of jsonPath.split(".").filter(Boolean))
    v = (v as Record<string, unknown> | undefined)?.[key];
  return v === undefined || v === null ? "" : String(v);
}

/** `kubectl get mediajobs`'s table (the default columns: priority 0), aligned as kubectl aligns it. */
export function mediaJobTable(jobs: MediaJob[], nowMs = Date.now()): string[] {
  const columns = mediaJobDefinition.printerColumns.filter((c) => !c.priority);
  const rows = [["NAME", ...columns.map((c) => c.name.toUpperCase())]];
  for (const j of jobs) {
    rows.push([
      j.metadata.name,
      ...columns.map((c) => (c.type === "date" ? age(at(j, c.jsonPath), nowMs) : at(j, c.jsonPath))),
    ]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) =>
    r
      .map((c, i) => c.padEnd(widths[i]!))
      .join("   ")
      .trimEnd(),
  );
}

/**
 * Waits for a line on `input` (the user's Enter), and ends by itself when the input ends or
 * closes (a terminal with no one at it) or after `timeoutMs`. Says which.
 */
export function waitForEnter(
  input: NodeJS.ReadableStream & { pause(): unknown; resume(): unknown },
  timeoutMs: number,
): Promise<"enter" | "input ended" | "timeout"> {
  return new Promise((resolve) => {
    const done = (why: "enter" | "input ended" | "timeout") => {
      clearTimeout(timer);
      input.off("data", onData);
      input.off("end", onEnd);
      input.off("close", onEnd);
      input.pause();
      resolve(why);
    };
    const onData = () => done("enter");
    const onEnd = () => done("input ended");
    const timer = setTimeout(() => done("timeout"), timeoutMs);
    input.once("data", onData);
    input.once("end", onEnd);
    input.once("close", onEnd);
    input.resume();
  });
}
