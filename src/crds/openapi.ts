// zod -> apiextensions.k8s.io/v1 structural OpenAPI schema, and the CRD objects built from it.
import { z } from "zod";
import { CATEGORY, GROUP, VERSION, type ResourceDefinition } from "./common.js";

type Json = Record<string, unknown>;

/**
 * zod's JSON Schema (OpenAPI 3.0 flavour) is nearly a structural schema. What the apiserver refuses
 * or mis-reads is removed here: `additionalProperties` beside preserve-unknown-fields or `false`,
 * the ECMAScript regexes zod adds to formatted strings (the apiserver uses RE2 and checks the format
 * itself), and the safe-integer bounds zod adds to every int.
 */
function toStructural(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(toStructural);
  if (schema === null || typeof schema !== "object") return schema;
  const input = schema as Json;
  const out: Json = {};
  for (const [key, value] of Object.entries(input)) {
    if (key === "$schema" || key === "id") continue;
    if (key === "additionalProperties") {
      if (value === false || input["x-kubernetes-preserve-unknown-fields"] === true) continue;
      if (typeof value === "object" && value !== null && Object.keys(value).length === 0) continue;
    }
    if (key === "pattern" && typeof input.format === "string") continue;
    if ((key === "maximum" || key === "minimum") && Math.abs(value as number) >= Number.MAX_SAFE_INTEGER)
      continue;
    if (key === "properties" || key === "patternProperties") {
      out[key] = Object.fromEntries(Object.entries(value as Json).map(([k, v]) => [k, toStructural(v)]));
      continue;
    }
    out[key] = toStructural(value);
  }
  if (out.type === "integer" && out.format === undefined) out.format = "int64";
  return out;
}

function openApiSchema(zodSchema: z.ZodType): Json {
  return toStructural(z.toJSONSchema(zodSchema, { target: "openapi-3.0", io: "input" })) as Json;
}

export function customResourceDefinition(def: ResourceDefinition): Json {
  const spec = openApiSchema(def.spec);
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${def.plural}.${GROUP}` },
    spec: {
      group: GROUP,
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.singular,
        shortNames: def.shortNames,
        categories: [CATEGORY],
      },
      scope: "Namespaced",
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: def.printerColumns,
          ...(def.selectableFields?.length && { selectableFields: def.selectableFields }),
          schema: {
            openAPIV3Schema: {
              type: "object",
              description: def.description,
              required: ["spec"],
              properties: {
                apiVersion: { type: "string" },
                kind: { type: "string" },
                metadata: { type: "object" },
                spec,
                status: openApiSchema(def.status),
              },
            },
          },
        },
      ],
    },
  };
}
