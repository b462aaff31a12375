// One source for each table: the configuration reference (docs/configuration.md) is generated
// from the environment schema, and no other page keeps a copy; the README's layout names every
// folder of src/.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EnvSchema } from "../../src/config/env.js";
import { CONFIG_PAGE, configPage } from "../../scripts/config-table.js";
import { REPO_ROOT } from "../support/controlplane.js";

const read = (page: string) => readFileSync(join(REPO_ROOT, page), "utf8");

describe("the configuration reference", () => {
  it("docs/configuration.md is what the schema generates (tsx scripts/config-table.ts rewrites it)", () => {
    const page = readFileSync(CONFIG_PAGE, "utf8");
    expect(page).toBe(configPage(page));
  });

  it("names every variable of the schema, with who reads it and its default", () => {
    const page = read("docs/configuration.md");
    for (const name of Object.keys(EnvSchema.shape)) expect(page).toContain(`- \`${name}\`: `);
    expect(page).toMatch(/`CALLBACK_SECRET_PREVIOUS`: [^-]*Read by the sidecar; default: none\./);
    expect(page).toMatch(/`RESYNC_INTERVAL_SECONDS`: [^-]*Read by the controller; default: `30`\./);
  });

  it("no other page keeps its own copy of the table", () => {
    const pages = ["README.md", ...readdirSync(join(REPO_ROOT, "docs")).map((f) => `docs/${f}`)].filter(
      (p) => p.endsWith(".md") && p !== "docs/configuration.md",
    );
    for (const page of pages) {
      const text = read(page);
      expect(text, page).not.toMatch(/^\| variable \| default \| meaning \|/m);
      expect(text, page).not.toMatch(/^[|-] `CALLBACK_CONFIRMATION_SECONDS`/m);
      expect(text, page).not.toMatch(/^[|-] `WEBHOOKS_REPLAY_MEMORY`/m);
    }
  });
});

describe("the README's layout", () => {
  it("names every folder of src/", () => {
    const readme = read("README.md");
    const layout = /## Layout\n([\s\S]*?)\n## /.exec(readme)?.[1] ?? "";
    const folders = readdirSync(join(REPO_ROOT, "src"), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => `src/${d.name}`);
    expect(folders.length).toBeGreaterThan(5);
    for (const folder of folders) expect(layout, folder).toContain(`\`${folder}\``);
  });
});
