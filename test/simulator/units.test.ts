import { describe, expect, it } from "vitest";
import { configFromInput, configFromSpec } from "../../tools/simulator/endpoints.js";
import { GraphQLSyntaxError, parseOperation, project, validate } from "../../tools/simulator/graphql.js";
import { canonicalJson, failureFor, inferWorkload, outputFor } from "../../tools/simulator/outputs.js";
import { chance, endpointIdFor, Rng, unit } from "../../tools/simulator/random.js";

describe("outputs", () => {
  it("are deterministic per input and differ between inputs", () => {
    for (const w of ["asr", "tts", "render"] as const) {
      const a = outputFor(w, { text: "hello there", audio_url: "s3://a" });
      expect(outputFor(w, { audio_url: "s3://a", text: "hello there" })).toEqual(a); // key order is irrelevant
      expect(outputFor(w, { text: "hello there!", audio_url: "s3://a" })).not.toEqual(a);
    }
  });

  it("have the shape of each workload", () => {
    expect(outputFor("asr", { audio_url: "s3://a.wav", language: "de" })).toMatchObject({
      transcript: expect.stringMatching(/\w+/),
      language: "de",
      source: "s3://a.wav",
      segments: expect.arrayContaining([expect.objectContaining({ start: 0 })]),
    });
    expect(outputFor("tts", { text: "x".repeat(150), voice: "v1" })).toMatchObject({
      audio: { format: "wav", voice: "v1", durationSeconds: 10, url: expect.stringMatching(/\.wav$/) },
      characters: 150,
    });
    expect(
      outputFor("render", { format: "webm", width: 640, height: 360, fps: 25, durationSeconds: 4 }),
    ).toMatchObject({
      media: { format: "webm", width: 640, height: 360, frames: 100, url: expect.stringMatching(/\.webm$/) },
    });
  });

  it("report failures as a JSON-encoded string, like runpod-python", () => {
    const err = failureFor("render", "w1", { a: 1 });
    expect(typeof err).toBe("string");
    expect(JSON.parse(err)).toMatchObject({ error_type: expect.any(String), worker_id: "w1" });
  });

  it("infers the workload from the endpoint name", () => {
    expect(inferWorkload("media-asr-dev")).toBe("asr");
    expect(inferWorkload("media-tts-prod")).toBe("tts");
    expect(inferWorkload("media-render-staging")).toBe("render");
    expect(inferWorkload("whatever")).toBe("render");
  });

  it("canonical JSON sorts keys at every level", () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { f: 1, e: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[1,{"e":2,"f":1}]},"b":1}',
    );
  });
});

describe("random", () => {
  it("Rng repeats with its seed", () => {
    const a = new Rng(42);
    const b = new Rng(42);
    expect([a.next(), a.token(14), a.uuid()]).toEqual([b.next(), b.token(14), b.uuid()]);
    expect(new Rng(43).next()).not.toBe(new Rng(42).next());
    expect(new Rng(1).uuid()).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
  });

  it("chance follows its rate over many keys", () => {
    const hits = Array.from({ length: 4000 }, (_, i) => chance(0.25, 7, `job-${i}`, "drop")).filter(
      Boolean,
    ).length;
    expect(hits).toBeGreaterThan(850);
    expect(hits).toBeLessThan(1150);
    expect(chance(0, "x")).toBe(false);
    expect(chance(1, "x")).toBe(true);
    expect(unit(1, "a")).toBe(unit(1, "a"));
  });

  it("endpoint ids are stable per name", () => {
    expect(endpointIdFor("media-asr-dev")).toBe(endpointIdFor("media-asr-dev"));
    expect(endpointIdFor("media-asr-dev")).toMatch(/^[a-z0-9]{14}$/);
    expect(endpointIdFor("media-tts-dev")).not.toBe(endpointIdFor("media-asr-dev"));
  });
});

describe("graphql reader", () => {
  it("reads the key check, named operations, variables, literals and aliases", () => {
    expect(parseOperation("query { myself { id } }")).toEqual({
      kind: "query",
      selections: [{ name: "myself", args: {}, selections: [{ name: "id", args: {} }] }],
    });
    const op = parseOperation(
      `mutation Save($input: EndpointInput!, $n: [Int!] = [1]) {
         saved: saveEndpoint(input: $input) { id networkVolumeIds { networkVolumeId } }
         deleteEndpoint(id: "abc")  # a comment
         other(x: {a: 1.5, b: [true, null, ENUM], c: $n})
       }`,
      { input: { name: "x" } },
    );
    expect(op.kind).toBe("mutation");
    expect(op.selections.map((f) => [f.alias, f.name, f.args])).toEqual([
      ["saved", "saveEndpoint", { input: { name: "x" } }],
      [undefined, "deleteEndpoint", { id: "abc" }],
      [undefined, "other", { x: { a: 1.5, b: [true, null, "ENUM"], c: [1] } }],
    ]);
  });

  it("rejects what it does not read", () => {
    for (const bad of [
      "",
      "{",
      "query { }",
      "subscription { x }",
      "{ a } { b }",
      "{ ...F }",
      '{ a(x: "unterminated) }',
    ]) {
      expect(() => parseOperation(bad), bad).toThrow(GraphQLSyntaxError);
    }
  });

  it("validates selections against a schema and projects values", () => {
    const schema = { Query: { me: "User" }, User: { id: null, tags: null, friends: "User" } };
    const ok = parseOperation("{ me { id friends { id } } }").selections;
    expect(validate(schema, "Query", ok)).toBeUndefined();
    expect(validate(schema, "Query", parseOperation("{ me { nope } }").selections)).toMatch(
      /Cannot query field "nope"/,
    );
    expect(validate(schema, "Query", parseOperation("{ me }").selections)).toMatch(/must have a selection/);
    expect(validate(schema, "Query", parseOperation("{ me { id { x } } }").selections)).toMatch(
      /must not have a selection/,
    );
    const value = { me: { id: "1", secret: "s", friends: [{ id: "2", secret: "t" }] } };
    expect(project(value, ok)).toEqual({ me: { id: "1", friends: [{ id: "2" }] } });
  });
});

describe("endpoint configs", () => {
  const input = { name: "media-asr-x", templateId: "t", gpuIds: "AMPERE_16" };

  it("saveEndpoint input is a full replace: omitted fields take their defaults", () => {
    const existing = configFromSpec({ id: "e1", name: "media-asr-x", workersMax: 5 });
    existing.settings.scalerValue = 9;
    const r = configFromInput({ ...input, id: "e1", workersMin: 1, workersMax: 2 }, existing, () => "new");
    expect(r).toMatchObject({ ok: true, config: { id: "e1", workersMin: 1, workersMax: 2, idleTimeout: 5 } });
    if (r.ok) expect(r.config.settings.scalerValue).toBe(4);
  });

  it("rejects missing required fields, unknown fields, bad numbers and min above max", () => {
    expect(configFromInput({ name: "x" }, undefined, () => "n")).toMatchObject({
      ok: false,
      validation: true,
    });
    expect(configFromInput({ ...input, bogus: 1 }, undefined, () => "n")).toMatchObject({
      ok: false,
      validation: true,
    });
    expect(configFromInput({ ...input, workersMax: -1 }, undefined, () => "n")).toMatchObject({
      ok: false,
      validation: true,
    });
    expect(configFromInput({ ...input, workersMin: 3, workersMax: 1 }, undefined, () => "n")).toMatchObject({
      ok: false,
      validation: false,
    });
    expect(configFromInput(input, undefined, () => "fresh")).toMatchObject({
      ok: true,
      config: { id: "fresh" },
    });
  });
});
