// The pure half of the presigned I/O per attempt: which keys an attempt reads and writes, and until
// when its URLs may work. A URL that outlives the attempt's deadlines, a key outside the job's
// namespace or attempt, or an unbounded attempt would each let a worker (or whoever holds its
// input) reach media it should not.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  attemptUrlExpiry,
  MAX_PRESIGNED_SECONDS,
  planAttemptIO,
  URL_GRACE_SECONDS,
  type AttemptDeadlines,
} from "../../src/storage/attempt-io.js";
import { attemptObjectKey, inputObjectKey, jobObjectPrefix } from "../../src/storage/keys.js";

const t0 = new Date("2026-11-28T12:00:00Z");
const at = (s: number) => new Date(t0.getTime() + s * 1000);
const scope = { namespace: "studio-a", jobUid: "6f1c2d3e-aaaa-bbbb-cccc-1234567890ab", attempt: 2 };

describe("attemptObjectKey", () => {
  it("is namespace/jobUid/attempt/name", () => {
    expect(attemptObjectKey(scope, "audio.wav")).toBe(
      "studio-a/6f1c2d3e-aaaa-bbbb-cccc-1234567890ab/2/audio.wav",
    );
    expect(attemptObjectKey(scope, "x").startsWith(jobObjectPrefix(scope.namespace, scope.jobUid))).toBe(
      true,
    );
  });

  it("refuses names that would leave the attempt's prefix", () => {
    for (const bad of ["", ".", "..", "../x", "a/b", "x".repeat(129), ".hidden", "sp ace"])
      expect(() => attemptObjectKey(scope, bad)).toThrow();
    expect(() => attemptObjectKey({ ...scope, attempt: 0 }, "x")).toThrow(/attempt/);
    expect(() => attemptObjectKey({ ...scope, namespace: "Bad_NS" }, "x")).toThrow(/namespace/);
  });

  it("gives different attempts and jobs different keys (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 1000 }), (a, b) => {
        const ka = attemptObjectKey({ ...scope, attempt: a }, "out");
        const kb = attemptObjectKey({ ...scope, attempt: b }, "out");
        return (a === b) === (ka === kb);
      }),
    );
  });
});

describe("inputObjectKey", () => {
  it("takes s3://<bucket>/<key> under the job's namespace", () => {
    expect(inputObjectKey("s3://media/studio-a/episodes/42.wav", "media", "studio-a")).toBe(
      "studio-a/episodes/42.wav",
    );
  });

  it("refuses another namespace's key, another bucket, dot segments and other schemes", () => {
    expect(() => inputObjectKey("s3://media/studio-b/secret.wav", "media", "studio-a")).toThrow(
      /under its namespace/,
    );
    expect(() => inputObjectKey("s3://other/studio-a/x.wav", "media", "studio-a")).toThrow(
      /bucket media only/,
    );
    expect(() => inputObjectKey("s3://media/studio-a/../studio-b/x", "media", "studio-a")).toThrow(
      /segments/,
    );
    expect(() => inputObjectKey("s3://media/studio-a//x", "media", "studio-a")).toThrow(/segments/);
    expect(() => inputObjectKey("s3://media/studio-a", "media", "studio-a")).toThrow(/under its namespace/);
    expect(() => inputObjectKey("https://example.com/studio-a/x", "media", "studio-a")).toThrow(/s3:\/\//);
    // A namespace whose name is another's prefix is another namespace.
    expect(() => inputObjectKey("s3://media/studio-ab/x", "media", "studio-a")).toThrow(
      /under its namespace/,
    );
  });
});

describe("attemptUrlExpiry", () => {
  it("ends at the latest start plus the execution timeout, plus the grace", () => {
    const d: AttemptDeadlines = { submittedAt: t0, startBy: at(300), executionTimeoutSeconds: 600 };
    expect(attemptUrlExpiry(d)).toEqual(at(900 + URL_GRACE_SECONDS));
  });

  it("without a start deadline, the provider's time-to-live bounds both queue and run", () => {
    const d: AttemptDeadlines = {
      submittedAt: t0,
      executionTimeoutSeconds: 600,
      providerExpiresAt: at(3600),
    };
    expect(attemptUrlExpiry(d)).toEqual(at(3600 + URL_GRACE_SECONDS));
    expect(attemptUrlExpiry({ ...d, startBy: at(60) })).toEqual(at(660 + URL_GRACE_SECONDS));
  });

  it("never outlives the job's active deadline", () => {
    const d: AttemptDeadlines = {
      submittedAt: t0,
      startBy: at(300),
      executionTimeoutSeconds: 600,
      activeDeadlineAt: at(120),
    };
    expect(attemptUrlExpiry(d)).toEqual(at(120 + URL_GRACE_SECONDS));
  });

  it("is undefined for an attempt nothing bounds", () => {
    expect(attemptUrlExpiry({ submittedAt: t0 })).toBeUndefined();
    expect(attemptUrlExpiry({ submittedAt: t0, startBy: at(60) })).toBeUndefined();
  });

  it("is never later than any deadline that applies, plus the grace (property)", () => {
    const secs = fc.option(fc.integer({ min: 1, max: 7 * 86400 }), { nil: undefined });
    fc.assert(
      fc.property(secs, secs, secs, secs, (startBy, exec, ttl, active) => {
        const d: AttemptDeadlines = {
          submittedAt: t0,
          ...(startBy !== undefined && { startBy: at(startBy) }),
          ...(exec !== undefined && { executionTimeoutSeconds: exec }),
          ...(ttl !== undefined && { providerExpiresAt: at(ttl) }),
          ...(active !== undefined && { activeDeadlineAt: at(active) }),
        };
        const end = attemptUrlExpiry(d);
        if (end === undefined)
          return ttl === undefined && active === undefined && (startBy === undefined || exec === undefined);
        const limit = (s: number) => end.getTime() <= at(s + URL_GRACE_SECONDS).getTime();
        return (
          (ttl === undefined || limit(ttl)) &&
          (active === undefined || limit(active)) &&
          (startBy === undefined || exec === undefined || limit(startBy + exec))
        );
      }),
    );
  });
});

describe("planAttemptIO", () => {
  const base = {
    scope,
    bucket: "media",
    inputs: { audio: { uri: "s3://media/studio-a/episodes/42.wav", sha256: "a".repeat(64), size: 1234 } },
    outputs: ["transcript.json", "subtitles.vtt"],
    deadlines: { submittedAt: t0, startBy: at(300), executionTimeoutSeconds: 600 },
  };

  it("plans one GET per input and one PUT per output, valid until the deadlines", () => {
    const res = planAttemptIO(base);
    expect(res).toEqual({
      ok: true,
      plan: {
        scope,
        signedAt: t0,
        expiresAt: at(960),
        expiresInSeconds: 960,
        gets: [{ name: "audio", key: "studio-a/episodes/42.wav", sha256: "a".repeat(64), size: 1234 }],
        puts: [
          { name: "transcript.json", key: `studio-a/${scope.jobUid}/2/transcript.json` },
          { name: "subtitles.vtt", key: `studio-a/${scope.jobUid}/2/subtitles.vtt` },
        ],
      },
    });
  });

  it("refuses an input outside the namespace with a message that names the reference", () => {
    const res = planAttemptIO({ ...base, inputs: { audio: { uri: "s3://media/studio-b/x.wav" } } });
    expect(res).toMatchObject({ ok: false, reason: "InvalidInputReference" });
    expect(!res.ok && res.message).toContain("s3://media/studio-b/x.wav");
  });

  it("refuses a bad digest or size, a bad or repeated output name", () => {
    expect(
      planAttemptIO({ ...base, inputs: { audio: { uri: base.inputs.audio.uri, sha256: "XYZ" } } }),
    ).toMatchObject({
      ok: false,
      reason: "InvalidInputReference",
    });
    expect(
      planAttemptIO({ ...base, inputs: { audio: { uri: base.inputs.audio.uri, size: -1 } } }),
    ).toMatchObject({
      ok: false,
    });
    expect(planAttemptIO({ ...base, outputs: ["../x"] })).toMatchObject({
      ok: false,
      reason: "InvalidOutputName",
    });
    expect(planAttemptIO({ ...base, outputs: ["a", "a"] })).toMatchObject({
      ok: false,
      reason: "InvalidOutputName",
    });
  });

  it("mints nothing for an unbounded attempt, one past its deadlines, or one beyond 7 days", () => {
    expect(planAttemptIO({ ...base, deadlines: { submittedAt: t0 } })).toMatchObject({
      ok: false,
      reason: "StorageUnbounded",
    });
    expect(
      planAttemptIO({ ...base, deadlines: { submittedAt: t0, activeDeadlineAt: at(-3600) } }),
    ).toMatchObject({ ok: false, reason: "StorageDeadlinePassed" });
    expect(
      planAttemptIO({
        ...base,
        deadlines: { submittedAt: t0, startBy: at(7 * 86400), executionTimeoutSeconds: 3600 },
      }),
    ).toMatchObject({ ok: false, reason: "StorageDeadlineTooLong" });
    const longest = planAttemptIO({
      ...base,
      deadlines: { submittedAt: t0, activeDeadlineAt: at(MAX_PRESIGNED_SECONDS - URL_GRACE_SECONDS) },
    });
    expect(longest.ok && longest.plan.expiresInSeconds).toBe(MAX_PRESIGNED_SECONDS);
    // Bounded by the provider's longest time-to-live (7 days): URLs for 7 days, without the grace.
    const ttl = planAttemptIO({
      ...base,
      deadlines: { submittedAt: t0, providerExpiresAt: at(MAX_PRESIGNED_SECONDS) },
    });
    expect(ttl.ok && [ttl.plan.expiresInSeconds, ttl.plan.expiresAt]).toEqual([
      MAX_PRESIGNED_SECONDS,
      at(MAX_PRESIGNED_SECONDS),
    ]);
  });
});
