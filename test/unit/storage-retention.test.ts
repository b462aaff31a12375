// The sweep's plan (src/storage/retention.ts) and the store's listing as S3 writes it
// (ListObjectsV2's XML): only attempt objects of jobs that are gone are deleted, once old enough.
import { describe, expect, it } from "vitest";
import { parseListing } from "../../src/storage/client.js";
import {
  attemptObjectOwner,
  planSweep,
  readStorageSummary,
  STORAGE_USAGE_ANNOTATION,
  storageSummaryText,
  type StoredObject,
} from "../../src/storage/retention.js";
import { humanBytes } from "../../src/cli/storage.js";

const UID = "0b1e7c2a-5d3f-4e8a-9c61-2f4b8d7e6a10";
const GONE = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a";
const NOW = Date.parse("2026-11-28T12:00:00Z");
const obj = (key: string, ageS = 7_200, size = 10): StoredObject => ({
  key,
  size,
  lastModifiedMs: NOW - ageS * 1000,
});

describe("attemptObjectOwner", () => {
  it.each<[string, string, ReturnType<typeof attemptObjectOwner>]>([
    ["an attempt's object", `ns/${UID}/2/out.wav`, { namespace: "ns", jobUid: UID }],
    ["a tenant's input", "ns/episodes/42.wav", undefined],
    ["a uid-looking folder with a non-number attempt", `ns/${UID}/final/out.wav`, undefined],
    ["deeper than an attempt's object", `ns/${UID}/1/a/b`, undefined],
    ["attempt 0", `ns/${UID}/0/out.wav`, undefined],
    ["an upper-case uid (not the apiserver's)", `ns/${UID.toUpperCase()}/1/out.wav`, undefined],
  ])("%s", (_n, key, owner) => expect(attemptObjectOwner(key)).toEqual(owner));
});

describe("planSweep", () => {
  const objects = [
    obj(`ns/${UID}/1/out.wav`, 7_200, 100),
    obj(`ns/${GONE}/1/out.wav`, 7_200, 50),
    obj(`ns/${GONE}/2/out.wav`, 60, 5),
    obj("ns/episodes/42.wav", 99_999, 1_000),
    obj(`other/${UID}/1/out.wav`, 7_200, 7),
  ];
  const plan = planSweep({ objects, liveJobs: new Set([`ns/${UID}`]), nowMs: NOW, minAgeMs: 3_600_000 });

  it("deletes a gone job's objects once old enough; a young one waits for a later sweep", () => {
    expect(plan.delete.map((o) => o.key)).toEqual([`ns/${GONE}/1/out.wav`, `other/${UID}/1/out.wav`]);
  });

  it("never deletes a tenant's own key, however old, nor a live job's object", () => {
    expect(plan.delete.map((o) => o.key)).not.toContain("ns/episodes/42.wav");
    expect(plan.delete.map((o) => o.key)).not.toContain(`ns/${UID}/1/out.wav`);
  });

  it("says what each namespace stores, orphans included (a uid is live only in its own namespace)", () => {
    expect(plan.namespaces).toEqual([
      { namespace: "ns", objects: 4, bytes: 1_155, orphans: 2, orphanBytes: 55 },
      { namespace: "other", objects: 1, bytes: 7, orphans: 1, orphanBytes: 7 },
    ]);
  });

  it("keeps an object whose time the store did not give", () => {
    const odd = { key: `ns/${GONE}/1/x`, size: 1, lastModifiedMs: NaN };
    expect(planSweep({ objects: [odd], liveJobs: new Set(), nowMs: NOW, minAgeMs: 0 }).delete).toEqual([]);
  });
});

describe("parseListing", () => {
  it("reads keys (XML-escaped), sizes, times and the next page's token", () => {
    const xml = `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><IsTruncated>true</IsTruncated>
<Contents><Key>ns/a&amp;b.wav</Key><LastModified>2026-11-28T10:00:00.000Z</LastModified><ETag>&quot;x&quot;</ETag><Size>12</Size></Contents>
<Contents><Key>ns/${UID}/1/out.wav</Key><LastModified>2026-11-28T11:00:00.000Z</LastModified><Size>3</Size></Contents>
<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken></ListBucketResult>`;
    expect(parseListing(xml)).toEqual({
      objects: [
        { key: "ns/a&b.wav", size: 12, lastModifiedMs: Date.parse("2026-11-28T10:00:00.000Z") },
        { key: `ns/${UID}/1/out.wav`, size: 3, lastModifiedMs: Date.parse("2026-11-28T11:00:00.000Z") },
      ],
      next: "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=",
    });
  });

  it("has no next page when the listing is complete", () => {
    expect(parseListing("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>")).toEqual({
      objects: [],
    });
  });
});

describe("the Namespace's storage summary", () => {
  const ns = { namespace: "ns", objects: 4, bytes: 1_155, orphans: 2, orphanBytes: 55 };
  it("counts what the sweep left: its deletions are gone", () => {
    const text = storageSummaryText(ns, [obj(`ns/${GONE}/1/out.wav`, 7_200, 50), obj("other/x", 1, 7)]);
    expect(readStorageSummary({ [STORAGE_USAGE_ANNOTATION]: text! })).toEqual({
      objects: 3,
      bytes: 1_105,
      orphans: 1,
      orphanBytes: 5,
    });
  });
  it("is absent for a namespace that stores nothing, and unreadable text is no summary", () => {
    expect(storageSummaryText(undefined, [])).toBeUndefined();
    expect(readStorageSummary({ [STORAGE_USAGE_ANNOTATION]: "{nope" })).toBeUndefined();
    expect(readStorageSummary({ [STORAGE_USAGE_ANNOTATION]: '{"objects":"1"}' })).toBeUndefined();
  });
  it.each<[number, string]>([
    [0, "0 B"],
    [1023, "1023 B"],
    [1536, "1.5 KiB"],
    [5 * 2 ** 30, "5.0 GiB"],
  ])("%d bytes read %s", (n, text) => expect(humanBytes(n)).toBe(text));
});
