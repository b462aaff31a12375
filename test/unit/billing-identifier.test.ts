// One meter identifier per attempt, wherever it is needed (the send, the account's count, the CLI):
// the recorded one when usage was written, else the one derived from the job's uid.
import { describe, expect, it } from "vitest";
import { attemptIdentifier, meterIdentifier, reportedCountId } from "../../src/billing/identifier.js";

const UID = "0d4f6c2e-8b1a-4c3d-9e5f-7a6b5c4d3e2f";

describe("attemptIdentifier", () => {
  const rows: Array<
    [string, string | undefined, { attempt: number; identifier?: string }, string | RangeErrorConstructor]
  > = [
    ["the recorded identifier wins", UID, { attempt: 1, identifier: "recorded-1" }, "recorded-1"],
    [
      "recorded, even without an object uid",
      undefined,
      { attempt: 1, identifier: "recorded-1" },
      "recorded-1",
    ],
    ["none recorded: derived from uid and attempt", UID, { attempt: 3 }, `mj_${UID}_3`],
    ["none recorded and no uid: not a job from the API server", undefined, { attempt: 1 }, RangeError],
    ["a malformed uid is refused, not sent", "a/b", { attempt: 1 }, RangeError],
    ["attempt 0 is not an attempt", UID, { attempt: 0 }, RangeError],
  ];
  it.each(rows)("%s", (_name, uid, attempt, want) => {
    if (typeof want === "string") expect(attemptIdentifier(uid, attempt)).toBe(want);
    else expect(() => attemptIdentifier(uid, attempt)).toThrow(want);
  });

  it("derives what meterIdentifier derives", () => {
    expect(attemptIdentifier(UID, { attempt: 2 })).toBe(meterIdentifier({ uid: UID, attempt: 2 }));
  });

  it("keeps the reported count apart from the used count", () => {
    expect(reportedCountId("mj_x_1")).toBe("mj_x_1+reported");
    expect(reportedCountId("mj_x_1")).not.toBe("mj_x_1");
  });
});
