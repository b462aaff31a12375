// The domain, the runtime and the controller import in one direction: no module of theirs
// reaches itself again through its imports (type imports included). A circle is how a shared type
// left in an entry point (the pass's Facts and Plan in plan.ts) ties every sub-planner to it.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");
const FOLDERS = ["src/mediajob", "src/runtime", "src/controller"];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** The repository's modules a file imports by a relative path. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)\.js"/g)].map((m) =>
    resolve(dirname(file), `${m[1]}.ts`),
  );
}

/** Every circle of imports among `files`, each as the path that closes it. */
function circles(files: string[]): string[][] {
  const inScope = new Set(files);
  const found: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (f: string) => {
    state.set(f, "open");
    path.push(f);
    for (const next of importsOf(f).filter((i) => inScope.has(i))) {
      if (state.get(next) === "open") found.push([...path.slice(path.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    path.pop();
    state.set(f, "done");
  };
  for (const f of files) if (!state.has(f)) visit(f);
  return found.map((c) => c.map((f) => relative(ROOT, f)));
}

describe("imports", () => {
  it("run in no circle within the domain, the runtime and the controller", () => {
    const files = FOLDERS.flatMap((d) => sources(join(ROOT, d)));
    expect(files.length).toBeGreaterThan(50);
    expect(circles(files)).toEqual([]);
  });

  it("a circle is found when there is one", () => {
    const files = ["src/cli/doctor.ts", "src/cli/waiting.ts"].map((f) => join(ROOT, f));
    expect(circles(files).length).toBeGreaterThan(0);
  });
});
