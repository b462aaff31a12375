import { createHash } from "node:crypto";
import type { SimContext } from "./context.js";
import {
  configFromInput,
  graphqlView,
  ENGINE_FIELDS,
  READ_ONLY_FIELDS,
  SETTINGS_FIELDS,
} from "./endpoints.js";
import { GraphQLSyntaxError, parseOperation, project, validate, type Field, type Schema } from "./graphql.js";
import { isRecord, json, type Reply } from "./http.js";

// POST /graphql: the provider's management API, reduced to what the operator and RunPod's SDKs
// use: `myself { id pubKey networkVolumes endpoints { ... } }` (every field runpod-python's
// get_user and get_endpoints select), `saveEndpoint(input)` (a full replace) and
// `deleteEndpoint(id)` (only with zero workers). Errors use the GraphQL envelope.

const ENDPOINT_TYPE: Record<string, string | null> = Object.fromEntries(
  ["id", "name", ...ENGINE_FIELDS, ...SETTINGS_FIELDS, ...READ_ONLY_FIELDS].map((f) => [f, null]),
);
ENDPOINT_TYPE.networkVolumeIds = "EndpointNetworkVolume";
ENDPOINT_TYPE.networkVolume = "NetworkVolume";
ENDPOINT_TYPE.env = "EnvironmentVariable";

const SCHEMA: Schema = {
  Query: { myself: "User" },
  Mutation: { saveEndpoint: "Endpoint", deleteEndpoint: null },
  User: { id: null, email: null, pubKey: null, networkVolumes: "NetworkVolume", endpoints: "Endpoint" },
  Endpoint: ENDPOINT_TYPE,
  EndpointNetworkVolume: { networkVolumeId: null, dataCenterId: null },
  NetworkVolume: { id: null, name: null, size: null, dataCenterId: null },
  EnvironmentVariable: { key: null, value: null },
};

/** What /graphql answers once RunPod has retired it (the graphqlRetired fault). */
export const GRAPHQL_RETIRED_MESSAGE =
  "The GraphQL API has been retired. Use the REST API v2: https://docs.runpod.io/api-reference-v2/overview";

const SUSPENDED_MESSAGE =
  "Account suspended: insufficient balance. Add credits to resume serverless workers.";

/** A stable account id per key that reveals nothing about the key. */
function accountIdFor(key: string): string {
  return `user_${createHash("sha256").update(`account:${key}`).digest("hex").slice(0, 20)}`;
}

type Resolved = { value: unknown } | { error: string; validation?: boolean };

export function handleGraphQL(ctx: SimContext, key: string, body: unknown): Reply {
  if (!isRecord(body) || typeof body.query !== "string") {
    return json(400, { errors: [{ message: "Must provide query string." }] });
  }
  let op;
  try {
    op = parseOperation(body.query, isRecord(body.variables) ? body.variables : {});
  } catch (err) {
    if (err instanceof GraphQLSyntaxError) return json(400, { errors: [{ message: err.message }] });
    throw err;
  }
  const invalid = validate(SCHEMA, op.kind === "query" ? "Query" : "Mutation", op.selections);
  if (invalid !== undefined) return json(400, { errors: [{ message: invalid }] });

  const data: Record<string, unknown> = {};
  const errors: Array<{ message: string; path: string[] }> = [];
  for (const field of op.selections) {
    const out = field.alias ?? field.name;
    const r: Resolved = ctx.opts.accountProblemKeys.has(key)
      ? { error: SUSPENDED_MESSAGE }
      : resolve(ctx, key, field);
    if ("value" in r) {
      data[out] = project(r.value, field.selections);
    } else if (r.validation === true) {
      return json(400, { errors: [{ message: r.error }] });
    } else {
      data[out] = null;
      errors.push({ message: r.error, path: [out] });
    }
  }
  return json(200, errors.length > 0 ? { data, errors } : { data });
}

function resolve(ctx: SimContext, key: string, field: Field): Resolved {
  const { engine } = ctx;
  switch (field.name) {
    case "myself": {
      const userId = accountIdFor(key);
      return {
        value: {
          id: userId,
          email: "simulator@example.invalid",
          pubKey: "",
          networkVolumes: [],
          endpoints: engine.endpoints().map((c) => ({ ...graphqlView(c), userId })),
        },
      };
    }
    case "saveEndpoint": {
      const input = field.args.input;
      if (!isRecord(input)) {
        return {
          error: 'Variable "$input" of required type "EndpointInput!" was not provided.',
          validation: true,
        };
      }
      const existing = typeof input.id === "string" ? engine.endpoint(input.id) : undefined;
      if (input.id !== undefined && input.id !== null && existing === undefined)
        return { error: "Endpoint not found" };
      const check = configFromInput(input, existing, () => ctx.idRng.token(14));
      if (!check.ok) return { error: check.message, validation: check.validation };
      engine.upsertEndpoint(check.config);
      return { value: { ...graphqlView(check.config), userId: accountIdFor(key) } };
    }
    case "deleteEndpoint": {
      const id = field.args.id;
      const ep = typeof id === "string" ? engine.endpoint(id) : undefined;
      if (ep === undefined) return { error: "Endpoint not found" };
      if (ep.workersMin > 0 || ep.workersMax > 0) {
        return { error: "Endpoint must have 0 min and 0 max workers before it can be deleted" };
      }
      engine.removeEndpoint(ep.id);
      return { value: null };
    }
    default:
      return { error: `Cannot query field "${field.name}".`, validation: true };
  }
}
