import { describe, expect, it } from "vitest";
import { makeMediaJob } from "../support/builders.js";
import {
  ACCOUNTS_ANNOTATION,
  ACCOUNTS_USAGE_ANNOTATION,
  accountsSummary,
  readAccountsSummary,
  accountsAnnotation,
  billedAccount,
  boundAccounts,
  jobAccount,
  resolveAccount,
} from "../../src/mediajob/tenancy.js";
import type { MediaJob } from "../../src/crds/mediajob.js";

const job = (spec: Partial<MediaJob["spec"]> = {}, status?: MediaJob["status"]): MediaJob =>
  makeMediaJob("clip").ns("tenant-a").spec(spec).status(status).build();

describe("a namespace's account binding", () => {
  it.each([
    [undefined, []],
    ["", []],
    ["cus_a", ["cus_a"]],
    [" cus_a , cus_b,,cus_a ", ["cus_a", "cus_b"]],
  ])("annotation %j reads as %j", (value, expected) => {
    expect(boundAccounts(value === undefined ? {} : { [ACCOUNTS_ANNOTATION]: value })).toEqual(expected);
  });

  it("writes back what it reads, and nothing when no account is left", () => {
    expect(accountsAnnotation(["cus_a", "cus_b", "cus_a"])).toBe("cus_a,cus_b");
    expect(accountsAnnotation([])).toBeUndefined();
  });
});

describe("which account a job may bill", () => {
  const table: Array<{
    name: string;
    named?: string;
    bound: string[];
    required: boolean;
    account?: string;
    refused?: RegExp;
  }> = [
    { name: "a bound account", named: "cus_a", bound: ["cus_a"], required: true, account: "cus_a" },
    {
      name: "one of several bound",
      named: "cus_b",
      bound: ["cus_a", "cus_b"],
      required: true,
      account: "cus_b",
    },
    {
      name: "another customer's account",
      named: "cus_bob",
      bound: ["cus_a"],
      required: false,
      refused:
        /namespace tenant-a is not bound to account cus_bob \(it is bound to cus_a\): .*kubectl media bind tenant-a cus_bob/,
    },
    {
      name: "a named account in a namespace bound to none, even in a single-customer install",
      named: "cus_a",
      bound: [],
      required: false,
      refused: /not bound to account cus_a: .*kubectl media bind tenant-a cus_a/,
    },
    {
      name: "none named, one bound: the binding supplies it",
      bound: ["cus_a"],
      required: true,
      account: "cus_a",
    },
    {
      name: "none named, several bound, accounts required",
      bound: ["cus_a", "cus_b"],
      required: true,
      refused: /name one in spec.account/,
    },
    {
      name: "none named, several bound, single-customer install: unbilled",
      bound: ["cus_a", "cus_b"],
      required: false,
    },
    { name: "none named, none bound, single-customer install: unbilled", bound: [], required: false },
    {
      name: "none named, none bound, plans or metering on",
      bound: [],
      required: true,
      refused: /bound to no account.*kubectl media bind tenant-a ACCOUNT/,
    },
  ];
  it.each(table)("$name", (c) => {
    const r = resolveAccount("tenant-a", c.named, c.bound, c.required);
    if (c.refused) {
      expect("refused" in r && r.refused).toMatchObject({
        type: "Admitted",
        status: "False",
        reason: "AccountNotBound",
      });
      expect("refused" in r && r.refused.message).toMatch(c.refused);
    } else expect(r).toEqual(c.account === undefined ? {} : { account: c.account });
  });

  it("a job submitted before keeps the account it was billed to; one never submitted follows the binding", () => {
    const submitted = job({}, { phase: "Pending", attempts: 1, account: "cus_a" });
    expect(billedAccount(submitted, ["cus_b", "cus_a"], true)).toEqual({ account: "cus_a" });
    const fresh = job({}, { phase: "Pending", account: "cus_a" });
    expect(billedAccount(fresh, ["cus_b"], true)).toEqual({ account: "cus_b" });
  });

  it("the billed account is spec.account, else the one the binding supplied", () => {
    expect(jobAccount(job({ account: "cus_a" }, { account: "cus_b" }))).toBe("cus_a");
    expect(jobAccount(job({}, { account: "cus_b" }))).toBe("cus_b");
    expect(jobAccount(job())).toBeUndefined();
  });
});

describe("the accounts' summary on a Namespace", () => {
  it("holds each bound account's plan and period usage, one text for one state", () => {
    const usage = {
      periodStart: "2026-11-01T00:00:00Z",
      periodEnd: "2026-12-01T00:00:00Z",
      usedSeconds: 90,
      reportedSeconds: 60,
      limitSeconds: 3600,
    };
    const a = {
      customerId: "cus_b",
      status: { subscriptionStatus: "active", priceIds: ["price_2", "price_1"], usage },
    };
    const b = { customerId: "cus_a" };
    const text = accountsSummary([a, b])!;
    expect(text).toBe(accountsSummary([b, a]));
    expect(JSON.parse(text)).toEqual({
      cus_a: {},
      cus_b: { subscription: "active", priceIds: ["price_1", "price_2"], ...usage },
    });
    expect(accountsSummary([])).toBeUndefined();
    expect(readAccountsSummary({ [ACCOUNTS_USAGE_ANNOTATION]: text })).toEqual(JSON.parse(text));
    expect(readAccountsSummary({ [ACCOUNTS_USAGE_ANNOTATION]: "not json" })).toEqual({});
    expect(readAccountsSummary(undefined)).toEqual({});
  });
});
