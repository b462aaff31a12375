// The simulator's REST v2 management API over real HTTP, checked against what RunPod's OpenAPI
// document for v2 says: paths, status codes, RFC 9457 errors naming the field, PATCH semantics.
import { request } from "undici";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RestEndpoint, RestEndpointWorkersAnswer } from "../../src/provider/schemas-rest.js";
import { startSimulator, type Simulator } from "../../tools/simulator/server.js";

const KEY = "sim-key";
const EP = "ep-asr-rest";
let sim: Simulator;

beforeEach(async () => {
  sim = await startSimulator({
    timeScale: 0.01,
    apiKeys: [KEY],
    accountProblemKeys: ["suspended-key"],
    endpoints: [{ id: EP, name: "media-asr-dev", workersMax: 2 }],
  });
});
afterEach(() => sim.close());

async function call(method: string, path: string, body?: unknown, key: string | null = KEY) {
  const res = await request(`${sim.url}${path}`, {
    method: method as "GET",
    headers: {
      ...(key !== null && { authorization: `Bearer ${key}` }),
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    type: String(res.headers["content-type"] ?? ""),
    body: (text === "" ? undefined : JSON.parse(text)) as Record<string, unknown> & { errors?: string[] },
  };
}

// Required by the OpenAPI `Endpoint` schema.
const REQUIRED = [
  "id",
  "name",
  "workers",
  "scaling",
  "dataCenterIds",
  "networkVolumes",
  "timeout",
  "flashboot",
  "createdAt",
];

describe("reading", () => {
  it("GET /v2/serverless wraps the endpoints; each has every required Endpoint field", async () => {
    const r = await call("GET", "/v2/serverless");
    expect(r.status).toBe(200);
    const endpoints = r.body.endpoints as Array<Record<string, unknown>>;
    expect(endpoints).toHaveLength(1);
    for (const field of REQUIRED) expect(endpoints[0]).toHaveProperty(field);
    expect(RestEndpoint.safeParse(endpoints[0]).success).toBe(true);
    expect(endpoints[0]).toMatchObject({
      id: EP,
      type: "QUEUE",
      workers: { min: 0, max: 2, idleTimeout: 5 },
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
      gpu: { pools: ["AMPERE_16"], count: 1, allowedCudaVersions: [], minCudaVersion: null },
      requestUrls: { run: `${sim.url}/v2/${EP}/run`, health: `${sim.url}/v2/${EP}/health` },
    });
  });

  it("GET one endpoint: 200, or a 404 problem", async () => {
    expect((await call("GET", `/v2/serverless/${EP}`)).body).toMatchObject({ id: EP, name: "media-asr-dev" });
    const missing = await call("GET", "/v2/serverless/nope");
    expect(missing.status).toBe(404);
    expect(missing.type).toContain("application/problem+json");
    expect(missing.body).toEqual({ title: "Not Found", status: 404, detail: "resource not found" });
  });

  it("GET workers: a summary whose counts add up to the workers listed", async () => {
    sim.setEndpoint({ id: EP, workersMin: 1 });
    const r = await call("GET", `/v2/serverless/${EP}/workers`);
    expect(r.status).toBe(200);
    const parsed = RestEndpointWorkersAnswer.parse(r.body);
    expect(parsed.summary.total).toBe(parsed.workers.length);
    expect(parsed.summary.total).toBe(1);
  });

  it("401 without a key or with a wrong one, 403 for a suspended account, all as problems", async () => {
    expect((await call("GET", "/v2/serverless", undefined, null)).body).toMatchObject({
      status: 401,
      detail: "missing bearer token",
    });
    expect((await call("GET", "/v2/serverless", undefined, "wrong")).status).toBe(401);
    const suspended = await call("GET", "/v2/serverless", undefined, "suspended-key");
    expect(suspended.status).toBe(403);
    expect(suspended.type).toContain("application/problem+json");
  });
});

describe("PATCH /v2/serverless/{id}", () => {
  it("changes only the fields sent", async () => {
    await call("PATCH", `/v2/serverless/${EP}`, { scaling: { type: "QUEUE_DELAY", queueDelay: 8 } });
    const r = await call("PATCH", `/v2/serverless/${EP}`, { workers: { max: 6 } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      name: "media-asr-dev",
      workers: { min: 0, max: 6, idleTimeout: 5 },
      scaling: { type: "QUEUE_DELAY", queueDelay: 8 },
      gpu: { pools: ["AMPERE_16"] },
    });
    expect(sim.getEndpoint(EP)).toMatchObject({ workersMax: 6, workersMin: 0, scalerValue: 8 });
  });

  it("400 with the field for values out of range, unknown fields, min above max and bad JSON", async () => {
    const cases: Array<[unknown, string]> = [
      [{ workers: { min: -1 } }, "$.workers.min"],
      [{ workers: { idleTimeout: 0 } }, "$.workers.idleTimeout"],
      [{ workers: { max: "3" } }, "$.workers.max"],
      [{ bogus: 1 }, "$: additional properties 'bogus' not allowed"],
      [{ workers: { min: 3 } }, "$.workers.min: must not exceed workers.max"],
      [{ scaling: { type: "QUEUE_DELAY" } }, "$.scaling.queueDelay"],
    ];
    for (const [body, field] of cases) {
      const r = await call("PATCH", `/v2/serverless/${EP}`, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.errors?.join(" | ")).toContain(field);
    }
    expect((await call("PATCH", `/v2/serverless/${EP}`, "{not json")).status).toBe(400);
    expect(sim.getEndpoint(EP)).toMatchObject({ workersMin: 0, workersMax: 2 }); // nothing applied
  });

  it("404 for an unknown endpoint, 405 for an unknown method", async () => {
    expect((await call("PATCH", "/v2/serverless/nope", { workers: { max: 1 } })).status).toBe(404);
    expect((await call("PUT", `/v2/serverless/${EP}`, { workers: { max: 1 } })).status).toBe(405);
  });
});

describe("create and delete", () => {
  it("POST creates (201) with REST v2's defaults; the endpoint runs jobs at once", async () => {
    const r = await call("POST", "/v2/serverless", {
      name: "media-tts-dev",
      type: "QUEUE",
      templateId: "tpl-123",
      gpu: { pools: ["ADA_24"] },
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      name: "media-tts-dev",
      workers: { min: 0, max: 3, idleTimeout: 10 },
      timeout: 300_000,
      flashboot: "OFF",
    });
    const id = r.body.id as string;
    expect(id).toMatch(/^[a-z0-9]{14}$/);
    const run = await request(`${sim.url}/v2/${id}/run`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ input: { text: "hi" } }),
    });
    expect(run.statusCode).toBe(200);
    await run.body.dump();
  });

  it("POST refuses what the schema refuses, naming the field", async () => {
    const base = {
      name: "x",
      type: "QUEUE",
      templateId: "t",
      scaling: { type: "QUEUE_DELAY", queueDelay: 4 },
    };
    const cases: Array<[unknown, string]> = [
      [{ ...base, gpu: { pools: ["ADA_24"] }, scaling: undefined }, "$.scaling"],
      [base, "exactly one of gpu or cpu"],
      [
        { ...base, gpu: { pools: ["ADA_24"] }, cpu: [{ id: "cpu5c", vcpuCount: 2 }] },
        "exactly one of gpu or cpu",
      ],
      [{ ...base, templateId: undefined, gpu: { pools: ["ADA_24"] } }, "$.image"],
      [{ ...base, gpu: { pools: [] } }, "$.gpu.pools"],
      [{ ...base, type: "LOAD_BALANCER", gpu: { pools: ["ADA_24"] } }, "$.scaling.type"],
    ];
    for (const [body, field] of cases) {
      const r = await call("POST", "/v2/serverless", body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.errors?.join(" | ")).toContain(field);
    }
    expect(sim.listEndpoints()).toHaveLength(1);
  });

  it("DELETE answers 204 even with workers (unlike GraphQL), then the endpoint is gone", async () => {
    expect((await call("DELETE", `/v2/serverless/${EP}`)).status).toBe(204);
    expect((await call("GET", `/v2/serverless/${EP}`)).status).toBe(404);
    expect((await call("DELETE", `/v2/serverless/${EP}`)).status).toBe(404);
  });
});

describe("GraphQL retired", () => {
  it("after PUT /_sim/faults {graphqlRetired: true}, /graphql is 410 and REST v2 still answers", async () => {
    const put = await call("PUT", "/_sim/faults", { graphqlRetired: true });
    expect(put.status).toBe(200);
    const gql = await call("POST", "/graphql", { query: "query { myself { id } }" });
    expect(gql.status).toBe(410);
    expect(gql.body.errors).toEqual([{ message: expect.stringContaining("retired") }]);
    expect((await call("GET", "/v2/serverless")).status).toBe(200);
    expect(sim.stats()).toMatchObject({ graphqlRequests: 1, restRequests: 1 });
  });
});
