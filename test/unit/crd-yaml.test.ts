// The chart's CRD manifests read as the apiserver's clients read them: Helm parses YAML 1.1, where
// an unquoted Off, On, Yes or No is a boolean. Each manifest's spec, parsed that way, must be the
// schema the zod definitions generate, so no enum value or default silently turns into `false`.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { allCustomResourceDefinitions } from "../../src/crds/index.js";

const DIR = join(import.meta.dirname, "../../deploy/helm/templates/crds");

describe("the chart's CRD manifests under YAML 1.1", () => {
  it.each(
    allCustomResourceDefinitions().map((crd) => [(crd.metadata as { name: string }).name, crd] as const),
  )("%s: the spec parses back to the generated schema", (name, crd) => {
    const text = readFileSync(join(DIR, `${name}.yaml`), "utf8")
      .split("\n")
      .filter((line) => !line.trimStart().startsWith("{{"))
      .join("\n");
    const parsed = parse(text, { version: "1.1" }) as { spec: unknown };
    expect(parsed.spec).toEqual(crd.spec);
  });
});
