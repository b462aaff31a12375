// The signer's package is loaded only when storage is configured: a controller without a bucket
// keeps the footprint it had (docs/design.md, "The signing library": the signer costs a container
// about 3.4 MiB over its own packages, and the controller idles within a MiB of its 80 MiB target).
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/controlplane.js";

/** The module URLs a fresh process resolves while it opens the store of `env`. */
function loadedOpening(env: Record<string, string>): string[] {
  const dir = mkdtempSync(join(tmpdir(), "mo-storage-loads-"));
  try {
    const hook = join(dir, "hook.mjs");
    writeFileSync(
      hook,
      `import { registerHooks } from "node:module";
const seen = new Set();
registerHooks({ resolve(s, c, next) { const r = next(s, c); seen.add(r.url); return r; } });
process.on("exit", () => process.stdout.write(JSON.stringify([...seen])));`,
    );
    const code = `const { openStore } = await import("./src/storage/index.ts");
const store = await openStore(${JSON.stringify(env)});
store?.client.close();
process.exit(0);`;
    const res = spawnSync(
      process.execPath,
      ["--import", hook, "--import", "tsx", "--input-type=module", "-e", code],
      {
        cwd: REPO_ROOT,
        encoding: "utf8",
      },
    );
    expect(res.status, res.stderr).toBe(0);
    return JSON.parse(res.stdout) as string[];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const smithy = (urls: string[]) => urls.filter((u) => u.includes("/node_modules/@smithy/"));

describe("the signer's package", () => {
  it("is not loaded without a bucket", () => {
    const urls = loadedOpening({ STORAGE_REGION: "us-east-1" });
    expect(urls.some((u) => u.endsWith("/src/storage/index.ts"))).toBe(true);
    expect(smithy(urls)).toEqual([]);
  });

  it("is loaded once a bucket is configured", () => {
    const urls = loadedOpening({
      STORAGE_BUCKET: "media",
      STORAGE_REGION: "us-east-1",
      STORAGE_ENDPOINT: "http://127.0.0.1:1",
      STORAGE_ACCESS_KEY_ID: "a",
      STORAGE_SECRET_ACCESS_KEY: "b",
    });
    expect(smithy(urls).length).toBeGreaterThan(0);
  });
});
