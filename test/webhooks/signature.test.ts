// The pure signature check: the published vector, rotation, tolerance in both directions, and
// every way a header can be wrong. Over HTTP in payments.test.ts.
import { createHmac } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  precheckStripeHeader,
  signStripePayload,
  verifyStripeSignature,
} from "../../src/webhooks/signature.js";

// stripe-node (stripe@23.1.0) produces the same header: Stripe.webhooks.generateTestHeaderString.
const SECRET = "whsec_test_secret";
const T = 1700000000;
const BODY = '{"id":"evt_test_webhook","object":"event"}';
const VECTOR = "t=1700000000,v1=d95c6b7477fbd7e9f90b1b0ef5f9c7ac25abca5382460e0d988c2b2a5b71b990";
const raw = Buffer.from(BODY);
const v1 = (header: string) => header.split("v1=")[1]!;

describe("signStripePayload", () => {
  it("reproduces the Stripe test vector", () => {
    expect(signStripePayload(BODY, SECRET, T)).toBe(VECTOR);
    expect(signStripePayload(raw, SECRET, T)).toBe(VECTOR);
  });
});

describe("verifyStripeSignature", () => {
  const verify = (
    header: string | undefined,
    opts: { body?: Buffer; secrets?: string[]; now?: number } = {},
  ) => verifyStripeSignature(opts.body ?? raw, header, opts.secrets ?? [SECRET], 300, opts.now ?? T);

  it("accepts the vector", () => {
    expect(verify(VECTOR)).toEqual({ ok: true, timestamp: T });
  });

  it("rejects a tampered body and a wrong secret", () => {
    expect(verify(VECTOR, { body: Buffer.from(BODY.replace("webhook", "webhooK")) })).toEqual({
      ok: false,
      reason: "no_matching_signature",
    });
    expect(verify(VECTOR, { body: Buffer.from(`${BODY} `) })).toMatchObject({ ok: false });
    expect(verify(VECTOR, { secrets: ["whsec_other"] })).toEqual({
      ok: false,
      reason: "no_matching_signature",
    });
  });

  it("takes any v1 and any configured secret (rotation)", () => {
    const oldSig = v1(signStripePayload(BODY, "whsec_old", T));
    const newSig = v1(signStripePayload(BODY, "whsec_new", T));
    // The provider signs with both while rotating; we may know either or both.
    const both = `t=${T},v1=${oldSig},v1=${newSig}`;
    expect(verify(both, { secrets: ["whsec_new"] }).ok).toBe(true);
    expect(verify(both, { secrets: ["whsec_old"] }).ok).toBe(true);
    // We know both, the provider signs with the second only.
    expect(verify(`t=${T},v1=${newSig}`, { secrets: ["whsec_old", "whsec_new"] }).ok).toBe(true);
    expect(verify(`t=${T},v1=${"0".repeat(64)},v1=${newSig},v0=ignored`, { secrets: ["whsec_new"] }).ok).toBe(
      true,
    );
    expect(verify(`t=${T},v1=${oldSig}`, { secrets: ["whsec_new", "whsec_newer"] }).ok).toBe(false);
  });

  it("applies the tolerance in both directions, boundaries included", () => {
    expect(verify(VECTOR, { now: T + 300 }).ok).toBe(true);
    expect(verify(VECTOR, { now: T - 300 }).ok).toBe(true);
    expect(verify(VECTOR, { now: T + 301 })).toEqual({ ok: false, reason: "timestamp_outside_tolerance" });
    expect(verify(VECTOR, { now: T - 301 })).toEqual({ ok: false, reason: "timestamp_outside_tolerance" });
  });

  it("checks the signature before the timestamp, so a forgery never reads as merely stale", () => {
    expect(verify(VECTOR, { secrets: ["whsec_other"], now: T + 10_000 })).toEqual({
      ok: false,
      reason: "no_matching_signature",
    });
  });

  it("names what is wrong with a missing or malformed header", () => {
    const sig = v1(VECTOR);
    const cases: Array<[string | undefined, string]> = [
      [undefined, "missing_header"],
      ["", "missing_header"],
      ["   ", "missing_header"],
      ["garbage", "malformed_header"],
      [`t=${T},v1=${sig},junk`, "malformed_header"],
      [`t=abc,v1=${sig}`, "malformed_header"],
      [`t=-5,v1=${sig}`, "malformed_header"],
      [`t=${T},t=${T},v1=${sig}`, "malformed_header"],
      [`${VECTOR}, ${VECTOR}`, "malformed_header"], // two headers joined by Node
      [`t=${T},${Array(17).fill(`v1=${sig}`).join(",")}`, "malformed_header"],
      [`t=${T},v1=${sig}${"x".repeat(9000)}`, "malformed_header"],
      [`v1=${sig}`, "missing_timestamp"],
      [`t=${T}`, "missing_v1_signature"],
      [`t=${T},v1=`, "missing_v1_signature"],
      [`t=${T},v1=${sig.slice(0, 63)}`, "missing_v1_signature"],
      [`t=${T},v1=${sig}00`, "missing_v1_signature"],
      [`t=${T},v1=${"z".repeat(64)}`, "missing_v1_signature"],
      [`t=${T},v0=${sig}`, "missing_v1_signature"],
    ];
    for (const [header, reason] of cases)
      expect(verify(header), String(header).slice(0, 80)).toEqual({ ok: false, reason });
  });

  it("tolerates spaces around items, as Stripe's own example headers have them", () => {
    expect(verify(`t=${T}, v1=${v1(VECTOR)}`).ok).toBe(true);
  });

  it("refuses everything when no secret is configured", () => {
    expect(verify(VECTOR, { secrets: [] })).toEqual({ ok: false, reason: "no_secret_configured" });
    expect(verify(VECTOR, { secrets: [""] })).toEqual({ ok: false, reason: "no_secret_configured" });
  });

  it("signs the exact bytes, whatever they are (not a re-encoding of them)", () => {
    const bytes = Buffer.from([0x7b, 0xff, 0xfe, 0x00, 0x7d]);
    const header = signStripePayload(bytes, SECRET, T);
    expect(verify(header, { body: bytes }).ok).toBe(true);
    expect(verify(header, { body: Buffer.from(bytes.toString("utf8")) }).ok).toBe(false);
  });

  it("agrees with an independent HMAC, and any change of body, secret or time breaks it (property)", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 512 }),
        fc.string({ minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 4_000_000_000 }),
        fc.nat({ max: 511 }),
        (bytes, secret, t, at) => {
          const body = Buffer.from(bytes);
          const mac = createHmac("sha256", secret).update(`${t}.`).update(body).digest("hex");
          const header = signStripePayload(body, secret, t);
          expect(header).toBe(`t=${t},v1=${mac}`);
          expect(verifyStripeSignature(body, header, [secret], 300, t).ok).toBe(true);
          expect(verifyStripeSignature(body, header, [`${secret}x`], 300, t).ok).toBe(false);
          expect(
            verifyStripeSignature(body, header.replace(`t=${t}`, `t=${t + 1}`), [secret], 300, t).ok,
          ).toBe(false);
          if (body.length > 0) {
            const changed = Buffer.from(body);
            const i = at % body.length;
            changed[i] = changed[i]! ^ 0x01;
            expect(verifyStripeSignature(changed, header, [secret], 300, t).ok).toBe(false);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("precheckStripeHeader (before the body is read)", () => {
  const pre = (header: string | undefined, now = T, secrets = [SECRET]) =>
    precheckStripeHeader(header, secrets, 300, now);

  it("passes a well-formed, fresh header whatever its signature", () => {
    expect(pre(VECTOR)).toBeUndefined();
    expect(pre(`t=${T},v1=${"ab".repeat(32)}`)).toBeUndefined();
  });

  it("refuses what can be refused without the body: no secret, no header, bad form, stale or future time", () => {
    expect(pre(VECTOR, T, [])).toBe("no_secret_configured");
    expect(pre(undefined)).toBe("missing_header");
    expect(pre(" ")).toBe("missing_header");
    expect(pre("garbage")).toBe("malformed_header");
    expect(pre(`v1=${v1(VECTOR)}`)).toBe("missing_timestamp");
    expect(pre(`t=${T}`)).toBe("missing_v1_signature");
    expect(pre(VECTOR, T + 301)).toBe("timestamp_outside_tolerance");
    expect(pre(VECTOR, T - 301)).toBe("timestamp_outside_tolerance");
  });

  it("agrees with the full check on every header the full check accepts", () => {
    fc.assert(
      fc.property(fc.integer({ min: -300, max: 300 }), (skew) => {
        const header = signStripePayload(raw, SECRET, T + skew);
        return verify0(header) && pre(header) === undefined;
      }),
    );
  });
});

const verify0 = (header: string) => verifyStripeSignature(raw, header, [SECRET], 300, T).ok;
