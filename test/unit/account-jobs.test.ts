// The running jobs of each account, for the plans' concurrency cap: from the cache's events, plus
// submissions planned and not yet in the cache.
import { describe, expect, it } from "vitest";
import { AccountJobs } from "../../src/controller/account-jobs.js";
import type { MediaJob, MediaJobStatus } from "../../src/crds/mediajob.js";

const job = (name: string, phase: MediaJobStatus["phase"], account: string | undefined = "acme"): MediaJob =>
  ({
    apiVersion: "media-orchestrator.io/v1alpha1",
    kind: "MediaJob",
    metadata: { name, namespace: "ns" },
    spec: { workload: "asr", ...(account && { account }) },
    status: { phase },
  }) as MediaJob;

describe("AccountJobs", () => {
  it("counts the account's Processing jobs, except the one asking", () => {
    const a = new AccountJobs();
    a.observe("add", job("a", "Processing"));
    a.observe("add", job("b", "Pending"));
    a.observe("add", job("c", "Processing", "other"));
    a.observe("add", job("d", "Processing", ""));
    expect(a.count("acme", "ns/b")).toBe(1);
    expect(a.count("acme", "ns/a")).toBe(0);
    a.observe("update", job("a", "Completed"), job("a", "Processing"));
    expect(a.count("acme", "ns/b")).toBe(0);
    a.observe("add", job("e", "Processing"));
    a.observe("delete", job("e", "Processing"));
    expect(a.count("acme", "ns/b")).toBe(0);
  });

  it("counts a planned submission until the cache shows it, once", () => {
    const a = new AccountJobs();
    a.reserve("acme", "ns/b");
    expect(a.count("acme", "ns/x")).toBe(1);
    // A write of the still-Pending job (its finalizer) keeps the reservation.
    a.observe("update", job("b", "Pending"), job("b", "Pending"));
    expect(a.count("acme", "ns/x")).toBe(1);
    a.observe("update", job("b", "Processing"), job("b", "Pending"));
    expect(a.count("acme", "ns/x")).toBe(1);
    a.reserve("acme", "ns/c");
    a.release("acme", "ns/c");
    expect(a.count("acme", "ns/x")).toBe(1);
  });
});
